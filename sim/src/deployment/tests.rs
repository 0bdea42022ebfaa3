//! Building deployments from recipes: pairing by declared role, the recipe's shape, errors
//! collected across both commands, and the rank mapping of a built deployment.

use super::*;

const SERVER: &str = "CUDA_VISIBLE_DEVICES={gpu} VLLM_USE_V2_MODEL_RUNNER=1 vllm serve /m --enforce-eager --enable-expert-parallel --port {port} --additional-config '{\"afd\": {\"role\": \"{role}\"}}' &\n";

fn server(role: &str, gpu: u32, port: u32) -> String {
    SERVER
        .replace("{gpu}", &gpu.to_string())
        .replace("{port}", &port.to_string())
        .replace("{role}", role)
}

fn build(text: &str) -> Result<Deployment, DeploymentError> {
    Deployment::from_recipe(text, &RecipeOptions::default(), RuleSet::Latest)
}

#[test]
fn roles_are_paired_by_the_role_they_declare() {
    let text = server("ffn", 1, 8001) + &server("attention", 0, 8000);
    let deployment = build(&text).unwrap();
    assert_eq!(deployment.attention.http_port(), 8000);
    assert_eq!(deployment.ffn.http_port(), 8001);
    assert!(deployment.check().is_clean());
    assert_eq!(deployment.role(Role::Ffn).http_port(), 8001);
}

#[test]
fn servers_without_an_afd_block_beside_the_pair_are_ignored() {
    let prefill = "CUDA_VISIBLE_DEVICES=5 vllm serve /m --port 8005 &\n";
    let text = prefill.to_owned() + &server("attention", 0, 8000) + &server("ffn", 1, 8001);
    assert!(build(&text).unwrap().check().is_clean());
    let three = text + &server("ffn", 2, 8002);
    let err = build(&three).unwrap_err();
    assert_eq!(
        err.to_string(),
        "1:1: found 3 vllm serve commands with an afd block among 4; an AFD deployment has exactly two (Attention and FFN)"
    );
}

#[test]
fn a_single_server_is_not_a_deployment() {
    let err = build(&server("attention", 0, 8000)).unwrap_err();
    assert!(matches!(err, DeploymentError::Shape { .. }));
    assert!(build("wait\n").is_err());
}

#[test]
fn argument_errors_of_both_commands_are_reported_together() {
    let text = server("attention", 0, 8000).replace("--port 8000", "--port x")
        + &server("ffn", 1, 8001).replace("--enforce-eager", "--max-num-seqs y");
    let problems: Vec<String> = build(&text)
        .unwrap_err()
        .problems()
        .into_iter()
        .map(|(location, _, message)| format!("{location} {message}"))
        .collect();
    assert_eq!(
        problems,
        [
            "1:113 --port expects a TCP port 1..65535, got 'x'",
            "2:80 --max-num-seqs expects a positive integer, got 'y'"
        ]
    );
}

#[test]
fn the_topology_comes_from_the_afd_block() {
    let text = server("attention", 0, 8000).replace(
        "\"role\": \"attention\"",
        "\"role\": \"attention\", \"num_attention_ranks\": 4, \"num_ffn_ranks\": 2, \"port\": 6269",
    ) + &server("ffn", 1, 8001);
    let deployment = build(&text).unwrap();
    let topology = deployment.topology().unwrap();
    assert_eq!(
        (
            topology.attention_ranks(),
            topology.ffn_ranks(),
            topology.base_port()
        ),
        (4, 2, 6269)
    );
    let broken = server("attention", 0, 8000).replace(
        "\"role\": \"attention\"",
        "\"role\": \"attention\", \"num_ffn_ranks\": 0",
    ) + &server("ffn", 1, 8001);
    assert!(build(&broken).unwrap().topology().is_err());
}

