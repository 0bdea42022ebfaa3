//! vLLM's capture-size resolution and the graph keys of `--compilation-config`.

use serde_json::json;

use super::*;

fn inputs(max_num_seqs: u32, max_num_batched_tokens: u32) -> SizeInputs<'static> {
    SizeInputs {
        graphs_on: true,
        explicit_sizes: None,
        explicit_max: None,
        max_num_seqs,
        max_num_batched_tokens,
        sequence_parallel_tp: None,
    }
}

#[test]
fn default_sizes_step_by_8_then_16_up_to_twice_max_num_seqs() {
    let sizes = resolve_capture_sizes(inputs(200, 8192));
    assert_eq!(&sizes[..5], [1, 2, 4, 8, 16]);
    assert_eq!(sizes.last(), Some(&400));
    assert!(sizes.contains(&248) && sizes.contains(&256) && sizes.contains(&272));
    assert!(!sizes.contains(&264));
    assert_eq!(resolve_capture_sizes(inputs(1, 8192)), [1, 2]);
    assert_eq!(resolve_capture_sizes(inputs(3, 8192)), [1, 2, 4]);
    // max_num_batched_tokens itself is captured when it fits (vllm/config/vllm.py:1838-1843).
    let capped = resolve_capture_sizes(inputs(1024, 100));
    assert_eq!(capped[capped.len() - 2..], [96, 100]);
    assert_eq!(resolve_capture_sizes(inputs(1024, 8192)).last(), Some(&512));
}

#[test]
fn explicit_sizes_are_deduplicated_sorted_and_capped_by_batched_tokens() {
    let explicit = [64, 8, 64, 128];
    let sizes = resolve_capture_sizes(SizeInputs {
        explicit_sizes: Some(&explicit),
        ..inputs(64, 64)
    });
    assert_eq!(sizes, [8, 64]);
}

#[test]
fn an_explicit_max_bounds_the_default_list() {
    let sizes = resolve_capture_sizes(SizeInputs {
        explicit_max: Some(20),
        ..inputs(1024, 8192)
    });
    assert_eq!(sizes, [1, 2, 4, 8, 16]);
}

#[test]
fn sequence_parallelism_keeps_multiples_of_tp() {
    let sizes = resolve_capture_sizes(SizeInputs {
        explicit_max: Some(16),
        sequence_parallel_tp: Some(4),
        ..inputs(1024, 8192)
    });
    assert_eq!(sizes, [4, 8, 16]);
}

#[test]
fn no_graphs_means_no_sizes() {
    assert!(
        resolve_capture_sizes(SizeInputs {
            graphs_on: false,
            ..inputs(64, 64)
        })
        .is_empty()
    );
}

#[test]
fn graph_keys_are_read_and_others_kept() {
    let value = json!({"cudagraph_mode": "full_decode_only", "cuda_graph_sizes": [8, 16],
                       "max_cudagraph_capture_size": 16, "pass_config": {"enable_sp": true},
                       "level": 3, "custom_ops": ["none"]});
    let (config, errors) = parse_compilation_config(&value, &|_| Location::START);
    assert!(errors.is_empty(), "{errors:?}");
    assert_eq!(
        config.cudagraph_mode.map(|m| m.value),
        Some(CudaGraphMode::FullDecodeOnly)
    );
    assert_eq!(
        config.cudagraph_capture_sizes.map(|s| s.value),
        Some(vec![8, 16])
    );
    assert_eq!(config.max_cudagraph_capture_size.map(|m| m.value), Some(16));
    assert_eq!(config.enable_sp.map(|s| s.value), Some(true));
    assert_eq!(config.level.map(|l| l.value), Some(3));
    assert_eq!(config.other_keys.len(), 1);
}

#[test]
fn malformed_keys_are_errors_naming_the_key() {
    let value = json!({"cudagraph_capture_sizes": [], "max_cudagraph_capture_size": 0,
                       "pass_config": {"enable_sp": "yes"}, "mode": "x", "cudagraph_mode": 3});
    let (_, errors) = parse_compilation_config(&value, &|_| Location::START);
    let keys: Vec<&str> = errors.iter().map(|e| e.key.as_str()).collect();
    assert_eq!(
        keys,
        [
            "cudagraph_capture_sizes",
            "cudagraph_mode",
            "max_cudagraph_capture_size",
            "mode",
            "pass_config.enable_sp"
        ]
    );
    let (_, errors) = parse_compilation_config(&json!("FULL"), &|_| Location::START);
    assert_eq!(errors.len(), 1);
}

#[test]
fn every_mode_name_round_trips() {
    for mode in [
        CudaGraphMode::None,
        CudaGraphMode::Piecewise,
        CudaGraphMode::Full,
        CudaGraphMode::FullDecodeOnly,
        CudaGraphMode::FullAndPiecewise,
    ] {
        assert_eq!(
            CudaGraphMode::parse(&mode.as_str().to_lowercase()),
            Some(mode)
        );
    }
    assert_eq!(CudaGraphMode::parse("FULL_DECODE"), None);
}

#[test]
fn an_absurd_explicit_max_stops_the_default_list_at_the_bound() {
    let sizes = resolve_capture_sizes(SizeInputs {
        explicit_max: Some(u32::MAX),
        ..inputs(u32::MAX, u32::MAX)
    });
    assert_eq!(sizes.last(), Some(&MAX_DEFAULT_CAPTURE_SIZE));
}
