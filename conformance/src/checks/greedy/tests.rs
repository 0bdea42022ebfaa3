//! Tests of the greedy comparison.

use super::common_prefix_ratio;

#[test]
fn common_prefix_ratio_counts_characters_of_the_longer_text() {
    assert_eq!(common_prefix_ratio("", ""), 1.0);
    assert_eq!(common_prefix_ratio("abcd", "abcd"), 1.0);
    assert_eq!(common_prefix_ratio("abcd", "abXd"), 0.5);
    assert_eq!(common_prefix_ratio("ab", "abcd"), 0.5);
    assert_eq!(common_prefix_ratio("é日本", "é日x"), 2.0 / 3.0);
    assert_eq!(common_prefix_ratio("x", ""), 0.0);
}
