//! Flag forms, strict values, unknown flags, JSON locations and vLLM's defaults, on argument lists
//! (locations are word indices) and command lines (locations are line:column).

use std::collections::BTreeMap;

use expect_test::{Expect, expect};

use crate::deployment::{DeploymentError, RecipeOptions, RoleConfig};

fn args(words: &[&str]) -> Vec<String> {
    words.iter().map(|w| (*w).to_owned()).collect()
}

fn render_errors(err: &DeploymentError) -> String {
    err.problems()
        .into_iter()
        .map(|(location, subject, message)| {
            let subject = subject.map_or_else(String::new, |s| format!(" [{s}]"));
            format!("{location}{subject}: {message}\n")
        })
        .collect()
}

#[track_caller]
fn check_errors(line: &str, expect: Expect) {
    match RoleConfig::from_command_line(line, &RecipeOptions::default()) {
        Ok(config) => panic!("expected errors, parsed {config:?}"),
        Err(err) => expect.assert_eq(&render_errors(&err)),
    }
}

fn parse(line: &str) -> RoleConfig {
    RoleConfig::from_command_line(line, &RecipeOptions::default()).unwrap()
}

#[test]
fn space_and_equals_forms_underscores_and_short_options_agree() {
    let spaced = parse(
        "vllm serve /m --data-parallel-size 2 --tensor-parallel-size 4 --max-num-seqs 32 --enable-dbo",
    );
    // A unique prefix is the option it begins, as vLLM's argparse reads it.
    let mixed =
        parse("/m --data_parallel_size=2 --tensor-parallel=4 --max-num-seq=32 --enable_dbo");
    let short = parse("/m -dp 2 -tp=4 --max-num-seqs +32 --enable-dbo");
    for config in [&spaced, &mixed, &short] {
        assert_eq!(
            (config.dp_size(), config.tp_size(), config.max_num_seqs()),
            (2, 4, 32)
        );
        assert!(config.dbo().is_some());
        assert_eq!(config.model(), Some("/m"));
    }
}

