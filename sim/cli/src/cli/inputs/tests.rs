//! Flag parsing of the shared inputs names the bad flag.

use super::*;

#[test]
fn rates_concurrency_and_routing_parse_or_name_the_flag() {
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
}
