//! Rendezvous of in-process twins on loopback: both start orders, mismatches, role clashes, timeouts and
//! the v0.26 subgroup ports.

use std::time::Duration;

use afd_sim::topology::{Role, RuleSet, Topology};

use super::*;

/// Every port this test process handed out, with its span: the kernel may give a just-released
/// ephemeral port again, so two calls in a row could return the same port (a pair whose HTTP port is
/// its rendezvous port, which `cross.http-port-vs-rendezvous` refuses).
static HANDED_OUT: std::sync::Mutex<std::collections::BTreeSet<u16>> =
    std::sync::Mutex::new(std::collections::BTreeSet::new());

/// A currently free loopback port with `span` free ports after it, none handed out before by this
/// process.
pub(crate) fn free_port(span: u16) -> u16 {
    loop {
        let listener = std::net::TcpListener::bind("127.0.0.1:0").expect("bind an ephemeral port");
        let port = listener.local_addr().expect("has an address").port();
        drop(listener);
        let Some(last) = port.checked_add(span) else {
            continue;
        };
        let mut handed = HANDED_OUT.lock().expect("port registry");
        if handed.range(port..=last).next().is_some() {
            continue;
        }
        if (1..=span).all(|k| std::net::TcpListener::bind(("127.0.0.1", port + k)).is_ok()) {
            handed.extend(port..=last);
            return port;
        }
    }
}

pub(crate) fn words(role: Role, port: u16, attention: u32, ffn: u32) -> Vec<String> {
    let afd = format!(
        r#"{{"afd": {{"role": "{role}", "host": "127.0.0.1", "port": {port}, "num_attention_ranks": {attention}, "num_ffn_ranks": {ffn}}}}}"#
    );
    let ranks = match role {
        Role::Attention => attention,
        Role::Ffn => ffn,
    };
    let http = match role {
        Role::Attention => "18001",
        Role::Ffn => "18002",
    };
    [
        "m",
        "--tensor-parallel-size",
        &ranks.to_string(),
        "--enable-expert-parallel",
        "--additional-config",
        &afd,
        "--port",
        http,
        "--enforce-eager",
    ]
    .iter()
    .map(|s| (*s).to_owned())
    .collect()
}

fn peer(role: Role, port: u16, attention: u32, ffn: u32, rules: RuleSet) -> PeerConfig {
    PeerConfig {
        role,
        connector: "P2pNcclAFDConnector".to_owned(),
        afd_host: "127.0.0.1".to_owned(),
        afd_port: port,
        num_attention_ranks: attention,
        num_ffn_ranks: ffn,
        async_dp: false,
        compute_gate_on_attention: false,
        rules,
        data_parallel_size: 1,
        tensor_parallel_size: attention,
        http_addr: "127.0.0.1:1".to_owned(),
        model: "m".to_owned(),
        args: words(role, port, attention, ffn),
        // The model runner each rule set's plugin needs (afd-spec §1.6, §1.9).
        env: std::collections::BTreeMap::from([(
            "VLLM_USE_V2_MODEL_RUNNER".to_owned(),
            match rules {
                RuleSet::Latest => "1",
                RuleSet::V026 => "0",
            }
            .to_owned(),
        )]),
    }
}

fn options(timeout_ms: u64) -> RendezvousOptions {
    RendezvousOptions {
        timeout: Duration::from_millis(timeout_ms),
        accept_mismatch: false,
    }
}

fn topology(p: &PeerConfig) -> Topology {
    Topology::new(p.num_attention_ranks, p.num_ffn_ranks, p.rules, p.afd_port)
        .expect("legal counts")
}

async fn pair(attention_first: bool, rules: RuleSet) {
    let port = free_port(2);
    let a = peer(Role::Attention, port, 2, 2, rules);
    let f = peer(Role::Ffn, port, 2, 2, rules);
    let (ta, tf) = (topology(&a), topology(&f));
    let delay = Duration::from_millis(150);
    let attention = async {
        if !attention_first {
            tokio::time::sleep(delay).await;
        }
        attention(&a, &ta, options(5000)).await
    };
    let ffn = async {
        if attention_first {
            tokio::time::sleep(delay).await;
        }
        ffn(&f, &tf, options(5000)).await
    };
    let (mut a_link, mut f_link) = tokio::join!(attention, ffn);
    let a_link = a_link.as_mut().expect("attention paired");
    let f_link = f_link.as_mut().expect("ffn paired");
    assert_eq!(a_link.peer.role, Role::Ffn);
    assert_eq!(f_link.peer.role, Role::Attention);
    let message = StepMessage {
        step: 0,
        stages: 2,
        tokens: vec![5, 7],
        duration: Duration::from_micros(2_500),
    };
    a_link.send_step(&message).await.expect("step sent");
    assert_eq!(
        f_link.next().await.expect("step arrives"),
        FfnEvent::Step(message)
    );
    f_link.ack(0).await.expect("ack sent");
    a_link.await_ack(0).await.expect("ack arrives");
}

