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
