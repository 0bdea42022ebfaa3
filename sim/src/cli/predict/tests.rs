//! Flag parsing of `predict` names the bad flag.

use super::*;

#[test]
fn rates_concurrency_routing_and_windows_parse_or_name_the_flag() {
    assert_eq!(parse_arrivals("inf", 1.0).unwrap(), Arrivals::AllAtOnce);
    assert!(
        parse_arrivals("fast", 1.0)
            .unwrap_err()
            .to_string()
            .contains("--request-rate")
    );
    assert!(format!("{:#}", parse_arrivals("-2", 1.0).unwrap_err()).contains("--request-rate"));
    assert_eq!(parse_concurrency("none").unwrap(), None);
    assert_eq!(parse_concurrency("8").unwrap(), Some(8));
    assert!(
        parse_concurrency("0")
            .unwrap_err()
            .to_string()
            .contains("--max-concurrency")
    );
    assert_eq!(
        parse_routing("power-law:1.2").unwrap(),
        ExpertPopularity::PowerLaw { exponent: 1.2 }
    );
    assert!(
        parse_routing("zipf")
            .unwrap_err()
            .to_string()
            .contains("--routing")
    );
    let (a, b) = parse_window("1:1.5").unwrap();
    assert_eq!((a.as_ns(), b.as_ns()), (1_000_000_000, 1_500_000_000));
    assert!(
        parse_window("2:1")
            .unwrap_err()
            .to_string()
            .contains("--timeline-window")
    );
    assert!(
        parse_window("x")
            .unwrap_err()
            .to_string()
            .contains("START:END")
    );
}
