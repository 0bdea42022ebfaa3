//! Unit tests of the workload trace readers: one tiny inline sample per quirk, and property tests
//! that mangled text never panics and that errors point at a line of the input.

use expect_test::{Expect, expect};
use proptest::prelude::*;

use super::*;

/// Reads `input` and renders either the requests or the error, one line each.
#[track_caller]
fn check(input: &str, format: Option<TraceFormat>, expect: Expect) {
    let actual = match read_trace(input, "t", format) {
        Ok(trace) => {
            let mut out = format!("{} arrivals={}\n", trace.format, trace.has_arrivals);
            for r in &trace.requests {
                out += &format!(
                    "{} us: {} in, {} out",
                    r.arrival_us, r.input_tokens, r.output_tokens
                );
                if !r.prefix_blocks.is_empty() {
                    out += &format!(", blocks {:?}", r.prefix_blocks);
                }
                out.push('\n');
            }
            out
        }
        Err(err) => format!("error: {err}\n"),
    };
    expect.assert_eq(&actual);
}

const AZURE_HEADER: &str = "TIMESTAMP,ContextTokens,GeneratedTokens";

#[test]
fn azure_crlf_without_final_newline() {
    check(
        &format!(
            "{AZURE_HEADER}\r\n2023-11-16 18:17:03.9799600,4808,10\r\n2023-11-16 18:17:04.0319600,3180,8"
        ),
        None,
        expect![[r#"
            azure arrivals=true
            0 us: 4808 in, 10 out
            52000 us: 3180 in, 8 out
        "#]],
    );
}

#[test]
fn azure_arrivals_round_100_ns_digits_to_the_microsecond() {
    check(
        &format!(
            "{AZURE_HEADER}\n2023-11-16 23:59:59.9999990,1,1\n2023-11-17 00:00:00.0000004,1,1\n2023-11-17 00:00:00.0000006,1,1\n"
        ),
        None,
        expect![[r#"
            azure arrivals=true
            0 us: 1 in, 1 out
            1 us: 1 in, 1 out
            2 us: 1 in, 1 out
        "#]],
    );
}

#[test]
fn azure_reads_2024_offsets_t_separator_and_leap_days() {
    check(
        &format!(
            "{AZURE_HEADER}\n2024-02-28T23:00:00+00:00,5,6\n2024-02-29 01:00:00+02:00,7,8\n2024-03-01 00:00:00Z,9,10\n"
        ),
        None,
        expect![[r#"
            azure arrivals=true
            0 us: 5 in, 6 out
            0 us: 7 in, 8 out
            90000000000 us: 9 in, 10 out
        "#]],
    );
}

#[test]
fn azure_columns_are_found_by_name() {
    check(
        "GeneratedTokens, TIMESTAMP ,ContextTokens\n10,2023-11-16 18:17:03,4808\n",
        Some(TraceFormat::Azure),
        expect![[r#"
            azure arrivals=true
            0 us: 4808 in, 10 out
        "#]],
    );
}

#[test]
fn azure_rows_out_of_order_are_rejected_naming_both_lines() {
    check(
        &format!(
            "{AZURE_HEADER}\n2023-11-16 18:17:03.5,1,1\n2023-11-16 18:17:03.5,2,2\n2023-11-16 18:17:03.4,3,3\n"
        ),
        None,
        expect![[r#"
            error: t:4: arrival 2023-11-16 18:17:03.4 is earlier than 2023-11-16 18:17:03.5 on line 3; requests must be in arrival order
        "#]],
    );
}

#[test]
fn azure_impossible_dates_and_shapes_name_the_value() {
    check(
        &format!("{AZURE_HEADER}\n2023-02-29 00:00:00,1,1\n"),
        None,
        expect![[r#"
            error: t:2: field TIMESTAMP = "2023-02-29 00:00:00": no such date
        "#]],
    );
    check(
        &format!("{AZURE_HEADER}\n2023-11-16 18:17,1,1\n"),
        None,
        expect![[r#"
            error: t:2: field TIMESTAMP = "2023-11-16 18:17": expected YYYY-MM-DD HH:MM:SS[.fraction][Z|+HH:MM]
        "#]],
    );
    check(
        &format!("{AZURE_HEADER}\n2023-11-16 18:17:03.1234567891,1,1\n"),
        None,
        expect![[r#"
            error: t:2: field TIMESTAMP = "2023-11-16 18:17:03.1234567891": more than 9 fractional digits
        "#]],
    );
}

#[test]
fn azure_missing_column_names_it_and_the_header() {
    check(
        "TIMESTAMP,ContextTokens\n2023-11-16 18:17:03,1\n",
        None,
        expect![[r#"
            error: t:1: missing column "GeneratedTokens" in header ["TIMESTAMP", "ContextTokens"]
        "#]],
    );
}

#[test]
fn token_counts_must_be_whole_positive_numbers() {
    let row = |input: &str, output: &str| {
        format!("{AZURE_HEADER}\n2023-11-16 18:17:03,{input},{output}\n")
    };
    check(
        &row("12.5", "3"),
        None,
        expect![[r#"
            error: t:2: field ContextTokens = "12.5": not a whole number of tokens
        "#]],
    );
    check(
        &row("0", "3"),
        None,
        expect![[r#"
            error: t:2: field ContextTokens = "0": must be at least 1 token
        "#]],
    );
    check(
        &row("3", "0"),
        None,
        expect![[r#"
            error: t:2: field GeneratedTokens = "0": must be at least 1 token
        "#]],
    );
    check(
        &row("", "3"),
        None,
        expect![[r#"
            error: t:2: field ContextTokens = "": empty; expected a token count
        "#]],
    );
    check(
        &row("4294967296", "3"),
        None,
        expect![[r#"
            error: t:2: field ContextTokens = "4294967296": too large; at most 4294967295 tokens
        "#]],
    );
}

#[test]
fn truncated_rows_report_the_field_count() {
    check(
        &format!("{AZURE_HEADER}\r\n2023-11-16 18:17:03,1,1\r\n2023-11-16 18:17:04,1"),
        None,
        expect![[r#"
            error: t:3: row has 2 fields, the header has 3
        "#]],
    );
}

#[test]
fn mooncake_timestamps_are_milliseconds() {
    check(
        concat!(
            "{\"timestamp\": 0, \"input_length\": 6758, \"output_length\": 500, \"hash_ids\": [0, 1]}\n",
            "{\"timestamp\": 0, \"input_length\": 10, \"output_length\": 5, \"hash_ids\": [0]}\n",
            "{\"timestamp\": 3001, \"input_length\": 7, \"output_length\": 2, \"hash_ids\": [2], \"session\": 9}\n",
            "{\"timestamp\": 3001.5, \"input_length\": 7, \"output_length\": 2}\n",
        ),
        None,
        expect![[r#"
            mooncake arrivals=true
            0 us: 6758 in, 500 out, blocks [0, 1]
            0 us: 10 in, 5 out, blocks [0]
            3001000 us: 7 in, 2 out, blocks [2]
            3001500 us: 7 in, 2 out
        "#]],
    );
}

#[test]
fn mooncake_is_relative_to_the_first_request_and_skips_blank_lines() {
    check(
        "\r\n{\"timestamp\": 500, \"input_length\": 1, \"output_length\": 1}\r\n\r\n{\"timestamp\": 750, \"input_length\": 2, \"output_length\": 2}",
        None,
        expect![[r#"
            mooncake arrivals=true
            0 us: 1 in, 1 out
            250000 us: 2 in, 2 out
        "#]],
    );
}

#[test]
fn mooncake_errors_name_line_column_and_field() {
    check(
        "{\"timestamp\": 0, \"input_length\": 1, \"output_length\": 1}\n{\"timestamp\": 5, \"output_length\": 1}\n",
        None,
        expect![[r#"
            error: t:2:36: missing field `input_length`
        "#]],
    );
    check(
        "{\"timestamp\": 0, \"input_length\": \"12\", \"output_length\": 1}\n",
        None,
        expect![[r#"
            error: t:1:37: field input_length: invalid type: string "12", expected u64
        "#]],
    );
    check(
        "{\"timestamp\": 0, \"input_length\": 1, \"output_length\": 1, \"hash_ids\": [1, -2]}\n",
        None,
        expect![[r#"
            error: t:1:74: field hash_ids[1]: invalid value: integer `-2`, expected u32
        "#]],
    );
    check(
        "{\"timestamp\": -3, \"input_length\": 1, \"output_length\": 1}\n",
        None,
        expect![[r#"
            error: t:1: field timestamp = "-3": must be a finite time, not negative
        "#]],
    );
    check(
        "{\"timestamp\": 0, \"input_length\": 0, \"output_length\": 1}\n",
        None,
        expect![[r#"
            error: t:1: field input_length = "0": must be at least 1 token
        "#]],
    );
    check(
        "{\"timestamp\": 0, \"input_length\": 1, \"output_length\": 1} x\n",
        None,
        expect![[r#"
            mooncake arrivals=true
            0 us: 1 in, 1 out
        "#]],
    );
    check(
        "{\"timestamp\": 9, \"input_length\": 1, \"output_length\": 1}\n{\"timestamp\": 8, \"input_length\": 1, \"output_length\": 1}\n",
        None,
        expect![[r#"
            error: t:2: arrival 8 is earlier than 9 on line 1; requests must be in arrival order
        "#]],
    );
}

#[test]
fn length_sets_have_no_arrivals() {
    check(
        "num_prefill_tokens,num_decode_tokens,num_total_tokens,pd_ratio\n74,918,992,0.0806\n290,905,1195,0.3204",
        None,
        expect![[r#"
            lengths arrivals=false
            0 us: 74 in, 918 out
            0 us: 290 in, 905 out
        "#]],
    );
}

#[test]
fn length_sets_with_arrived_at_have_arrivals() {
    check(
        "arrived_at,num_prefill_tokens,num_decode_tokens\n12.5,10,2\n12.75,20,4\n",
        None,
        expect![[r#"
            lengths arrivals=true
            0 us: 10 in, 2 out
            250000 us: 20 in, 4 out
        "#]],
    );
}

#[test]
fn length_sets_check_the_total_column() {
    check(
        "num_prefill_tokens,num_decode_tokens,num_total_tokens\n74,918,992\n918,74,0.08\n",
        None,
        expect![[r#"
            error: t:3: field num_total_tokens = "0.08": expected num_prefill_tokens + num_decode_tokens = 992
        "#]],
    );
}

#[test]
fn format_detection_and_its_failures() {
    check(
        "\u{feff}\n\nnum_prefill_tokens,num_decode_tokens\n1,2\n",
        None,
        expect![[r#"
            lengths arrivals=false
            0 us: 1 in, 2 out
        "#]],
    );
    check(
        "time,prompt,output\n1,2,3\n",
        None,
        expect![[r#"
            error: t:1: cannot tell the trace format from "time,prompt,output"; expected an Azure header (TIMESTAMP,ContextTokens,GeneratedTokens), a token-count header (num_prefill_tokens,num_decode_tokens,...) or Mooncake JSON lines; name the format explicitly
        "#]],
    );
    check(
        " \r\n\n",
        None,
        expect![[r#"
            error: t: empty trace: no requests
        "#]],
    );
    check(
        &format!("{AZURE_HEADER}\r\n"),
        None,
        expect![[r#"
            error: t: empty trace: no requests
        "#]],
    );
    check(
        "num_prefill_tokens,num_decode_tokens\n1,2\n",
        Some(TraceFormat::Azure),
        expect![[r#"
            error: t:1: missing column "TIMESTAMP" in header ["num_prefill_tokens", "num_decode_tokens"]
        "#]],
    );
}

#[test]
fn format_names_round_trip_and_unknown_names_are_listed() {
    for name in TraceFormat::NAMES {
        let format: TraceFormat = name.parse().unwrap();
        assert_eq!(format.to_string(), name);
    }
    assert_eq!(
        "Mooncake".parse::<TraceFormat>().unwrap(),
        TraceFormat::Mooncake
    );
    let err = "burstgpt".parse::<TraceFormat>().unwrap_err();
    assert_eq!(
        err.to_string(),
        "unknown trace format \"burstgpt\"; expected one of azure, mooncake, lengths"
    );
}

#[test]
fn summary_counts_span_and_means() {
    let trace = read_trace(
        &format!("{AZURE_HEADER}\n2023-11-16 18:00:00,10,1\n2023-11-16 18:00:02.5,20,4\n"),
        "t",
        None,
    )
    .unwrap();
    assert_eq!(
        trace.summary(),
        TraceSummary {
            n_requests: 2,
            span_us: 2_500_000,
            mean_input_tokens: 15.0,
            mean_output_tokens: 2.5,
            max_input_tokens: 20,
            max_output_tokens: 4,
        }
    );
}

#[test]
fn trace_files_are_named_after_their_stem_and_errors_carry_the_path() {
    let dir = tempfile::tempdir().unwrap();
    let good = dir.path().join("conv.csv");
    std::fs::write(&good, format!("{AZURE_HEADER}\n2023-11-16 18:00:00,10,1\n")).unwrap();
    assert_eq!(read_trace_file(&good, None).unwrap().name, "conv");

    let latin1 = dir.path().join("latin1.csv");
    std::fs::write(
        &latin1,
        b"num_prefill_tokens,num_decode_tokens\n1,2\n3,\xe94\n",
    )
    .unwrap();
    let err = read_trace_file(&latin1, None).unwrap_err();
    assert_eq!(
        err.to_string(),
        format!(
            "{}:3: not UTF-8 text (invalid byte at column 3)",
            latin1.display()
        )
    );

    let err = read_trace_file_within(Path::new("/dev/zero"), None, 1 << 20).unwrap_err();
    assert_eq!(
        err.to_string(),
        "/dev/zero:1: not text (a NUL byte at column 1)"
    );
    let long = dir.path().join("long.csv");
    std::fs::write(&long, "x".repeat((1 << 20) + 1)).unwrap();
    let err = read_trace_file_within(&long, None, 1 << 20).unwrap_err();
    assert_eq!(
        err.to_string(),
        format!(
            "trace {} exceeds the size limit of 1 MiB (raise it with --max-trace-mib)",
            long.display()
        )
    );

    let missing = dir.path().join("missing.csv");
    let err = read_trace_file(&missing, None).unwrap_err();
    assert_eq!(
        err.to_string(),
        format!("cannot read trace {}", missing.display())
    );
    assert!(std::error::Error::source(&err).is_some());
}

/// Any error must name a line of the input (or be about the whole file).
fn assert_points_at_a_line(text: &str, result: &Result<WorkloadTrace, TraceError>) {
    if let Err(err) = result {
        let lines = text
            .strip_prefix('\u{feff}')
            .unwrap_or(text)
            .lines()
            .count() as u64;
        match err.line() {
            None => assert!(matches!(err, TraceError::Empty { .. }), "{err}"),
            Some(line) => assert!(
                (1..=lines.max(1)).contains(&line),
                "line {line} outside 1..={lines}: {err}"
            ),
        }
    }
}

const SAMPLES: [&str; 3] = [
    "TIMESTAMP,ContextTokens,GeneratedTokens\r\n2023-11-16 18:17:03.9799600,4808,10\r\n2023-11-16 18:17:04.0319600,3180,8\r\n2023-11-16 18:17:04.0781490,110,27",
    "{\"timestamp\": 0, \"input_length\": 6758, \"output_length\": 500, \"hash_ids\": [0, 1]}\n{\"timestamp\": 3001, \"input_length\": 700, \"output_length\": 2, \"hash_ids\": [0, 2]}\n",
    "num_prefill_tokens,num_decode_tokens,num_total_tokens,pd_ratio\n74,918,992,0.08\n290,905,1195,0.32\n1402,711,2113,1.97\n",
];

/// One edit that a damaged or hand-edited trace file might carry.
#[derive(Clone, Debug)]
enum Mangle {
    Truncate(usize),
    DeleteChar(usize),
    InsertChar(usize, char),
    SwapFieldsOnLine { line: usize, a: usize, b: usize },
    DuplicateLine(usize),
}

fn apply(text: &str, mangle: &Mangle) -> String {
    let char_at = |i: usize| {
        let n = text.chars().count().max(1);
        text.char_indices()
            .nth(i % n)
            .map_or(text.len(), |(b, _)| b)
    };
    match *mangle {
        Mangle::Truncate(i) => text[..char_at(i)].to_owned(),
        Mangle::DeleteChar(i) => {
            let at = char_at(i);
            let mut out = text.to_owned();
            if at < out.len() {
                out.remove(at);
            }
            out
        }
        Mangle::InsertChar(i, c) => {
            let mut out = text.to_owned();
            out.insert(char_at(i), c);
            out
        }
        Mangle::SwapFieldsOnLine { line, a, b } => {
            let mut lines: Vec<String> = text.split('\n').map(str::to_owned).collect();
            let n = lines.len();
            let target = &mut lines[line % n];
            let mut fields: Vec<&str> = target.split(',').collect();
            let m = fields.len();
            fields.swap(a % m, b % m);
            *target = fields.join(",");
            lines.join("\n")
        }
        Mangle::DuplicateLine(line) => {
            let mut lines: Vec<&str> = text.split('\n').collect();
            let n = lines.len();
            lines.insert(line % n, lines[line % n]);
            lines.join("\n")
        }
    }
}

fn mangle() -> impl Strategy<Value = Mangle> {
    prop_oneof![
        any::<usize>().prop_map(Mangle::Truncate),
        any::<usize>().prop_map(Mangle::DeleteChar),
        (
            any::<usize>(),
            prop_oneof![
                Just(','),
                Just('"'),
                Just('\n'),
                Just('\r'),
                Just('-'),
                Just('{'),
                Just('9'),
                Just('x'),
                any::<char>()
            ]
        )
            .prop_map(|(i, c)| Mangle::InsertChar(i, c)),
        (any::<usize>(), any::<usize>(), any::<usize>())
            .prop_map(|(line, a, b)| Mangle::SwapFieldsOnLine { line, a, b }),
        any::<usize>().prop_map(Mangle::DuplicateLine),
    ]
}

fn formats() -> impl Strategy<Value = Option<TraceFormat>> {
    prop_oneof![
        Just(None),
        Just(Some(TraceFormat::Azure)),
        Just(Some(TraceFormat::Mooncake)),
        Just(Some(TraceFormat::Lengths)),
    ]
}

proptest! {
    #[test]
    fn arbitrary_text_never_panics_and_errors_point_at_a_line(
        text in "\\PC{0,200}|[\\x00-\\x7f]{0,200}",
        format in formats(),
    ) {
        let result = read_trace(&text, "t", format);
        assert_points_at_a_line(&text, &result);
    }

    #[test]
    fn mangled_samples_never_panic_and_errors_point_at_a_line(
        sample in 0..SAMPLES.len(),
        edits in proptest::collection::vec(mangle(), 1..4),
        format in formats(),
    ) {
        let text = edits.iter().fold(SAMPLES[sample].to_owned(), |text, edit| apply(&text, edit));
        let result = read_trace(&text, "t", format);
        assert_points_at_a_line(&text, &result);
        if let Ok(trace) = result {
            prop_assert!(!trace.requests.is_empty());
            prop_assert_eq!(trace.requests[0].arrival_us, 0);
            prop_assert!(trace.requests.windows(2).all(|w| w[0].arrival_us <= w[1].arrival_us));
            prop_assert!(trace.requests.iter().all(|r| r.input_tokens > 0 && r.output_tokens > 0));
        }
    }

    #[test]
    fn random_bytes_read_as_a_file_never_panic(bytes in proptest::collection::vec(any::<u8>(), 0..300)) {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("random.trace");
        std::fs::write(&path, &bytes).unwrap();
        let result = read_trace_file(&path, None);
        if let Err(err) = &result {
            prop_assert!(err.line().is_some() || matches!(err, TraceError::Empty { .. }), "{}", err);
        }
    }
}

#[test]
fn every_sample_reads_cleanly() {
    for sample in SAMPLES {
        let trace = read_trace(sample, "t", None).unwrap();
        assert_eq!(
            trace.requests.len(),
            if sample.starts_with('{') { 2 } else { 3 }
        );
    }
}