#[tokio::test]
async fn pairs_when_ffn_starts_first() {
    pair(false, RuleSet::Latest).await;
}

#[tokio::test]
async fn pairs_when_attention_starts_first() {
    pair(true, RuleSet::Latest).await;
}

#[tokio::test]
async fn pairs_under_v026_with_subgroup_ports_in_either_order() {
    pair(true, RuleSet::V026).await;
    pair(false, RuleSet::V026).await;
}

#[tokio::test]
async fn rank_count_mismatch_aborts_both_naming_the_field() {
    let port = free_port(0);
    let a = peer(Role::Attention, port, 2, 2, RuleSet::Latest);
    let f = peer(Role::Ffn, port, 2, 1, RuleSet::Latest);
    let (ta, tf) = (topology(&a), topology(&f));
    let (ra, rf) = tokio::join!(
        attention(&a, &ta, options(3000)),
        ffn(&f, &tf, options(3000))
    );
    for message in [
        ra.expect_err("attention refuses").to_string(),
        rf.expect_err("ffn refuses").to_string(),
    ] {
        assert!(message.contains("num_ffn_ranks"), "{message}");
        assert!(message.contains("mismatch"), "{message}");
    }
}

#[tokio::test]
async fn two_attention_twins_clash() {
    let port = free_port(0);
    let a = peer(Role::Attention, port, 1, 1, RuleSet::Latest);
    let t = topology(&a);
    let second = async {
        tokio::time::sleep(Duration::from_millis(150)).await;
        attention(&a, &t, options(3000)).await
    };
    let (first, second) = tokio::join!(attention(&a, &t, options(3000)), second);
    for result in [first, second] {
        let message = result.expect_err("a clash aborts both").to_string();
        assert!(message.contains("role clash"), "{message}");
    }
}

#[tokio::test]
async fn two_ffn_twins_clash() {
    let port = free_port(0);
    let f = peer(Role::Ffn, port, 1, 1, RuleSet::Latest);
    let t = topology(&f);
    let second = async {
        tokio::time::sleep(Duration::from_millis(150)).await;
        ffn(&f, &t, options(3000)).await
    };
    let (first, second) = tokio::join!(ffn(&f, &t, options(3000)), second);
    for result in [first, second] {
        let message = result.expect_err("a clash aborts both").to_string();
        assert!(message.contains("role clash"), "{message}");
    }
}

#[tokio::test]
async fn attention_gives_up_after_the_timeout() {
    let port = free_port(0);
    let a = peer(Role::Attention, port, 1, 1, RuleSet::Latest);
    let err = attention(&a, &topology(&a), options(300))
        .await
        .expect_err("nobody came");
    assert!(matches!(err, RendezvousError::Timeout { .. }), "{err}");
    assert!(err.to_string().contains("--rendezvous-timeout"), "{err}");
}

#[tokio::test]
async fn mismatch_fault_pairs_anyway() {
    let port = free_port(0);
    let a = peer(Role::Attention, port, 2, 2, RuleSet::Latest);
    let f = peer(Role::Ffn, port, 2, 1, RuleSet::Latest);
    let (ta, tf) = (topology(&a), topology(&f));
    let accepting = RendezvousOptions {
        accept_mismatch: true,
        ..options(3000)
    };
    let (ra, rf) = tokio::join!(attention(&a, &ta, accepting), ffn(&f, &tf, accepting));
    ra.expect("attention pairs despite the mismatch");
    rf.expect("ffn pairs despite the mismatch");
}

#[tokio::test]
async fn a_port_probe_does_not_disturb_the_host() {
    let port = free_port(0);
    let a = peer(Role::Attention, port, 1, 1, RuleSet::Latest);
    let f = peer(Role::Ffn, port, 1, 1, RuleSet::Latest);
    let (ta, tf) = (topology(&a), topology(&f));
    let attention_side = async {
        tokio::time::sleep(Duration::from_millis(100)).await;
        // A probe that connects and leaves, then one that sends garbage.
        drop(tokio::net::TcpStream::connect(("127.0.0.1", port)).await);
        if let Ok(mut s) = tokio::net::TcpStream::connect(("127.0.0.1", port)).await {
            let _ = tokio::io::AsyncWriteExt::write_all(&mut s, b"GET / HTTP/1.1\r\n\r\n").await;
        }
        attention(&a, &ta, options(3000)).await
    };
    let (ra, rf) = tokio::join!(attention_side, ffn(&f, &tf, options(3000)));
    ra.expect("attention pairs");
    rf.expect("ffn pairs");
}
