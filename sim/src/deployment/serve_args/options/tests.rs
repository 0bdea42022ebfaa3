//! argparse's reading of flag names against vLLM 0.26.0's options: exact, prefixes, attached values, refusals.

use super::*;

#[test]
fn prefixes_and_attached_values_resolve_as_argparse_reads_them() {
    let known = |name: &str| match resolve(name, false) {
        Resolved::Known { option, .. } => option,
        other => panic!("{name}: {other:?}"),
    };
    assert_eq!(known("--max-num-seq"), "--max-num-seqs");
    assert_eq!(known("-t"), "-tp");
    assert_eq!(known("--no-enforce"), "--no-enforce-eager");
    assert_eq!(
        resolve("-q8", false),
        Resolved::Known {
            option: "-q",
            abbreviated: false,
            attached: Some(("8".to_owned(), 2)),
        }
    );
    assert!(matches!(resolve("-t", true), Resolved::Unrecognized { .. }));
    assert_eq!(
        resolve("-tp2", false),
        Resolved::Unrecognized {
            hint: Some(
                "argparse attaches a value only to a one-letter option: write -tp 2".to_owned()
            )
        }
    );
    let Resolved::Ambiguous(options) = resolve("--max-num", false) else {
        panic!("ambiguous");
    };
    assert!(options.contains(&"--max-num-seqs") && options.contains(&"--max-num-batched-tokens"));
    assert_eq!(
        resolve("--max-num-seqz", false),
        Resolved::Unrecognized {
            hint: Some("did you mean --max-num-seqs?".to_owned())
        }
    );
    assert_eq!(
        resolve("--swap-space", false),
        Resolved::Unrecognized { hint: None }
    );
}
