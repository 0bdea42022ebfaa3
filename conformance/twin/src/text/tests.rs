//! Token counting and generator determinism.

use super::*;

#[test]
fn tokens_are_words() {
    assert_eq!(count_tokens(""), 0);
    assert_eq!(count_tokens("  San Francisco is a "), 4);
    assert_eq!(count_tokens("one\ttwo\nthree"), 3);
}

#[test]
fn generated_text_counts_back_to_its_length() {
    let generator = Generator::new(fingerprint(b"San Francisco is a"), 0, 0);
    let text = generator.text(0..7);
    assert_eq!(count_tokens(&text), 7);
    assert!(text.starts_with(' '));
}

#[test]
fn greedy_output_depends_only_on_prompt_and_seeds() {
    let a = Generator::new(fingerprint(b"hello world"), 0, 1);
    let b = Generator::new(fingerprint(b"hello world"), 0, 1);
    assert_eq!(a.text(0..32), b.text(0..32));
    assert_eq!(a.natural_length(), b.natural_length());
    let other_prompt = Generator::new(fingerprint(b"hello there"), 0, 1);
    assert_ne!(a.text(0..32), other_prompt.text(0..32));
    let other_seed = Generator::new(fingerprint(b"hello world"), 0, 2);
    assert_ne!(a.text(0..32), other_seed.text(0..32));
}

proptest::proptest! {
    #[test]
    fn natural_length_stays_in_range(prompt in proptest::prelude::any::<u64>(), sample in proptest::prelude::any::<u64>()) {
        let n = Generator::new(prompt, sample, 0).natural_length();
        proptest::prop_assert!((1..=EOS_LENGTH_MAX).contains(&n));
    }
}

#[test]
fn the_load_generators_prompts_count_at_their_drawn_length() {
    use rand::SeedableRng as _;

    let mut rng = rand_chacha::ChaCha8Rng::seed_from_u64(1);
    for len in [1, 2, 64, 1024] {
        let prompt = afd_conformance::bench::random_prompt(&mut rng, len);
        assert_eq!(count_tokens(&prompt), len);
    }
}
