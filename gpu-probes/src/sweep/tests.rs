//! Parsing sweep lists.

use proptest::prelude::*;

use super::*;

#[test]
fn ranges_double_and_lists_sort() {
    assert_eq!(parse_list("8:64", 1, 1 << 40).unwrap(), vec![8, 16, 32, 64]);
    assert_eq!(parse_list("1G:1G", 1, 1 << 40).unwrap(), vec![1 << 30]);
    assert_eq!(
        parse_list("4,1,4,2K", 1, 1 << 40).unwrap(),
        vec![1, 4, 2048]
    );
    assert_eq!(parse_list("8:1G", 1, 1 << 40).unwrap().len(), 28);
}

#[test]
fn errors_say_what_is_wrong() {
    assert_eq!(
        parse_list("0:8", 1, 100).unwrap_err().to_string(),
        "invalid list \"0:8\": range start 0 must be in 1..=8"
    );
    assert_eq!(
        parse_list("1,x", 1, 100).unwrap_err().to_string(),
        "invalid list \"1,x\": \"x\" is not a number (suffixes K, M, G allowed)"
    );
    assert_eq!(
        parse_list("1,200", 1, 100).unwrap_err().to_string(),
        "invalid list \"1,200\": 200 is outside 1..=100"
    );
}

#[test]
fn bytes_print_in_binary_units() {
    assert_eq!(format_bytes(8), "8 B");
    assert_eq!(format_bytes(3 << 10), "3 KiB");
    assert_eq!(format_bytes(1 << 30), "1 GiB");
    assert_eq!(format_bytes(1536), "1536 B");
}

proptest! {
    #[test]
    fn arbitrary_lists_never_panic(text in "\\PC{0,30}") {
        let _ = parse_list(&text, 1, u64::MAX);
    }
}
