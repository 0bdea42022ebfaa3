//! Reading a `vllm serve` log: the per-step lines of `--enable-logging-iteration-details` and the lines
//! that say which backends the engine chose. Pure text in, records out.

use std::collections::BTreeMap;

use afd_traces::vllm_run::EngineStep;

/// Facts worth keeping from start-up, each as the first log line containing any of its markers.
const BACKEND_MARKERS: &[(&str, &[&str])] = &[
    ("vllm_version", &["vLLM API server version"]),
    ("non_default_args", &["non-default args"]),
    ("model_runner", &["Model Runner", "model runner"]),
    (
        "attention_backend",
        &["attention backend", "Attention backend", "MLA backend"],
    ),
    ("moe_backend", &["Experts", "MoE backend", "moe backend"]),
    ("moe_config", &["fused_moe", "MoE config", "moe config"]),
    ("async_scheduling", &["Asynchronous scheduling"]),
    ("chunked_prefill", &["Chunked prefill", "chunked prefill"]),
    ("prefix_caching", &["prefix caching", "Prefix caching"]),
    (
        "cudagraph_mode",
        &["cudagraph_mode", "CUDAGraphMode", "cudagraph mode"],
    ),
    (
        "cudagraph_capture",
        &[
            "Graph capturing finished",
            "Capturing CUDA graph",
            "capture_sizes",
        ],
    ),
    (
        "torch_compile",
        &["torch.compile takes", "Compiling a graph", "torch.compile"],
    ),
    ("kv_cache_tokens", &["GPU KV cache size"]),
    ("max_concurrency", &["Maximum concurrency"]),
    (
        "model_weights",
        &["Model loading took", "Loading weights took"],
    ),
    (
        "memory_profile",
        &["Available KV cache memory", "memory profiling"],
    ),
];

/// The log prefix the probe gives the server (`VLLM_LOGGING_PREFIX`): each line's creation time in
/// Unix seconds with microseconds, then a space.
pub const STAMP_PREFIX: &str = "%(created).6f ";

/// Every iteration line in `text`, in order ([`EngineStep::from_log_line`]).
pub fn steps(text: &str) -> Vec<EngineStep> {
    afd_traces::vllm_run::engine_steps(text)
}

/// One `Iteration(N): ...` line, or `None` for any other ([`EngineStep::from_log_line`]).
pub fn step(line: &str) -> Option<EngineStep> {
    EngineStep::from_log_line(line)
}

/// The first line for each backend marker found in `text`, without the logger's level and time prefix.
pub fn backends(text: &str) -> BTreeMap<String, String> {
    let mut found = BTreeMap::new();
    for line in text.lines() {
        if line.contains("Iteration(") {
            continue;
        }
        let echoes_args = line.contains("non-default args");
        for (key, markers) in BACKEND_MARKERS {
            // The echo of the command line names every flag: it answers only for itself.
            if echoes_args && *key != "non_default_args" {
                continue;
            }
            if !found.contains_key(*key) && markers.iter().any(|m| line.contains(m)) {
                found.insert(
                    (*key).to_owned(),
                    strip_prefix(line).chars().take(600).collect(),
                );
            }
        }
    }
    found
}

/// The engine core's pid from the prefix vLLM puts on its lines, `(EngineCore pid=934)` (or
/// `(EngineCore_DP0 pid=934)` under data parallelism: the first one logged).
pub fn engine_core_pid(text: &str) -> Option<u32> {
    text.lines().find_map(|line| {
        let from = line.find("(EngineCore")?;
        let inside = &line[from..from + line[from..].find(')')?];
        inside.split_once(" pid=")?.1.parse().ok()
    })
}

/// `(APIServer pid=1) INFO 12-01 21:00:00 [file.py:12] message` → `[file.py:12] message`.
fn strip_prefix(line: &str) -> &str {
    line.find(" [").map_or(line, |i| &line[i + 1..]).trim()
}

/// The last `n` lines of `text`.
pub fn tail(text: &str, n: usize) -> String {
    let lines: Vec<&str> = text.lines().collect();
    lines[lines.len().saturating_sub(n)..].join("\n")
}

#[cfg(test)]
mod tests {
    use super::*;

    const LINE: &str = "(APIServer pid=7) INFO 12-01 21:00:00 [loggers.py:193] Engine 000: Iteration(41): \
        1 context requests, 64 context tokens, 0 generation requests, 0 generation tokens, iteration elapsed \
        time: 12.34 ms, GPU KV cache usage: 0.5%";

    #[test]
    fn an_iteration_line_reads_every_number() {
        let s = step(LINE).unwrap();
        assert_eq!(
            (
                s.iteration,
                s.ctx_requests,
                s.ctx_tokens,
                s.gen_requests,
                s.gen_tokens
            ),
            (41, 1, 64, 0, 0)
        );
        assert_eq!((s.elapsed_ms, s.kv_usage_pct), (12.34, 0.5));
    }

    #[test]
    fn the_probes_stamp_gives_the_line_its_microsecond() {
        assert_eq!(step(LINE).unwrap().logged_s, None);
        let stamped = LINE.replace(") INFO", ") 1796193253.123456 INFO");
        let s = step(&stamped).unwrap();
        assert_eq!(s.logged_s, Some(1_796_193_253.123_456));
        assert_eq!((s.iteration, s.ctx_tokens, s.elapsed_ms), (41, 64, 12.34));
        // A number that is not a Unix second, or one after the level, is no stamp.
        assert_eq!(
            step(&LINE.replace(") INFO", ") 12.5 INFO"))
                .unwrap()
                .logged_s,
            None
        );
        assert_eq!(
            step(&LINE.replace("INFO ", "INFO 1796193253.1 "))
                .unwrap()
                .logged_s,
            None
        );
    }

    #[test]
    fn dummy_and_unrelated_lines_are_not_steps() {
        assert!(step(&LINE.replace(" ms,", " ms (dummy),")).is_none());
        assert!(step("INFO [api_server.py:1] Started server process").is_none());
        assert_eq!(steps(&format!("x\n{LINE}\ny\n{LINE}")).len(), 2);
    }

    #[test]
    fn backends_keep_the_first_line_of_each_marker_without_the_prefix() {
        let log = "(EngineCore pid=9) INFO 12-01 21:00:00 [gpu_model_runner.py:1] Using V2 Model Runner\n\
                   (EngineCore pid=9) INFO 12-01 21:00:01 [cuda.py:2] Using FLASH_ATTN_MLA attention backend\n\
                   (EngineCore pid=9) INFO 12-01 21:00:02 [cuda.py:2] Using TRITON_MLA attention backend";
        let b = backends(log);
        assert_eq!(
            b["model_runner"],
            "[gpu_model_runner.py:1] Using V2 Model Runner"
        );
        assert_eq!(
            b["attention_backend"],
            "[cuda.py:2] Using FLASH_ATTN_MLA attention backend"
        );
    }

    #[test]
    fn tail_keeps_the_last_lines() {
        assert_eq!(tail("a\nb\nc", 2), "b\nc");
        assert_eq!(tail("a", 5), "a");
    }
}
