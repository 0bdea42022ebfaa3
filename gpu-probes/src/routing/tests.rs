//! Routing draws and the plans they fix.

use expect_test::expect;
use proptest::prelude::*;

use super::*;

#[test]
fn routing_names_parse_and_print() {
    assert_eq!("uniform".parse::<Routing>().unwrap(), Routing::Uniform);
    assert_eq!(
        "power-law:1.2".parse::<Routing>().unwrap(),
        Routing::PowerLaw { alpha: 1.2 }
    );
    assert_eq!(
        Routing::PowerLaw { alpha: 1.2 }.to_string(),
        "power-law:1.2"
    );
    for bad in [
        "zipf",
        "power-law:",
        "power-law:-1",
        "power-law:nan",
        "power-law:9",
    ] {
        let err = bad.parse::<Routing>().unwrap_err();
        assert!(err.to_string().contains(bad), "{err}");
    }
}

#[test]
fn small_plan_pads_every_expert_to_the_busiest() {
    let choices = vec![vec![2, 0], vec![2, 3], vec![3, 2]];
    let plan = RoutingPlan::new(&choices, 4);
    expect![[r#"
        RoutingPlan {
            tokens: 3,
            experts_per_token: 2,
            active: [
                0,
                2,
                3,
            ],
            counts: [
                1,
                3,
                2,
            ],
            max_tokens_per_expert: 3,
            gather: [
                0,
                -1,
                -1,
                0,
                1,
                2,
                1,
                2,
                -1,
            ],
            slots: [
                3,
                0,
                4,
                6,
                7,
                5,
            ],
        }
    "#]]
    .assert_debug_eq(&plan);
}

#[test]
fn draws_are_reproducible_per_seed_and_stream() {
    let a = draw(Routing::Uniform, 64, 6, 32, 7, 1);
    assert_eq!(a, draw(Routing::Uniform, 64, 6, 32, 7, 1));
    assert_ne!(a, draw(Routing::Uniform, 64, 6, 32, 7, 2));
    assert_ne!(a, draw(Routing::Uniform, 64, 6, 32, 8, 1));
}

#[test]
fn power_law_concentrates_load() {
    let uniform = RoutingPlan::new(&draw(Routing::Uniform, 64, 6, 512, 1, 0), 64);
    let skewed = RoutingPlan::new(
        &draw(Routing::PowerLaw { alpha: 1.2 }, 64, 6, 512, 1, 0),
        64,
    );
    assert!(skewed.max_tokens_per_expert > 2 * uniform.max_tokens_per_expert);
}

#[test]
fn grid_plan_spreads_active_experts() {
    let plan = RoutingPlan::uniform_grid(64, 4, 8);
    assert_eq!(plan.active, vec![0, 16, 32, 48]);
    assert_eq!(plan.rows(), 32);
    assert!(!plan.is_all_experts(64));
    assert!(RoutingPlan::uniform_grid(8, 8, 1).is_all_experts(8));
}

proptest! {
    #[test]
    fn plans_route_every_choice_to_a_row_of_its_expert(
        n_experts in 1usize..40,
        k_seed in 0usize..100,
        tokens in 1usize..60,
        seed in 0u64..1000,
        alpha in prop::option::of(0.1f64..3.0),
    ) {
        let k = 1 + k_seed % n_experts.min(8);
        let routing = alpha.map_or(Routing::Uniform, |alpha| Routing::PowerLaw { alpha });
        let choices = draw(routing, n_experts, k, tokens, seed, 3);
        for experts in &choices {
            let mut sorted = experts.clone();
            sorted.sort_unstable();
            sorted.dedup();
            prop_assert_eq!(sorted.len(), k, "distinct experts per token");
        }
        let plan = RoutingPlan::new(&choices, n_experts);
        prop_assert_eq!(plan.counts.iter().sum::<u32>() as usize, tokens * k);
        prop_assert_eq!(plan.gather.iter().filter(|&&g| g >= 0).count(), tokens * k);
        for (t, experts) in choices.iter().enumerate() {
            for (j, expert) in experts.iter().enumerate() {
                let row = plan.slots[t * k + j] as usize;
                prop_assert_eq!(plan.gather[row], t as i32);
                let a = row / plan.max_tokens_per_expert;
                prop_assert_eq!(plan.active[a], *expert);
            }
        }
    }
}
