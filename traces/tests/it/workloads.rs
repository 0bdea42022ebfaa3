//! Every shipped workload trace parses, and the statistics this crate computes from it match the
//! figures `research/traces.md` (and each `SOURCE.md`) documents, to the precision they are written.

use std::path::{Path, PathBuf};

use crate::assert_figure;
use afd_traces::workload::{
    MOONCAKE_BLOCK_TOKENS, TraceFormat, TraceRequest, WorkloadTrace, read_trace_file,
};

fn data(relative: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("data/workloads")
        .join(relative)
}

fn read(relative: &str, format: TraceFormat) -> WorkloadTrace {
    let path = data(relative);
    let detected = read_trace_file(&path, None).unwrap_or_else(|err| panic!("{err}"));
    assert_eq!(detected.format, format, "{relative}");
    let forced = read_trace_file(&path, Some(format)).unwrap();
    assert_eq!(forced, detected);
    detected
}

/// Percentile with linear interpolation between closest ranks (numpy's default), as traces.md.
fn percentile(values: &mut [f64], p: f64) -> f64 {
    values.sort_by(f64::total_cmp);
    let rank = p / 100.0 * (values.len() - 1) as f64;
    let (low, high) = (rank.floor() as usize, rank.ceil() as usize);
    values[low] + (values[high] - values[low]) * (rank - low as f64)
}