/// One host's command of a role, FFN DP 4 x TP 1 by default: `{host}`, `{gpus}` and `{extra}`
/// (the DP flags of its share) filled in.
fn node(role: &str, host: &str, gpus: &str, extra: &str) -> String {
    format!(
        "VLLM_HOST_IP={host} CUDA_VISIBLE_DEVICES={gpus} VLLM_USE_V2_MODEL_RUNNER=1 vllm serve /m --enforce-eager --enable-expert-parallel --data-parallel-size 4 {extra} --additional-config '{{\"afd\": {{\"role\": \"{role}\", \"host\": \"10.0.0.2\", \"num_attention_ranks\": 4, \"num_ffn_ranks\": 4}}}}' &\n"
    )
}

/// A 4A4F pair whose FFN role spreads over hosts 10.0.0.2 (DP ranks 0-1) and 10.0.0.3 (2-3), and
/// whose Attention role runs whole on 10.0.0.1; `second` replaces the FFN's second host's DP flags.
fn ffn_over_two_hosts(second: &str) -> String {
    node("attention", "10.0.0.1", "0,1,2,3", "")
        + &node(
            "ffn",
            "10.0.0.2",
            "0,1",
            "--data-parallel-size-local 2 --data-parallel-address 10.0.0.2",
        )
        + &node("ffn", "10.0.0.3", "0,1", second)
}

fn errors(deployment: &Deployment) -> Vec<String> {
    deployment
        .check()
        .findings()
        .iter()
        .filter(|f| f.rule.info().severity == crate::deployment::Severity::Error)
        .map(|f| format!("{}: {}", f.rule.id(), f.message))
        .collect()
}

#[test]
fn a_role_spread_over_hosts_is_one_role_with_its_nodes() {
    let good = "--headless --data-parallel-size-local 2 --data-parallel-start-rank 2 --data-parallel-address 10.0.0.2";
    let deployment = build(&ffn_over_two_hosts(good)).unwrap();
    assert_eq!(deployment.nodes.len(), 1);
    assert_eq!(deployment.ffn.dp_start_rank(), 0);
    assert_eq!(deployment.nodes[0].dp_start_rank(), 2);
    assert!(deployment.nodes[0].headless());
    assert_eq!(deployment.parts(Role::Ffn).len(), 2);
    assert_eq!(deployment.parts(Role::Attention).len(), 1);
    assert_eq!(deployment.role_hosts(Role::Ffn), ["10.0.0.2", "10.0.0.3"]);
    // The NICs of a host are shared by the ranks on it: 4 Attention ranks on 10.0.0.1, 2 FFN
    // ranks on each FFN host.
    assert_eq!(deployment.max_ranks_per_host(Role::Attention), 4);
    assert_eq!(deployment.max_ranks_per_host(Role::Ffn), 2);
    assert!(deployment.on_different_hosts());
    assert_eq!(errors(&deployment), Vec::<String>::new());
    // The same GPUs 0,1 on the two FFN hosts are different GPUs; on one host they are not.
    let same_host = node("attention", "10.0.0.1", "0,1,2,3", "")
        + &node(
            "ffn",
            "10.0.0.2",
            "0,1",
            "--data-parallel-size-local 2 --data-parallel-address 10.0.0.2",
        )
        + &node("ffn", "10.0.0.2", "1,2", good);
    assert_eq!(
        errors(&build(&same_host).unwrap()),
        ["cross.dp-nodes: GPU 1 of host 10.0.0.2 is given to two commands"]
    );
}

