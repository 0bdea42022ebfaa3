//! Launcher variables and the TCP id exchange, on 127.0.0.1 only.

use std::collections::HashMap;

use proptest::prelude::*;

use super::*;

fn vars(pairs: &[(&str, &str)]) -> impl Fn(&str) -> Option<String> {
    let map: HashMap<String, String> = pairs
        .iter()
        .map(|(k, v)| ((*k).to_owned(), (*v).to_owned()))
        .collect();
    move |name| map.get(name).cloned()
}

const TORCHRUN: [(&str, &str); 5] = [
    ("RANK", "1"),
    ("WORLD_SIZE", "2"),
    ("LOCAL_RANK", "1"),
    ("MASTER_ADDR", "127.0.0.1"),
    ("MASTER_PORT", "29500"),
];

#[test]
fn no_variables_means_threads() {
    assert_eq!(LauncherEnv::from_vars(vars(&[])).unwrap(), None);
}

#[test]
fn torchrun_variables_are_read() {
    let env = LauncherEnv::from_vars(vars(&TORCHRUN)).unwrap().unwrap();
    assert_eq!(
        env,
        LauncherEnv {
            rank: 1,
            world_size: 2,
            local_rank: 1,
            master_addr: "127.0.0.1".to_owned(),
            master_port: 29500,
        }
    );
}

#[test]
fn bad_variables_are_named() {
    let err = LauncherEnv::from_vars(vars(&TORCHRUN[..3])).unwrap_err();
    assert_eq!(
        err.to_string(),
        "launcher variables are incomplete: RANK is set but MASTER_ADDR is not"
    );
    let mut bad = TORCHRUN;
    bad[0] = ("RANK", "2");
    assert_eq!(
        LauncherEnv::from_vars(vars(&bad)).unwrap_err().to_string(),
        "launcher variable RANK=\"2\" is invalid: must be below WORLD_SIZE 2"
    );
    let mut bad = TORCHRUN;
    bad[4] = ("MASTER_PORT", "0");
    assert_eq!(
        LauncherEnv::from_vars(vars(&bad)).unwrap_err().to_string(),
        "launcher variable MASTER_PORT=\"0\" is invalid: expected a port in 1..=65535"
    );
}

#[test]
fn three_ranks_share_the_id_and_gather_in_rank_order() {
    let listener = RootListener::bind("127.0.0.1:0").unwrap();
    let addr = listener.local_addr().to_owned();
    let id = [7u8; ID_BYTES];
    let peers: Vec<_> = (1..3)
        .map(|rank| {
            let addr = addr.clone();
            std::thread::spawn(move || {
                let (got, mut link) = join(&addr, rank, 3, Duration::from_secs(10)).unwrap();
                assert!(
                    link.gather(vec![rank as u8; rank], Duration::from_secs(10))
                        .unwrap()
                        .is_none()
                );
                got
            })
        })
        .collect();
    let mut root = listener.serve(3, &id, Duration::from_secs(10)).unwrap();
    let all = root
        .gather(vec![0], Duration::from_secs(10))
        .unwrap()
        .unwrap();
    assert_eq!(all, vec![vec![0], vec![1], vec![2, 2]]);
    for peer in peers {
        assert_eq!(peer.join().unwrap(), id);
    }
}

#[test]
fn a_missing_rank_times_out_with_its_number() {
    let listener = RootListener::bind("127.0.0.1:0").unwrap();
    let err = listener
        .serve(2, &[0; ID_BYTES], Duration::from_millis(50))
        .err()
        .unwrap();
    assert!(err.to_string().contains("waiting for rank(s) 1"), "{err}");
}

#[test]
fn a_stranger_is_refused() {
    let listener = RootListener::bind("127.0.0.1:0").unwrap();
    let addr = listener.local_addr().to_owned();
    let stranger = std::thread::spawn(move || {
        let mut stream = TcpStream::connect(addr).unwrap();
        stream.write_all(b"GET / HTTP/1.1\r\n").unwrap();
    });
    let err = listener
        .serve(2, &[0; ID_BYTES], Duration::from_secs(5))
        .err()
        .unwrap();
    stranger.join().unwrap();
    assert!(err.to_string().contains("did not speak"), "{err}");
}

#[test]
fn a_world_of_one_needs_no_network() {
    let listener = RootListener::bind("127.0.0.1:0").unwrap();
    let mut link = listener
        .serve(1, &[0; ID_BYTES], Duration::from_secs(1))
        .unwrap();
    assert_eq!(
        link.gather(vec![9], Duration::from_secs(1)).unwrap(),
        Some(vec![vec![9]])
    );
}

proptest! {
    #[test]
    fn arbitrary_variables_never_panic(
        rank in "\\PC{0,6}", world in "\\PC{0,6}", port in "\\PC{0,6}",
    ) {
        let pairs = [
            ("RANK", rank.as_str()),
            ("WORLD_SIZE", world.as_str()),
            ("LOCAL_RANK", "0"),
            ("MASTER_ADDR", "localhost"),
            ("MASTER_PORT", port.as_str()),
        ];
        let _ = LauncherEnv::from_vars(vars(&pairs));
    }

    #[test]
    fn hello_parsing_never_panics(bytes in prop::array::uniform16(any::<u8>())) {
        let _ = parse_hello(&bytes);
    }
}
