//! Pairs and command lines the twin must refuse, each naming its cause, with exit status 2 (1 for a
//! rendezvous that timed out).

use std::time::Duration;

use crate::support::*;

#[tokio::test]
async fn mismatched_rank_counts_abort_both_roles_naming_the_field() {
    let afd_port = free_port(0);
    let http = free_port(0);
    // The FFN role believes in 4 Attention ranks; the Attention role has 2.
    let mut attention = Twin::spawn(
        &shape_args(Role::Attention, afd_port, http, 1, 2, 2, 2),
        &[],
    );
    let mut ffn = Twin::spawn(&shape_args(Role::Ffn, afd_port, http, 1, 2, 4, 2), &[]);
    for twin in [&mut attention, &mut ffn] {
        let status = twin
            .wait_exit(STARTUP)
            .await
            .expect("a mismatched twin exits");
        assert_eq!(status.code(), Some(2), "{}", twin.log());
        let log = twin.log();
        assert!(log.contains("AFD configuration mismatch"), "{log}");
        assert!(log.contains("num_attention_ranks: the"), "{log}");
        assert!(!log.contains("Application startup complete."), "{log}");
    }
}

#[tokio::test]
async fn a_pair_that_afd_sim_check_rejects_is_refused_after_the_rendezvous() {
    // Each role alone is fine; together they share GPUs 0 and 1 (rule cross.gpu-overlap).
    let (afd_port, http) = (free_port(0), free_port(0));
    let gpus = [("CUDA_VISIBLE_DEVICES", "0,1")];
    let mut attention =
        Twin::spawn_with_env(&seed_args(Role::Attention, afd_port, http), &[], &gpus);
    let mut ffn = Twin::spawn_with_env(&seed_args(Role::Ffn, afd_port, http), &[], &gpus);
    for twin in [&mut attention, &mut ffn] {
        let status = twin
            .wait_exit(STARTUP)
            .await
            .expect("a rejected pair exits");
        assert_eq!(status.code(), Some(2), "{}", twin.log());
        assert!(
            twin.log().contains("error[cross.gpu-overlap]"),
            "{}",
            twin.log()
        );
    }
}

#[tokio::test]
async fn a_pair_the_simulator_cannot_serve_is_refused_by_both_roles() {
    // vLLM refuses to start when one request of max_model_len tokens cannot fit the KV cache.
    let (afd_port, http) = (free_port(0), free_port(0));
    let mut words = seed_args(Role::Attention, afd_port, http);
    words.extend(["--max-model-len".to_owned(), "100000000".to_owned()]);
    let mut attention = Twin::spawn(&words, &[]);
    let mut ffn = Twin::spawn(&seed_args(Role::Ffn, afd_port, http), &[]);
    for twin in [&mut attention, &mut ffn] {
        let status = twin
            .wait_exit(STARTUP)
            .await
            .expect("an unservable pair exits");
        assert_eq!(status.code(), Some(2), "{}", twin.log());
        let log = twin.log();
        assert!(
            log.contains("cannot hold one request of max_model_len 100000000 tokens"),
            "{log}"
        );
        assert!(!log.contains("Application startup complete."), "{log}");
    }
    assert!(
        ffn.log()
            .contains("the attention twin refused to serve this pair")
    );
}

#[tokio::test]
async fn two_attention_roles_clash() {
    let afd_port = free_port(0);
    let mut first = Twin::spawn(&seed_args(Role::Attention, afd_port, free_port(0)), &[]);
    tokio::time::sleep(Duration::from_millis(150)).await;
    let mut second = Twin::spawn(&seed_args(Role::Attention, afd_port, free_port(0)), &[]);
    for twin in [&mut first, &mut second] {
        let status = twin
            .wait_exit(STARTUP)
            .await
            .expect("a clashing twin exits");
        assert_eq!(status.code(), Some(2), "{}", twin.log());
        assert!(twin.log().contains("role clash"), "{}", twin.log());
    }
}

#[tokio::test]
async fn attention_alone_gives_up_after_the_rendezvous_timeout() {
    let words = seed_args(Role::Attention, free_port(0), free_port(0));
    let mut twin = Twin::spawn(&words, &["--rendezvous-timeout", "0.5"]);
    let status = twin.wait_exit(STARTUP).await.expect("gives up");
    assert_eq!(status.code(), Some(1), "{}", twin.log());
    assert!(
        twin.log().contains("no ffn twin joined the AFD rendezvous"),
        "{}",
        twin.log()
    );
}

async fn refused(words: Vec<String>, extra: &[&str], needle: &str) {
    let mut twin = Twin::spawn(&words, extra);
    let status = twin
        .wait_exit(STARTUP)
        .await
        .expect("a bad command line exits at once");
    assert_eq!(status.code(), Some(2), "{}", twin.log());
    assert!(
        twin.log().contains(needle),
        "expected '{needle}' in:\n{}",
        twin.log()
    );
}

#[tokio::test]
async fn bad_command_lines_are_refused_naming_the_cause() {
    let (afd, http) = (free_port(0), free_port(0));
    let seed = || seed_args(Role::Attention, afd, http);
    let mut bad_value = seed();
    bad_value.extend(["--max-num-seqs".to_owned(), "sixty-four".to_owned()]);
    refused(
        bad_value,
        &[],
        "--max-num-seqs expects a positive integer, got 'sixty-four'",
    )
    .await;
    // 1 Attention rank for 2 FFN ranks breaks afd-spec §1.4 rule 5.
    refused(
        shape_args(Role::Attention, afd, http, 1, 1, 1, 2),
        &[],
        "afd.attention-ge-ffn",
    )
    .await;
    // DP x TP must equal the role's rank count.
    refused(
        shape_args(Role::Attention, afd, http, 1, 1, 2, 2),
        &[],
        "error[afd.role-ranks]",
    )
    .await;
    // 3A2F is illegal under v0.26 (A % F != 0).
    refused(
        shape_args(Role::Attention, afd, http, 1, 3, 3, 2),
        &["--rules", "v0.26"],
        "v026.divisible-ranks",
    )
    .await;
    refused(
        seed(),
        &["--fault", "no-such-fault"],
        "unknown fault 'no-such-fault'",
    )
    .await;
    refused(
        seed(),
        &["--gpu", "b300"],
        "--gpu \"b300\" is not one of h200",
    )
    .await;
    let mut colliding = seed_args(Role::Attention, afd, afd);
    colliding.push("--enforce-eager".to_owned());
    refused(colliding, &[], "cross.http-port-vs-rendezvous").await;
}