#[test]
fn the_nodes_of_a_role_must_tile_its_dp_ranks_and_agree_with_its_primary() {
    let cases: &[(&str, &[&str])] = &[
        (
            "--headless --data-parallel-size-local 1 --data-parallel-start-rank 3 --data-parallel-address 10.0.0.2",
            &[
                "cross.dp-nodes: DP rank 2 of the FFN role is started by no command (this one starts at 3)",
            ],
        ),
        (
            "--headless --data-parallel-size-local 2 --data-parallel-start-rank 1 --data-parallel-address 10.0.0.2",
            &[
                "cross.dp-nodes: this FFN command starts DP ranks 1-2 but DP rank 1 is already started by another command of the role",
            ],
        ),
        (
            "--headless --data-parallel-size-local 1 --data-parallel-start-rank 2 --data-parallel-address 10.0.0.2",
            &[
                "cross.dp-nodes: DP rank 3 of the FFN role is started by no command: its commands start 3 of DP 4 (--data-parallel-size-local); give each other host its command (--headless --data-parallel-start-rank 3 ...)",
            ],
        ),
        (
            "--headless --data-parallel-size-local 2 --data-parallel-start-rank 2",
            &[
                "cross.dp-nodes: the FFN role runs on 2 hosts but this command sets no --data-parallel-address; vLLM then uses 127.0.0.1 and the other hosts never reach the primary",
            ],
        ),
        (
            "--headless --data-parallel-size-local 2 --data-parallel-start-rank 2 --data-parallel-address 10.0.0.3",
            &[
                "cross.dp-nodes: this FFN command dials --data-parallel-address 10.0.0.3 but the role's primary command runs on 10.0.0.2",
            ],
        ),
        (
            "--headless --data-parallel-size-local 2 --data-parallel-start-rank 2 --data-parallel-address 10.0.0.2 --tensor-parallel-size 2",
            &[
                "cross.dp-nodes: this FFN command runs DP 4 x PCP 1 x TP 2 x PP 1 but the role's primary command runs DP 4 x PCP 1 x TP 1 x PP 1; every host of one role gives the same sizes",
            ],
        ),
    ];
    for (second, want) in cases {
        let deployment = build(&ffn_over_two_hosts(second)).unwrap();
        let got: Vec<String> = errors(&deployment)
            .into_iter()
            .filter(|e| e.starts_with("cross.dp-nodes"))
            .collect();
        assert_eq!(got, *want, "{second}");
    }
    // One command that starts only its share of the role, with no other host: refused.
    let alone = node("attention", "10.0.0.1", "0,1,2,3", "")
        + &node("ffn", "10.0.0.2", "0,1", "--data-parallel-size-local 2");
    assert_eq!(
        errors(&build(&alone).unwrap()),
        [
            "cross.dp-nodes: DP ranks 2-3 of the FFN role are started by no command: its commands start 2 of DP 4 (--data-parallel-size-local); give each other host its command (--headless --data-parallel-start-rank 2 ...)"
        ]
    );
}

#[test]
fn a_role_of_several_commands_needs_exactly_one_primary() {
    // Two headless commands and no primary.
    let text = node("attention", "10.0.0.1", "0,1,2,3", "")
        + &node(
            "ffn",
            "10.0.0.2",
            "0,1",
            "--headless --data-parallel-size-local 2",
        )
        + &node(
            "ffn",
            "10.0.0.3",
            "0,1",
            "--headless --data-parallel-size-local 2 --data-parallel-start-rank 2",
        );
    let err = build(&text).unwrap_err().to_string();
    assert!(
        err.contains(
            "the ffn role is started by 2 commands and 0 of them start DP rank 0 with an API server"
        ),
        "{err}"
    );
}

#[test]
fn the_weights_and_the_routing_a_server_returns_are_read_in_every_spelling() {
    let role = |words: &[&str]| {
        let words: Vec<String> = words.iter().map(|w| w.to_string()).collect();
        RoleConfig::from_serve_args(&words).expect("the words parse")
    };
    assert!(role(&["/m", "--load-format", "dummy"]).dummy_weights());
    assert!(role(&["/m", "--load_format=dummy"]).dummy_weights());
    assert!(!role(&["/m", "--load-format", "auto"]).dummy_weights());
    assert!(role(&["/m", "--enable-return-routed-experts"]).returns_routed_experts());
    assert!(
        role(&["/m", "--enable_return_routed_experts", "--enforce-eager"]).returns_routed_experts()
    );
    assert!(!role(&["/m"]).returns_routed_experts());
    let last_says_no = role(&[
        "/m",
        "--enable-return-routed-experts",
        "--no-enable-return-routed-experts",
    ]);
    assert!(!last_says_no.returns_routed_experts());
}