#[test]
fn switches_take_no_value_and_have_negative_forms() {
    let config = parse("/m --enable-expert-parallel --no-enable-expert-parallel --enforce-eager");
    assert!(!config.expert_parallel());
    assert!(config.enforce_eager());
    let repeated: Vec<_> = config
        .parse_findings()
        .iter()
        .map(|f| f.rule.id())
        .collect();
    assert_eq!(repeated, ["note.repeated-flag"]);
    check_errors(
        "/m --enable-dbo=true",
        expect![[r#"
            1:4 [--enable-dbo]: --enable-dbo takes no value (write --enable-dbo or --no-enable-dbo)
        "#]],
    );
}

#[test]
fn unknown_flags_are_kept_with_or_without_values() {
    let config = parse(
        "--trust-remote-code /m --kv-transfer-config '{\"a\":1}' --seed -1 --no-enable-prefix-caching --max-logprobs=4 --enable-log-requests",
    );
    assert_eq!(config.model(), Some("/m"));
    let kept: Vec<String> = config
        .unknown_flags
        .iter()
        .map(|f| format!("{} {:?}", f.flag, f.value))
        .collect();
    expect![[r#"
        [
            "--trust-remote-code None",
            "--kv-transfer-config Some(\"{\\\"a\\\":1}\")",
            "--seed Some(\"-1\")",
            "--max-logprobs Some(\"4\")",
            "--enable-log-requests None",
        ]
    "#]]
    .assert_debug_eq(&kept);
    assert_eq!(config.parse_findings().len(), 5);
    // `--no-enable-prefix-caching` is interpreted: vLLM 0.26.0 turns prefix caching on by default.
    assert!(!config.prefix_caching());
}

#[test]
fn a_prediction_names_the_kept_flags_it_does_not_read() {
    let config = parse(
        "/m --trust-remote-code --load-format dummy --kv-cache-dtype fp8 --seed 3 --no-async-scheduling \
         --speculative_config '{\"method\":\"ngram\"}' -cc '{\"splitting_ops\":[]}'",
    );
    expect![[r#"
        [
            "--kv-cache-dtype fp8",
            "--speculative-config {\"method\":\"ngram\"}",
            "--compilation-config key splitting_ops",
        ]
    "#]]
    .assert_debug_eq(&config.flags_not_modelled());
    assert!(config.dummy_weights());
    assert!(parse("/m").flags_not_modelled().is_empty());
}

#[test]
fn asynchronous_scheduling_is_on_unless_the_last_word_turns_it_off() {
    assert!(parse("/m").async_scheduling());
    assert!(!parse("/m --no-async-scheduling").async_scheduling());
    assert!(!parse("/m --async-scheduling --no_async_scheduling").async_scheduling());
    assert!(parse("/m --no-async-scheduling --async-scheduling").async_scheduling());
}

#[test]
fn cache_and_scheduler_switches_take_vllm_defaults() {
    let config = parse("/m");
    assert!(config.prefix_caching() && config.chunked_prefill());
    assert_eq!(config.block_size(), 16);
    assert_eq!(parse("/m --attention-backend FLASHMLA").block_size(), 64);
    assert_eq!(
        parse("/m --attention-backend flashmla --block-size 32").block_size(),
        32
    );
    assert!(!parse("/m --no-enable-chunked-prefill").chunked_prefill());
}

#[test]
fn batch_defaults_follow_the_gpu_class_and_the_caps_of_vllm() {
    use crate::deployment::GpuClass;
    let large = parse("/m");
    assert_eq!(
        (large.max_num_seqs(), large.max_num_batched_tokens()),
        (1024, 8192)
    );
    let small = parse("/m").on_gpu(GpuClass::Other);
    assert_eq!(
        (small.max_num_seqs(), small.max_num_batched_tokens()),
        (256, 2048)
    );
    // max_num_seqs defaults to at most the batched-token budget; a given one is kept.
    let tight = parse("/m --max-num-batched-tokens 512");
    assert_eq!(tight.max_num_seqs(), 512);
    assert_eq!(parse("/m --max-num-seqs 64").max_num_batched_tokens(), 8192);
    // Batched DP MoE (DeepEP low-latency, EP, DP > 1) defaults to 256 tokens.
    let batched = parse("/m -dp 2 --enable-expert-parallel --all2all-backend deepep_low_latency");
    assert_eq!(
        (batched.max_num_batched_tokens(), batched.max_num_seqs()),
        (256, 256)
    );
    // Capped at max_num_seqs x max_model_len when the length is given.
    assert_eq!(
        parse("/m --max-num-seqs 2 --max-model-len 1000").max_num_batched_tokens(),
        2000
    );
}

#[test]
fn dbo_runs_only_when_ubatching_is_asked_for() {
    assert!(parse("/m").dbo().is_none());
    assert!(parse("/m --dbo-decode-token-threshold 2").dbo().is_none());
    let dbo = parse("/m --enable-dbo --ubatch-size 3");
    assert_eq!(dbo.num_ubatches(), 2);
    assert_eq!(dbo.dbo().map(|d| d.decode_token_threshold), Some(32));
    assert_eq!(
        parse("/m --ubatch-size 2")
            .dbo()
            .map(|d| d.prefill_token_threshold),
        Some(512)
    );
    assert!(parse("/m --ubatch-size 3").dbo().is_none());
}

#[test]
fn the_model_runner_resolves_as_vllm_decides() {
    use crate::deployment::ModelRunner;
    let runner = |line: &str| parse(line).model_runner();
    assert_eq!(runner("/m"), ModelRunner::V2);
    assert_eq!(runner("/m --enable-dbo"), ModelRunner::V1);
    assert_eq!(runner("/m --enable-elastic-ep"), ModelRunner::V1);
    assert_eq!(
        runner("VLLM_USE_V2_MODEL_RUNNER=0 vllm serve /m"),
        ModelRunner::V1
    );
    assert_eq!(
        runner("VLLM_USE_V2_MODEL_RUNNER=1 vllm serve /m --enable-dbo"),
        ModelRunner::V2
    );
}

#[test]
fn interpreted_values_parse_strictly_and_every_error_is_reported() {
    check_errors(
        "vllm serve /m --max-num-seqs abc --tensor-parallel-size 0 --port 70000 --gpu-memory-utilization high --max-model-len 4x --dbo-decode-token-threshold -2 extra",
        expect![[r#"
            1:30 [--max-num-seqs]: --max-num-seqs expects a positive integer, got 'abc'
            1:57 [--tensor-parallel-size]: --tensor-parallel-size expects a positive integer, got '0'
            1:66 [--port]: --port expects a TCP port 1..65535, got '70000'
            1:97 [--gpu-memory-utilization]: --gpu-memory-utilization expects a number, got 'high'
            1:118 [--max-model-len]: --max-model-len expects a positive integer, optionally with a k/m/g/t (×1000, decimals allowed) or K/M/G/T (×1024) suffix, or auto (-1), got '4x'
            1:150 [--dbo-decode-token-threshold]: --dbo-decode-token-threshold expects a non-negative integer, got '-2'
            1:153: unexpected positional argument 'extra': the model is already given
        "#]],
    );
}

#[test]
fn a_value_flag_at_the_end_or_before_a_flag_has_no_value() {
    check_errors(
        "/m --max-num-seqs --enforce-eager --port",
        expect![[r#"
            1:4 [--max-num-seqs]: --max-num-seqs expects a value
            1:35 [--port]: --port expects a value
        "#]],
    );
}

#[test]
fn forms_that_would_change_the_model_are_rejected() {
    check_errors(
        "/m --config c.yaml --afd-config x --compilation-config 3",
        expect![[r#"
            1:4 [--config]: vLLM YAML config files are not modelled; put the flags on the command line
            1:20 [--afd-config]: --afd-config belongs to the pre-plugin vLLM fork; the afd-plugin reads --additional-config '{"afd": {…}}' (afd-spec §1.1)
            1:56 [--compilation-config]: vLLM 0.26.0 takes a JSON object for --compilation-config, not a level (3); an optimization level is -O<n> (--optimization-level)
        "#]],
    );
}

/// vLLM 0.26.0 rewrites `-O<x>`, `-O=<x>` and `-O <n>` to `--optimization-level`, an integer 0-3
/// (`vllm/utils/argparse_utils.py:322-333`): every spelling reads, and what vLLM refuses is refused.
#[test]
fn optimization_levels_read_as_vllm_spells_them() {
    for (words, level) in [
        ("/m -O3", 3),
        ("/m -O=1", 1),
        ("/m -O 0", 0),
        ("/m --optimization-level 2", 2),
        ("/m --optimization_level=0", 0),
        ("/m -O1 -O2", 2),
    ] {
        let config = RoleConfig::from_command_line(words, &RecipeOptions::default())
            .unwrap_or_else(|e| panic!("{words}: {e}"));
        assert_eq!(config.optimization_level(), level, "{words}");
    }
    let default = RoleConfig::from_command_line("/m", &RecipeOptions::default()).unwrap();
    assert_eq!(default.optimization_level(), 2);
    check_errors(
        "/m -O4 -Odecode -O.cudagraph_mode=FULL -O '{\"mode\": 3}' -cc '{\"mode\": 7}'",
        expect![[r#"
            1:4 [--optimization-level]: --optimization-level (-O) takes 0, 1, 2 or 3, got '4'; a JSON compilation config goes to --compilation-config (-cc)
            1:8 [-Odecode]: vLLM 0.26.0 reads -Odecode as --optimization-level decode, which takes 0, 1, 2 or 3
            1:17 [-O.cudagraph_mode]: vLLM 0.26.0 reads -O.cudagraph_mode as --optimization-level .cudagraph_mode, which takes 0, 1, 2 or 3
            1:44 [--optimization-level]: --optimization-level (-O) takes 0, 1, 2 or 3, got '{"mode": 3}'; a JSON compilation config goes to --compilation-config (-cc)
            1:63 [--compilation-config mode]: mode must be a compilation mode 0 (NONE), 1 (STOCK_TORCH_COMPILE), 2 (DYNAMO_TRACE_ONCE) or 3 (VLLM_COMPILE), got 7
        "#]],
    );
}

#[test]
fn json_syntax_errors_point_into_a_multiline_argument() {
    check_errors(
        "vllm serve /m --additional-config '{\n  \"afd\": {\n    \"port\": 6269,\n  }\n}'",
        expect![[r#"
            4:3 [--additional-config]: --additional-config is not valid JSON: trailing comma
        "#]],
    );
    check_errors(
        "/m --compilation-config='{\"cudagraph_mode\": \"FULL_DECODE\"}'",
        expect![[r#"
            1:27 [--compilation-config cudagraph_mode]: cudagraph_mode must be one of NONE, PIECEWISE, FULL, FULL_DECODE_ONLY, FULL_AND_PIECEWISE, got "FULL_DECODE"
        "#]],
    );
}

#[test]
fn capture_size_flags_fold_into_the_compilation_config() {
    let config = parse(
        "/m --cudagraph-capture-sizes 8 16,32 --max-num-seqs 32 --compilation-config '{\"cudagraph_mode\": \"full_decode_only\"}'",
    );
    assert_eq!(config.capture_sizes(), [8, 16, 32]);
    check_errors(
        "/m --max-cudagraph-capture-size 8 --compilation-config '{\"max_cudagraph_capture_size\": 8}'",
        expect![[r#"
            1:33 [--max-cudagraph-capture-size]: --max-cudagraph-capture-size and --compilation-config max_cudagraph_capture_size are mutually exclusive
        "#]],
    );
}

#[test]
fn environment_values_parse_strictly() {
    check_errors(
        "VLLM_USE_V2_MODEL_RUNNER=true vllm serve /m",
        expect![[r#"
            1:1 [VLLM_USE_V2_MODEL_RUNNER]: VLLM_USE_V2_MODEL_RUNNER must be an integer (vLLM reads it with int()), got 'true'
        "#]],
    );
    let config =
        parse("CUDA_VISIBLE_DEVICES=0,GPU-1f,x,0, VLLM_USE_V2_MODEL_RUNNER=' 1' vllm serve /m");
    assert!(config.uses_model_runner_v2());
    let gpus: Vec<String> = config
        .gpus()
        .unwrap()
        .iter()
        .map(ToString::to_string)
        .collect();
    assert_eq!(gpus, ["0", "GPU-1f"]);
    let messages: Vec<&str> = config
        .parse_findings()
        .iter()
        .map(|f| f.message.as_str())
        .collect();
    expect![[r#"
        [
            "CUDA_VISIBLE_DEVICES entry 'x' is neither a GPU index nor a GPU-/MIG- UUID",
            "CUDA_VISIBLE_DEVICES lists GPU 0 twice",
            "CUDA_VISIBLE_DEVICES='0,GPU-1f,x,0,' has an empty entry",
        ]
    "#]]
    .assert_debug_eq(&messages);
}

#[test]
fn a_missing_model_is_an_error() {
    check_errors(
        "vllm serve --enforce-eager",
        expect![[r#"
            1:1: no model given: vllm serve needs the model path as its first argument
        "#]],
    );
    check_errors(
        "/m --model /n",
        expect![[r#"
            1:4 [--model]: the model is given both positionally and with --model
        "#]],
    );
}

#[test]
fn argument_lists_are_located_by_word_index() {
    let err = RoleConfig::from_serve_args(&args(&["/m", "--max-num-seqs", "x", "--port", "0"]))
        .unwrap_err();
    let located: Vec<String> = err
        .errors
        .iter()
        .map(|e| e.location.render("args"))
        .collect();
    assert_eq!(located, ["args: word 2", "args: word 4"]);
    let env = BTreeMap::from([("CUDA_VISIBLE_DEVICES".to_owned(), "2,3".to_owned())]);
    let config = RoleConfig::from_serve_args_with_env(
        &args(&["/m", "--served-model-name", "a", "b", "--port", "8001"]),
        &env,
    )
    .unwrap();
    assert_eq!(config.served_model_names(), ["a", "b"]);
    assert_eq!(config.http_port(), 8001);
    assert_eq!(config.gpus().map(<[_]>::len), Some(2));
}

#[test]
fn defaults_follow_vllm() {
    let config = parse("/m");
    expect![[r#"
        dp 1 tp 1 pp 1 pcp 1 dcp 1 ranks 1 gpus 1
        max_num_seqs 1024 max_num_batched_tokens 8192 max_model_len None gpu_memory_utilization 0.92
        dbo None ubatches 1 eager false mode FULL_AND_PIECEWISE http None:8000 served ["/m"]
        capture 51 sizes, largest Some(512), padded(5)=Some(8) padded(300)=Some(304) padded(513)=None
    "#]]
    .assert_eq(&summary(&config));
    let dbo = parse(
        "/m --enable-dbo --max-model-len 4K --max-num-seqs 16 --max-num-batched-tokens 24 --enforce-eager",
    );
    assert_eq!(
        dbo.dbo()
            .map(|d| (d.decode_token_threshold, d.prefill_token_threshold)),
        Some((32, 512))
    );
    assert_eq!(dbo.max_model_len(), Some(4096));
    assert_eq!(dbo.num_ubatches(), 2);
    assert!(dbo.capture_sizes().is_empty());
    assert_eq!(dbo.padded_graph_size(1), None);
    let small = parse("/m --max-num-seqs 16 --max-num-batched-tokens 24");
    assert_eq!(small.capture_sizes(), [1, 2, 4, 8, 16, 24]);
}

fn summary(c: &RoleConfig) -> String {
    format!(
        "dp {} tp {} pp {} pcp {} dcp {} ranks {} gpus {}\n\
         max_num_seqs {} max_num_batched_tokens {} max_model_len {:?} gpu_memory_utilization {}\n\
         dbo {:?} ubatches {} eager {} mode {} http {:?}:{} served {:?}\n\
         capture {} sizes, largest {:?}, padded(5)={:?} padded(300)={:?} padded(513)={:?}\n",
        c.dp_size(),
        c.tp_size(),
        c.pp_size(),
        c.pcp_size(),
        c.dcp_size(),
        c.rank_count(),
        c.gpu_count(),
        c.max_num_seqs(),
        c.max_num_batched_tokens(),
        c.max_model_len(),
        c.gpu_memory_utilization(),
        c.dbo(),
        c.num_ubatches(),
        c.enforce_eager(),
        c.cudagraph_mode(),
        c.http_host(),
        c.http_port(),
        c.served_model_names(),
        c.capture_sizes().len(),
        c.max_capture_size(),
        c.padded_graph_size(5),
        c.padded_graph_size(300),
        c.padded_graph_size(513),
    )
}

#[test]
fn capture_sizes_follow_edits_to_the_fields() {
    use crate::deployment::{Located, Location, padded_size};
    let mut config = parse("/m --compilation-config '{\"cudagraph_mode\": \"FULL_DECODE_ONLY\"}'");
    assert_eq!(config.max_capture_size(), Some(512));
    config.max_num_seqs = Some(Located::new(8, Location::START));
    assert_eq!(config.capture_sizes(), [1, 2, 4, 8, 16]);
    assert_eq!(config.padded_graph_size(9), Some(16));
    config.enforce_eager = Some(Located::new(true, Location::START));
    assert_eq!(config.max_capture_size(), None);
    assert_eq!(padded_size(&[8, 64], 0), Some(8));
    assert_eq!(padded_size(&[8, 64], 64), Some(64));
    assert_eq!(padded_size(&[], 1), None);
}

/// vLLM 0.26.0 folds dotted options into their flag's JSON object (`vllm/utils/argparse_utils.py:
/// 370-426`): every spelling of a key reads as the whole object would.
#[test]
fn dotted_json_arguments_read_as_the_whole_object() {
    let whole = parse(
        r#"/m --compilation-config '{"cudagraph_mode": "FULL_DECODE_ONLY", "mode": 3, "cudagraph_capture_sizes": [1, 2, 4, 8]}'"#,
    );
    for line in [
        "/m -cc.cudagraph_mode=FULL_DECODE_ONLY -cc.mode=3 '-cc.cudagraph_capture_sizes=[1,2,4,8]'",
        "/m --compilation-config.cudagraph_mode FULL_DECODE_ONLY --compilation_config.mode 3 --compilation-config.cudagraph_capture_sizes+ 1,2 --compilation-config.cudagraph_capture_sizes+=4,8",
        r#"/m -cc.cudagraph_mode='"FULL_DECODE_ONLY"' --max-num-seqs 64 -cc.mode 3 -cc.cudagraph_capture_sizes '[1,2,4,8]'"#,
    ] {
        let dotted = parse(line);
        assert_eq!(dotted.cudagraph_mode(), whole.cudagraph_mode(), "{line}");
        assert_eq!(dotted.capture_sizes(), whole.capture_sizes(), "{line}");
        assert_eq!(
            dotted.compilation.level.as_ref().map(|l| l.value),
            Some(3),
            "{line}"
        );
    }
    // Human-readable integers, as vLLM reads a dotted value that is not JSON.
    let sized = parse("/m -cc.max_cudagraph_capture_size=1K");
    assert_eq!(
        sized
            .compilation
            .max_cudagraph_capture_size
            .map(|m| m.value),
        Some(1024)
    );
    // A flag this model does not interpret keeps its folded object.
    let kernel = parse("/m --kernel-config.enable_flashinfer_autotune=false");
    let flag = &kernel.unknown_flags[0];
    assert_eq!(
        (flag.flag.as_str(), flag.value.as_deref()),
        (
            "--kernel-config",
            Some(r#"{"enable_flashinfer_autotune": false}"#)
        )
    );
}

/// The folded object is appended after every other word, so it wins over a whole object given
/// earlier or later (argparse keeps a flag's last value), and objects merge key by key.
#[test]
fn dotted_keys_come_last_and_merge() {
    let config = parse(
        r#"/m -cc.cudagraph_mode=NONE --compilation-config '{"cudagraph_mode": "FULL", "mode": 3}' -cc.pass_config.enable_sp=true"#,
    );
    assert_eq!(config.cudagraph_mode().as_str(), "NONE");
    assert_eq!(
        config.compilation.level, None,
        "the whole object lost to the folded one"
    );
    assert_eq!(
        config.compilation.enable_sp.as_ref().map(|b| b.value),
        Some(true)
    );
    // Each spelling is its own object, and the one that appears last wins whole.
    let spellings = parse("/m -cc.cudagraph_mode=FULL_DECODE_ONLY --compilation-config.mode=3");
    assert_eq!(spellings.cudagraph_mode().as_str(), "FULL_AND_PIECEWISE");
    assert_eq!(spellings.compilation.level.map(|l| l.value), Some(3));
    assert!(
        config.parse_findings().iter().any(|f| f
            .message
            .contains("--compilation-config is given more than once")),
        "{:?}",
        config.parse_findings()
    );
}

/// A dotted key's bad value is reported at the word that set it; a dotted option needs a value.
#[test]
fn dotted_errors_point_at_their_word() {
    check_errors(
        "/m -cc.mode=3 --max-num-seqs 8 -cc.cudagraph_mode=BOGUS -cc.cudagraph_capture_sizes+=4,x --kernel-config.x",
        expect![[r#"
            1:32 [--compilation-config cudagraph_mode]: cudagraph_mode must be one of NONE, PIECEWISE, FULL, FULL_DECODE_ONLY, FULL_AND_PIECEWISE, got "BOGUS"
            1:57 [--compilation-config cudagraph_capture_sizes]: cudagraph_capture_sizes must be a list of positive integers, got ["4","x"]
            1:90 [--kernel-config.x]: --kernel-config.x expects a value
        "#]],
    );
}

/// Every command line vLLM 0.26.0's own parser read (`traces/data/vllm-cli/`, written by
/// `sim/scripts/vllm_serve_flags.py` from the wheel) is accepted or refused here alike, and an
/// accepted one's interpreted values are the ones vLLM read.
#[test]
fn vllms_own_parser_and_this_one_accept_and_refuse_the_same_lines() {
    // argparse reads it; vLLM's SchedulerConfig then refuses it (`max_num_seqs` ge=1), as we do.
    let refused_later: [&[&str]; 1] = [&["/m", "--max-num-seqs", "0"]];
    let samples = &afd_traces::vllm_cli::builtin_serve_flags().samples;
    assert!(samples.len() >= 40);
    for sample in samples {
        let words = &sample.words;
        let later = refused_later.iter().any(|r| r.iter().eq(words.iter()));
        let ours = RoleConfig::from_serve_args(words);
        match (sample.accepted && !later, ours) {
            (true, Ok(config)) => {
                let set = sample.set.as_ref().expect("an accepted sample's values");
                for (dest, value) in set {
                    let read = match dest.as_str() {
                        "model_tag" => config.model().map(Into::into),
                        "max_num_seqs" => Some(config.max_num_seqs().into()),
                        "max_num_batched_tokens" => Some(config.max_num_batched_tokens().into()),
                        "tensor_parallel_size" => Some(config.tp_size().into()),
                        "data_parallel_size" => Some(config.dp_size().into()),
                        "enforce_eager" => Some(config.enforce_eager().into()),
                        "enable_prefix_caching" => Some(config.prefix_caching().into()),
                        "enable_expert_parallel" => Some(config.expert_parallel().into()),
                        // -1: fit to the KV cache (`--max-model-len auto`).
                        "max_model_len" if config.max_model_len_auto() => Some((-1).into()),
                        "max_model_len" => config.max_model_len().map(Into::into),
                        "compilation_config.cudagraph_mode" => {
                            Some(config.cudagraph_mode().as_str().into())
                        }
                        // Kept, not interpreted (or the level, read through the graph mode).
                        _ => continue,
                    };
                    assert_eq!(read.as_ref(), Some(value), "{words:?}: {dest}");
                }
            }
            (false, Err(_)) => {}
            (expected, got) => panic!("{words:?}: vLLM accepts it: {expected}; here: {got:?}"),
        }
    }
}

#[test]
fn words_vllm_refuses_are_refused_with_its_reason() {
    check_errors(
        "/m --max-num-seqz 8",
        expect![[r#"
            1:4 [--max-num-seqz]: unrecognized argument: vLLM 0.26.0's vllm serve has no option --max-num-seqz, and refuses it; did you mean --max-num-seqs?
        "#]],
    );
    check_errors(
        "/m -tp2 --swap-space 4",
        expect![[r#"
            1:4 [-tp2]: unrecognized argument: vLLM 0.26.0's vllm serve has no option -tp2, and refuses it; argparse attaches a value only to a one-letter option: write -tp 2
            1:9 [--swap-space]: unrecognized argument: vLLM 0.26.0's vllm serve has no option --swap-space, and refuses it
        "#]],
    );
    check_errors(
        "/m --max-num 8",
        expect![[r#"
            1:4 [--max-num]: ambiguous option: --max-num could match --max-num-batched-tokens, --max-num-scheduled-tokens, --max-num-seqs, --max-num-partial-prefills (vLLM 0.26.0 refuses it; write the option in full)
        "#]],
    );
    check_errors(
        "/m --help",
        expect![[r#"
            1:4 [--help]: --help prints vllm serve's help and exits: the server never starts
        "#]],
    );
    check_errors(
        "/m --kv-cache-dtype fp9 --load-format",
        expect![[r#"
            1:4 [--kv-cache-dtype]: invalid choice: 'fp9' (vLLM 0.26.0 takes auto, bfloat16, float16, fp8, fp8_ds_mla, fp8_e4m3, fp8_e5m2, fp8_inc, fp8_per_token_head, int4_per_token_head, int8_per_token_head, nvfp4, turboquant_3bit_nc, turboquant_4bit_nc, turboquant_k3v4_nc, turboquant_k8v4)
            1:25 [--load-format]: --load-format expected one argument (vLLM refuses it bare)
        "#]],
    );
    check_errors(
        "/m --all2all-backend nccl --attention-backend FLASH_MLA",
        expect![[r#"
            1:4 [--all2all-backend]: invalid choice: 'nccl' (vLLM 0.26.0 takes allgather_reducescatter, deepep_high_throughput, deepep_low_latency, deepep_v2, flashinfer_all2allv, flashinfer_nvlink_one_sided, flashinfer_nvlink_two_sided, mori_high_throughput, mori_low_latency, naive, nixl_ep, pplx)
            1:27 [--attention-backend]: unknown attention backend 'FLASH_MLA': vLLM 0.26.0 takes auto or one of FLASH_ATTN, FLASH_ATTN_DIFFKV, TRITON_ATTN, TRITON_ATTN_DIFFKV, ROCM_ATTN, ROCM_AITER_MLA, ROCM_AITER_TRITON_MLA, ROCM_AITER_FA, ROCM_AITER_MLA_SPARSE, XPU_MLA_SPARSE, TORCH_SDPA, FLASHINFER, FLASHINFER_MLA, TOKENSPEED_MLA, FLASHINFER_MLA_SPARSE, FLASHINFER_MLA_SPARSE_SM120, TRITON_MLA, CUTLASS_MLA, FLASHMLA, FLASHMLA_SPARSE, FLASHMLA_SPARSE_DSV4, FLASHINFER_MLA_SPARSE_DSV4, ROCM_FLASHMLA_SPARSE_DSV4, FLASH_ATTN_MLA, FLASH_ATTN_MLA_SPARSE, MINIMAX_M3_SPARSE, NO_ATTENTION, FLEX_ATTENTION, HPC_ATTN, ROCM_AITER_UNIFIED_ATTN, CPU_ATTN, TURBOQUANT, CUSTOM
        "#]],
    );
    check_errors(
        "/m --trust-remote-code=yes --afd-config '{}'",
        expect![[r#"
            1:4 [--trust-remote-code]: --trust-remote-code takes no value: vLLM refuses the explicit argument 'yes' (write --trust-remote-code alone)
            1:28 [--afd-config]: --afd-config belongs to the pre-plugin vLLM fork; the afd-plugin reads --additional-config '{"afd": {…}}' (afd-spec §1.1)
        "#]],
    );
}

#[test]
fn a_prefix_is_read_as_its_option_and_noted() {
    let config = parse("/m --max-num-seq 8 --enforce -t 2");
    assert_eq!((config.max_num_seqs(), config.tp_size()), (8, 2));
    assert!(config.enforce_eager());
    let noted: Vec<String> = config
        .parse_findings()
        .iter()
        .filter(|f| f.rule.id() == "note.abbreviated-flag")
        .map(|f| f.message.clone())
        .collect();
    expect![[r#"
        [
            "read as --max-num-seqs, the one vLLM 0.26.0 option it begins",
            "read as --enforce-eager, the one vLLM 0.26.0 option it begins",
            "read as -tp, the one vLLM 0.26.0 option it begins",
        ]
    "#]]
    .assert_debug_eq(&noted);
}
