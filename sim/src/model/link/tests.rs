//! The link model by hand arithmetic (DeepSeek-V2-Lite rows: hidden 2048 × bf16 = 4,096 bytes)
//! and its monotonicity properties.

use afd_traces::hardware::builtin_datasheets;
use proptest::prelude::*;

use super::*;

/// 64 DeepSeek-V2-Lite rows: 64 × 2048 × 2 bytes = 256 KiB, two 128 KiB NCCL chunks.
const ROWS_64: u64 = 64 * 2048 * 2;

fn shipped(kind: &str) -> Link {
    Link::from_datasheet(builtin_datasheets().link(kind).expect("shipped kind"))
}

#[test]
fn pcie_gen4_moves_64_rows_in_latency_plus_bytes_over_rate() {
    // 10 µs + 262,144 B / (32 GB/s × 0.4 = 12.8 GB/s) = 10 + 20.48 µs; one stage, no fill.
    assert_eq!(
        shipped("pcie-gen4").transfer_time(ROWS_64, 1).as_ns(),
        30_480
    );
}

#[test]
fn infiniband_pays_one_chunk_per_extra_stage() {
    // 5 µs + 262,144 / 22.5 GB/s (11.651 µs) + (2 − 1) × 131,072 / 22.5 GB/s (5.825 µs).
    assert_eq!(shipped("ib").transfer_time(ROWS_64, 1).as_ns(), 22_476);
    // One 4,096-byte row is smaller than a chunk: the fill is the whole message again.
    assert_eq!(shipped("ib").transfer_time(4096, 1).as_ns(), 5_364);
}

#[test]
fn ranks_of_a_host_share_its_nics() {
    let mut ib = shipped("ib");
    assert_eq!(nic_sharers(4, 1), 4);
    assert_eq!(nic_sharers(4, 3), 2);
    assert_eq!(nic_sharers(0, 0), 1);
    // Four ranks on one NIC: 22.5 / 4 GB/s each; 5 + 46.603 + 23.302 µs.
    assert_eq!(ib.transfer_time(ROWS_64, 4).as_ns(), 74_905);
    ib.nics = 2;
    assert_eq!(ib.transfer_time(ROWS_64, 4).as_ns(), 39_953);
}

#[test]
fn fan_in_serialises_the_bodies_and_fills_once() {
    // Two senders of 256 KiB at one IB rank: 5 + 2 × 11.651 + 5.825 µs.
    assert_eq!(shipped("ib").fan_in_time(ROWS_64, 2, 1).as_ns(), 34_127);
    assert_eq!(
        shipped("ib").fan_in_time(ROWS_64, 1, 1),
        shipped("ib").transfer_time(ROWS_64, 1)
    );
}

#[test]
fn tcp_sockets_pay_two_fills_through_host_memory() {
    // 30 µs + 1 MiB / 6.25 GB/s (167.77 µs) + 2 × 128 KiB / 6.25 GB/s (41.94 µs).
    assert_eq!(shipped("tcp").transfer_time(1 << 20, 1).as_ns(), 239_715);
}

#[test]
fn a_link_flag_overrides_the_datasheet_and_says_so() {
    let spec = LinkSpec::parse("IB,gbps=400,nics=2").unwrap();
    assert_eq!(spec.to_string(), "ib,gbps=400,nics=2");
    let link = Link::from_spec(&spec, &builtin_datasheets()).unwrap();
    assert_eq!(link.bytes_per_s, 50e9);
    assert_eq!(link.nics, 2);
    assert_eq!(
        link.source,
        LinkSource::Flag {
            keys: vec!["gbps".into(), "nics".into()]
        }
    );
    // NDR's doubled rate halves the body and the fill of four ranks on two NICs: as one HDR rank.
    assert_eq!(link.transfer_time(ROWS_64, 4).as_ns(), 22_476);
    assert_eq!(
        link.describe(),
        "ib 50.0 GB/s x 0.90, 5.0 us, 2 NIC(s) per host (datasheet with --link gbps, nics)"
    );
    let plain = Link::from_spec(&LinkSpec::parse("roce").unwrap(), &builtin_datasheets()).unwrap();
    assert_eq!(plain.source, LinkSource::Datasheet);
}

