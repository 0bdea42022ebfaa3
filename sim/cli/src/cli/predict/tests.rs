//! Flag parsing of `predict` names the bad flag.

use super::*;

#[test]
fn timeline_windows_parse_or_name_the_flag() {
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