/// Documented figures of one trace: rows, then mean / p50 / p99 / max of input and output tokens.
struct Documented {
    rows: usize,
    input: [&'static str; 4],
    output: [&'static str; 4],
}

#[track_caller]
fn assert_documented(trace: &WorkloadTrace, doc: &Documented) {
    let summary = trace.summary();
    assert_eq!(summary.n_requests, doc.rows, "{} rows", trace.name);
    for (what, column, figures) in [
        (
            "input",
            (|r: &TraceRequest| r.input_tokens) as fn(&TraceRequest) -> u32,
            doc.input,
        ),
        ("output", |r: &TraceRequest| r.output_tokens, doc.output),
    ] {
        let mut values: Vec<f64> = trace
            .requests
            .iter()
            .map(|r| f64::from(column(r)))
            .collect();
        let mean = values.iter().sum::<f64>() / values.len() as f64;
        let name = &trace.name;
        assert_figure(&format!("{name} {what} mean"), mean, figures[0]);
        assert_figure(
            &format!("{name} {what} p50"),
            percentile(&mut values, 50.0),
            figures[1],
        );
        assert_figure(
            &format!("{name} {what} p99"),
            percentile(&mut values, 99.0),
            figures[2],
        );
        assert_figure(
            &format!("{name} {what} max"),
            percentile(&mut values, 100.0),
            figures[3],
        );
    }
    let max_input = doc.input[3].replace(',', "").parse::<u32>().unwrap();
    assert_eq!(summary.max_input_tokens, max_input);
}

#[track_caller]
fn assert_span_and_rate(trace: &WorkloadTrace, span_s: &str, rate: &str) {
    let span = trace.summary().span_us as f64 / 1e6;
    assert_figure(&format!("{} span", trace.name), span, span_s);
    assert_figure(
        &format!("{} mean rate", trace.name),
        trace.requests.len() as f64 / span,
        rate,
    );
}

#[test]
fn azure_code_matches_its_documented_statistics() {
    let trace = read(
        "azure-llm-inference-2023/AzureLLMInferenceTrace_code.csv",
        TraceFormat::Azure,
    );
    assert!(trace.has_arrivals);
    assert_documented(
        &trace,
        &Documented {
            rows: 8_819,
            input: ["2,047.8", "1,469", "7,436", "7,437"],
            output: ["27.9", "13", "251.5", "1,899"],
        },
    );
    assert_span_and_rate(&trace, "3,435.9", "2.57");
}

#[test]
fn azure_conv_matches_its_documented_statistics() {
    let trace = read(
        "azure-llm-inference-2023/AzureLLMInferenceTrace_conv.csv",
        TraceFormat::Azure,
    );
    assert_documented(
        &trace,
        &Documented {
            rows: 19_366,
            input: ["1,154.7", "1,020", "4,142", "14,050"],
            output: ["211.1", "129", "601", "1,000"],
        },
    );
    assert_span_and_rate(&trace, "3,501.7", "5.53");
}

/// Share of hash blocks whose whole leading prefix appeared earlier (unbounded cache), as traces.md.
fn prefix_hit_ratio(trace: &WorkloadTrace) -> f64 {
    let mut seen = std::collections::BTreeSet::new();
    let (mut hits, mut blocks) = (0usize, 0usize);
    for request in &trace.requests {
        let mut prefix_seen = true;
        for depth in 1..=request.prefix_blocks.len() {
            let prefix = &request.prefix_blocks[..depth];
            prefix_seen &= seen.contains(prefix);
            hits += usize::from(prefix_seen);
            blocks += 1;
            seen.insert(prefix.to_vec());
        }
    }
    hits as f64 / blocks as f64
}

#[track_caller]
fn assert_mooncake_blocks(trace: &WorkloadTrace, blocks_mean: &str, unique: usize, hit: &str) {
    for (i, request) in trace.requests.iter().enumerate() {
        assert_eq!(
            request.prefix_blocks.len() as u32,
            request.input_tokens.div_ceil(MOONCAKE_BLOCK_TOKENS),
            "{} request {i}",
            trace.name
        );
    }
    let total: usize = trace.requests.iter().map(|r| r.prefix_blocks.len()).sum();
    assert_figure(
        &format!("{} blocks per request", trace.name),
        total as f64 / trace.requests.len() as f64,
        blocks_mean,
    );
    let ids: std::collections::BTreeSet<u32> = trace
        .requests
        .iter()
        .flat_map(|r| r.prefix_blocks.iter().copied())
        .collect();
    assert_eq!(ids.len(), unique, "{} unique hash ids", trace.name);
    assert_figure(
        &format!("{} hit ratio", trace.name),
        prefix_hit_ratio(trace),
        hit,
    );
}

fn distinct_arrivals(trace: &WorkloadTrace) -> usize {
    let mut arrivals: Vec<u64> = trace.requests.iter().map(|r| r.arrival_us).collect();
    arrivals.dedup();
    arrivals.len()
}

#[test]
fn mooncake_conversation_matches_its_documented_statistics() {
    let trace = read(
        "mooncake-fast25/conversation_trace.jsonl",
        TraceFormat::Mooncake,
    );
    assert_documented(
        &trace,
        &Documented {
            rows: 12_031,
            input: ["12,035.1", "6,909", "85,400", "126,195"],
            output: ["342.6", "350", "1,118.5", "2,000"],
        },
    );
    assert_span_and_rate(&trace, "3,537.0", "3.40");
    assert_mooncake_blocks(&trace, "24.0", 182_790, "0.366");
    assert_eq!(distinct_arrivals(&trace), 1_180);
}

#[test]
fn mooncake_synthetic_matches_its_documented_statistics() {
    let trace = read(
        "mooncake-fast25/synthetic_trace.jsonl",
        TraceFormat::Mooncake,
    );
    assert_documented(
        &trace,
        &Documented {
            rows: 3_993,
            input: ["15,325.5", "11,587", "66,456", "191,378"],
            output: ["149.1", "69", "768.1", "893"],
        },
    );
    assert_span_and_rate(&trace, "1,022.0", "3.91");
    assert_mooncake_blocks(&trace, "30.5", 43_924, "0.640");
    assert_eq!(distinct_arrivals(&trace), 3_982);
}

#[test]
fn sharegpt_lengths_match_their_documented_statistics() {
    let trace = read(
        "sarathi-serve-sharegpt/sharegpt_8k_filtered_stats_llama2_tokenizer.csv",
        TraceFormat::Lengths,
    );
    assert!(!trace.has_arrivals);
    assert!(trace.requests.iter().all(|r| r.arrival_us == 0));
    assert_documented(
        &trace,
        &Documented {
            rows: 30_731,
            input: ["2,340.0", "1,730", "7,433.7", "8,141"],
            output: ["438.7", "415", "998", "1,024"],
        },
    );
}

#[test]
fn arxiv_lengths_match_their_documented_statistics() {
    let trace = read(
        "vidur-arxiv-summarization/arxiv_summarization_stats_llama2_tokenizer_filtered_v2.csv",
        TraceFormat::Lengths,
    );
    assert!(!trace.has_arrivals);
    assert_documented(
        &trace,
        &Documented {
            rows: 28_257,
            input: ["2,588.1", "2,730", "3,933.4", "4,054"],
            output: ["291.4", "167", "3,271.3", "4,056"],
        },
    );
}

/// The shipped files are the byte-for-byte copies SOURCE.md describes: sizes as documented, and
/// the Azure files keep CRLF and no final newline (a checkout that normalised them would differ).
#[test]
fn shipped_files_keep_their_documented_bytes() {
    for (file, size) in [
        (
            "azure-llm-inference-2023/AzureLLMInferenceTrace_code.csv",
            320_117,
        ),
        (
            "azure-llm-inference-2023/AzureLLMInferenceTrace_conv.csv",
            719_188,
        ),
        ("mooncake-fast25/conversation_trace.jsonl", 3_029_533),
        ("mooncake-fast25/synthetic_trace.jsonl", 1_136_313),
        (
            "sarathi-serve-sharegpt/sharegpt_8k_filtered_stats_llama2_tokenizer.csv",
            949_600,
        ),
        (
            "vidur-arxiv-summarization/arxiv_summarization_stats_llama2_tokenizer_filtered_v2.csv",
            884_932,
        ),
    ] {
        let bytes = std::fs::read(data(file)).unwrap();
        assert_eq!(bytes.len(), size, "{file}");
        if file.starts_with("azure") {
            assert!(bytes.starts_with(b"TIMESTAMP,ContextTokens,GeneratedTokens\r\n"));
            assert!(!bytes.ends_with(b"\n"), "{file} gained a final newline");
        }
    }
}