#[track_caller]
fn check_refused(text: &str, expected: &str) {
    let err = LinkSpec::parse(text)
        .and_then(|spec| Link::from_spec(&spec, &builtin_datasheets()))
        .unwrap_err()
        .to_string();
    assert_eq!(err, expected);
}

#[test]
fn bad_link_values_are_refused_naming_the_key() {
    check_refused(
        "nvlink9",
        "unknown link kind \"nvlink9\"; known: pcie-gen4, pcie-gen5, ib, roce, tcp",
    );
    check_refused(
        "ib,speed=1",
        "link key \"speed\" in \"ib,speed=1\" is not one of gbps, latency-us, chunk-kib, efficiency, nics",
    );
    check_refused(
        "ib,gbps",
        "link key gbps needs a value (`gbps=..`) in \"ib,gbps\"",
    );
    check_refused("ib,gbps=0", "link gbps=0 is not a positive number");
    check_refused("ib,efficiency=1.2", "link efficiency=1.2 is not in (0, 1]");
    check_refused(
        "ib,nics=0",
        "link nics=0 is not a whole number of at least 1",
    );
    check_refused(
        "ib,nics=1,nics=2",
        "link key nics is given twice in \"ib,nics=1,nics=2\"",
    );
}

fn any_link() -> impl Strategy<Value = Link> {
    (
        1e8f64..1e12,
        0.05f64..=1.0,
        0.0f64..1e-4,
        1u64..(4 << 20),
        1u32..5,
        1u32..9,
    )
        .prop_map(|(rate, efficiency, latency, chunk, stages, nics)| Link {
            kind: "any".into(),
            bytes_per_s: rate,
            efficiency,
            latency_s: latency,
            chunk_bytes: chunk,
            stages,
            nics,
            source: LinkSource::Datasheet,
        })
}

proptest! {
    #[test]
    fn a_slower_link_never_makes_a_transfer_faster(
        link in any_link(),
        slowdown in 1.0f64..100.0,
        extra_latency in 0.0f64..1e-4,
        bytes in 0u64..(1 << 30),
        ranks in 1u32..17,
        senders in 1u32..9,
    ) {
        let mut slow = link.clone();
        slow.bytes_per_s /= slowdown;
        slow.latency_s += extra_latency;
        prop_assert!(slow.transfer_time(bytes, ranks) >= link.transfer_time(bytes, ranks));
        prop_assert!(
            slow.fan_in_time(bytes, senders, ranks) >= link.fan_in_time(bytes, senders, ranks)
        );
    }

    #[test]
    fn more_ranks_sharing_a_nic_never_speed_each_up(
        link in any_link(),
        bytes in 0u64..(1 << 30),
        ranks in 1u32..32,
        more in 0u32..32,
    ) {
        prop_assert!(
            link.transfer_time(bytes, ranks + more) >= link.transfer_time(bytes, ranks)
        );
        prop_assert!(link.rate_per_rank(ranks + more) <= link.rate_per_rank(ranks));
    }

    #[test]
    fn more_nics_never_slow_a_rank_down(
        link in any_link(),
        bytes in 0u64..(1 << 30),
        ranks in 1u32..32,
        extra_nics in 0u32..8,
    ) {
        let mut wider = link.clone();
        wider.nics += extra_nics;
        prop_assert!(wider.transfer_time(bytes, ranks) <= link.transfer_time(bytes, ranks));
    }
}

#[test]
fn roles_on_different_hosts_default_to_nccl_sockets_and_a_flag_wins() {
    let sheets = builtin_datasheets();
    assert_eq!(afd_link(None, false, &sheets), Ok(None));
    let assumed = afd_link(None, true, &sheets)
        .unwrap()
        .expect("a link between hosts");
    assert_eq!(
        (assumed.kind.as_str(), &assumed.source),
        ("tcp", &LinkSource::AssumedBetweenHosts)
    );
    let spec = LinkSpec::parse("roce,nics=2").unwrap();
    let given = afd_link(Some(&spec), false, &sheets)
        .unwrap()
        .expect("the flag's link");
    assert_eq!((given.kind.as_str(), given.nics), ("roce", 2));
}
