//! Reading a `vllm serve` log: the lines that say which backends the engine chose, the engine core's
//! pid and the log's tail (the per-step lines of `--enable-logging-iteration-details` are
//! `afd_traces::vllm_run::engine_steps`'s). Pure text in, records out.

use std::collections::BTreeMap;

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
