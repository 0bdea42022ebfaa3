//! The planner: dimensions, judging, the frontier, determinism across thread counts, and shards
//! that merge into exactly the single run's rows.

use expect_test::{Expect, expect};

use super::candidate::{Context, RULE_TP_HEADS, RULE_TP_NODE, judge};
use super::evaluate::Inputs;
use super::frontier::{Latency, Slo, SloStat, frontier};
use super::space::{Budget, Capture, DimensionError, Dimensions, Point, points};
use super::*;
use crate::deployment::{Deployment, RecipeOptions, RoleConfig};
use crate::engine::RunOptions;
use crate::model::arch::ModelArch;
use crate::model::hardware::GpuKind;
use crate::model::workload::{Arrivals, RandomDataset, Workload, random_workload};
use crate::rng::Seed;
use crate::serving::{DboConfig, Placement, RoleLayout, ServingConfig};
use crate::topology::RuleSet;

fn budget(gpus: u32) -> Budget {
    Budget {
        gpus,
        min_gpus: gpus,
        gpus_per_node: 8,
    }
}

#[track_caller]
fn check_assign(text: &str, expect: Expect) {
    let mut dimensions = Dimensions::default();
    let out = match dimensions.assign(text) {
        Ok(()) => format!("{dimensions:?}"),
        Err(err) => format!("error: {err}"),
    };
    expect.assert_eq(&out);
}

#[test]
fn dimensions_parse_or_name_the_bad_value() {
    check_assign(
        "split=3:1,2:2; dbo=off,4 ;capture=eager,max:16,32:8",
        expect![
            "Dimensions { splits: Some([(3, 1), (2, 2)]), attention_tp: [1, 2, 4, 8], ffn_tp: [1, 2, 4, 8], expert_parallel: [true, false], dbo: [None, Some(4)], dbo_prefill: [512], capture: [Eager, Max(16), Sizes([8, 32])], max_num_seqs: [32, 64, 128], max_num_batched_tokens: [512, 2048, 8192], baseline: true, nics: [] }"
        ],
    );
    check_assign(
        "max-num-seqs=64,16,64;expert-parallel=on;baseline=off",
        expect![
            "Dimensions { splits: None, attention_tp: [1, 2, 4, 8], ffn_tp: [1, 2, 4, 8], expert_parallel: [true], dbo: [None, Some(2), Some(32)], dbo_prefill: [512], capture: [Eager, Auto, Sizes([64])], max_num_seqs: [16, 64], max_num_batched_tokens: [512, 2048, 8192], baseline: false, nics: [] }"
        ],
    );
    check_assign(
        "tp=1",
        expect![[
            r#"error: unknown dimension "tp"; dimensions are split, attention-tp, ffn-tp, expert-parallel, dbo, dbo-prefill, capture, max-num-seqs, max-num-batched-tokens, baseline, nics"#
        ]],
    );
    check_assign(
        "split=12-4",
        expect![[r#"error: dimension split: "12-4" is not A:F (e.g. 12:4) or all"#]],
    );
    check_assign(
        "capture=max:0",
        expect![[
            r#"error: dimension capture: "max:0" is not eager, auto, max:N or sizes like 8:16:32"#
        ]],
    );
    check_assign(
        "dbo=0",
        expect![[r#"error: dimension dbo: "0" is not off or a decode token threshold >= 1"#]],
    );
    check_assign(
        "max-num-seqs=",
        expect![[r#"error: dimension max-num-seqs has no values"#]],
    );
    check_assign(
        "dbo",
        expect![[r#"error: expected NAME=VALUES (e.g. dbo=off,2,32), got "dbo""#]],
    );
    assert_eq!(
        Dimensions::default().assign("baseline=on,off"),
        Err(DimensionError::Value {
            name: "baseline".to_owned(),
            value: "baseline=on,off".to_owned(),
            expected: "a single on or off",
        })
    );
    for text in ["eager", "auto", "max:8", "8:16"] {
        assert_eq!(Capture::parse(text).unwrap().label(), text);
    }
}

#[test]
fn the_space_spans_every_split_with_a_at_least_f_and_the_baseline() {
    let mut dimensions = Dimensions::default();
    dimensions
        .assign("dbo=off;capture=auto;max-num-seqs=64;max-num-batched-tokens=2048")
        .unwrap();
    let all = points(&dimensions, budget(4));
    let layouts: Vec<String> = all
        .iter()
        .map(|p| match p.ffn {
            Some(f) => format!(
                "{}x{}/{}x{}{}",
                p.attention.dp,
                p.attention.tp,
                f.dp,
                f.tp,
                if f.expert_parallel { "ep" } else { "" }
            ),
            None => format!("colocated {}x{}", p.attention.dp, p.attention.tp),
        })
        .collect();
    expect![[r#"["3x1/1x1ep", "2x1/2x1ep", "2x1/1x2ep", "2x1/2x1", "2x1/1x2", "1x2/2x1ep", "1x2/1x2ep", "1x2/2x1", "1x2/1x2", "colocated 4x1", "colocated 2x2", "colocated 1x4"]"#]]
        .assert_eq(&format!("{layouts:?}"));
    let mut wider = budget(4);
    wider.min_gpus = 2;
    // 1A1F (one FFN rank holds every expert, so only with expert parallelism) and two baselines.
    assert_eq!(
        points(&dimensions, wider)
            .iter()
            .filter(|p| p.gpus() == 2)
            .count(),
        3
    );
}

fn context(model: &ModelArch) -> Context<'_> {
    Context {
        model,
        model_path: "deepseek-ai/DeepSeek-V2-Lite",
        gpu: GpuKind::H200,
        rules: RuleSet::Latest,
        budget: budget(16),
    }
}

fn afd_point(attention: (u32, u32), ffn: (u32, u32), expert_parallel: bool) -> Point {
    Point {
        placement: Placement::Disaggregated,
        attention: RoleLayout {
            dp: attention.0,
            tp: attention.1,
            expert_parallel: false,
        },
        ffn: Some(RoleLayout {
            dp: ffn.0,
            tp: ffn.1,
            expert_parallel,
        }),
        dbo: Some(DboConfig {
            decode_threshold: 2,
            prefill_threshold: 12,
        }),
        capture: Capture::Sizes(vec![64]),
        max_num_seqs: 64,
        max_num_batched_tokens: 64,
    }
}

#[test]
fn the_seed_recipe_shape_is_legal_and_its_command_lines_say_so() {
    let model = ModelArch::deepseek_v2_lite();
    let context = context(&model);
    let candidate = judge(&afd_point((1, 2), (1, 2), true), &context).unwrap();
    expect![[r#"CUDA_VISIBLE_DEVICES=0,1 VLLM_USE_V2_MODEL_RUNNER=1 vllm serve deepseek-ai/DeepSeek-V2-Lite --data-parallel-size 1 --tensor-parallel-size 2 --enable-expert-parallel --additional-config '{"afd": {"role": "attention", "connector": "P2pNcclAFDConnector", "host": "127.0.0.1", "port": 6269, "num_attention_ranks": 2, "num_ffn_ranks": 2}}' --max-num-seqs 64 --max-num-batched-tokens 64 --enable-dbo --dbo-decode-token-threshold 2 --dbo-prefill-token-threshold 12 --compilation-config '{"cudagraph_mode": "FULL_DECODE_ONLY", "cudagraph_capture_sizes": [64]}' --host 127.0.0.1 --port 8000"#]]
        .assert_eq(&candidate.attention_args);
    // The timing view is the seed recipe's, read back from the command lines as predict reads them.
    assert_eq!(candidate.config, ServingConfig::seed_recipe());
    let role = |text: &str| RoleConfig::from_command_line(text, &RecipeOptions::default()).unwrap();
    let deployment = Deployment::new(
        role(&candidate.attention_args),
        role(&candidate.ffn_args),
        RuleSet::Latest,
    );
    assert!(deployment.check().is_clean());
    assert_eq!(candidate.capture_sizes, vec![64]);
    assert_eq!((candidate.nodes, candidate.cross_node), (1, false));
    // As the seed recipe: DBO at Attention DP 1 under model runner V2 (afd-spec §1.9).
    assert_eq!(candidate.warnings, ["mrv2.dbo-attention-dp"]);
}

#[test]
fn illegal_points_name_every_rule_they_break() {
    let model = ModelArch::deepseek_v2_lite();
    let context = context(&model);
    let refused = |point: Point| judge(&point, &context).unwrap_err();
    // A < F with the P2P connector.
    assert_eq!(
        refused(afd_point((2, 1), (4, 1), true)),
        ["afd.attention-ge-ffn"]
    );
    // Expert parallelism with FFN DP 2 x TP 2 implies sequence-parallel MoE.
    assert_eq!(
        refused(afd_point((4, 1), (2, 2), true)),
        ["afd.sequence-parallel-moe"]
    );
    // Attention TP 32 exceeds a node of 8 and the model's 16 heads; without expert parallelism
    // the latest plugin's model runner V2 refuses the FFN role too.
    assert_eq!(
        refused(afd_point((1, 32), (1, 8), false)),
        ["mrv2.static-expert-parallel", RULE_TP_HEADS, RULE_TP_NODE]
    );
    // FFN TP 4 starting at GPU 6 would straddle nodes 0 and 1.
    assert_eq!(refused(afd_point((6, 1), (1, 4), true)), [RULE_TP_NODE]);
    // A baseline that batches fewer tokens than sequences.
    let mut baseline = afd_point((16, 1), (1, 1), true);
    baseline.placement = Placement::Colocated;
    baseline.ffn = None;
    baseline.max_num_seqs = 128;
    assert_eq!(refused(baseline.clone()), ["vllm.batched-tokens-ge-seqs"]);
    baseline.max_num_seqs = 64;
    let candidate = judge(&baseline, &context).unwrap();
    assert_eq!(
        (
            candidate.config.gpus(),
            candidate.nodes,
            candidate.cross_node
        ),
        (16, 2, true)
    );
}

fn small_workload() -> Workload {
    random_workload(
        RandomDataset {
            num_prompts: 12,
            input_len: 96,
            output_len: 8,
            range_ratio: 0.5,
        },
        Arrivals::Gamma {
            rate: 40.0,
            burstiness: 1.0,
        },
        Some(8),
        Seed(7),
    )
    .unwrap()
}

fn small_sweep(model: &ModelArch) -> Plan {
    let mut dimensions = Dimensions::default();
    dimensions
        .assign("dbo=off,2;capture=eager,auto;max-num-seqs=16;max-num-batched-tokens=64")
        .unwrap();
    let mut context = context(model);
    context.budget = Budget {
        gpus: 4,
        min_gpus: 3,
        gpus_per_node: 4,
    };
    plan(&dimensions, &context)
}

fn inputs<'a>(model: &'a ModelArch, workload: &'a Workload) -> Inputs<'a> {
    Inputs {
        model,
        calibration: None,
        workload,
        dataset: "random",
        options: RunOptions::new(Seed(7)),
        slo: Slo {
            ttft_ms: None,
            tpot_ms: Some(9.0),
            stat: SloStat::Mean,
        },
        cross_node_link: None,
        loads: Default::default(),
        capacity: None,
        engine: None,
    }
}

/// Each of `count` shards of `plan` run on two threads, written as a file and read back, with the
/// name `shard-K.csv`.
pub(in crate::planner) fn written_shards(
    plan: &Plan,
    inputs: &Inputs<'_>,
    count: u64,
) -> Vec<(String, Vec<afd_traces::sweep::SweepRow>)> {
    (1..=count)
        .map(|k| {
            let rows = run(plan, inputs, Shard { index: k, count }, 2, &|| {});
            let text =
                String::from_utf8(afd_traces::sweep::write_sweep_csv(&rows).unwrap()).unwrap();
            let name = format!("shard-{k}.csv");
            let back = afd_traces::sweep::read_sweep_csv(&text, &name).unwrap();
            (name, back)
        })
        .collect()
}

#[test]
fn rows_are_the_same_bytes_on_one_or_two_threads_and_shards_merge_into_them() {
    let model = ModelArch::deepseek_v2_lite();
    let workload = small_workload();
    let plan = small_sweep(&model);
    assert!(plan.candidates.len() > 30, "{}", plan.candidates.len());
    let inputs = inputs(&model, &workload);
    let single = run(&plan, &inputs, Shard::WHOLE, 1, &|| {});
    let bytes = afd_traces::sweep::write_sweep_csv(&single).unwrap();
    let parallel = run(&plan, &inputs, Shard::WHOLE, 2, &|| {});
    assert_eq!(
        afd_traces::sweep::write_sweep_csv(&parallel).unwrap(),
        bytes
    );
    // Three shards, written and read back as files are, merge into the same bytes.
    let files = written_shards(&plan, &inputs, 3);
    for (k, (_, rows)) in (1..).zip(&files) {
        assert!(
            rows.iter()
                .all(|r| r.candidate % 3 == k - 1 && r.rank.is_none())
        );
    }
    let merged = merge(files.clone()).unwrap();
    assert_eq!(afd_traces::sweep::write_sweep_csv(&merged).unwrap(), bytes);
    // Every candidate ran, some meet the SLO, both kinds are there, frontiers are marked.
    assert!(single.iter().all(|r| r.status == "ok"));
    assert!(single.iter().any(|r| r.kind == "colocated"));
    assert!(single.iter().any(|r| r.rank == Some(1)));
    assert!(single.iter().any(|r| r.frontier_tpot == Some(true)));
    assert!(single.iter().any(|r| r.cross_check.is_some()));

    // Joining the wrong files is refused, naming them.
    let mut twice = files.clone();
    twice.push(files[0].clone());
    assert_eq!(
        merge(twice).unwrap_err().to_string(),
        "candidate 0 appears in both shard-1.csv and shard-1.csv"
    );
    assert_eq!(
        merge(files[..2].to_vec()).unwrap_err().to_string(),
        format!(
            "the files hold {} of the sweep's {} candidates; missing 2, 5, 8, 11, 14, 17, 20, 23, 26, 29, …",
            single.len() - files[2].1.len(),
            single.len()
        )
    );
    let mut other = files.clone();
    other[1].1[0].sweep = "0000000000000000".to_owned();
    assert!(
        merge(other)
            .unwrap_err()
            .to_string()
            .starts_with("shard-2.csv is from sweep 0000000000000000, shard-1.csv is from sweep")
    );
    assert_eq!(merge(Vec::new()), Err(MergeError::Nothing));
}

#[test]
fn shards_parse_and_partition_round_robin() {
    assert_eq!(Shard::parse("2/3"), Ok(Shard { index: 2, count: 3 }));
    for bad in ["0/3", "4/3", "1/0", "a/b", "3"] {
        assert_eq!(
            Shard::parse(bad).unwrap_err().to_string(),
            format!("--shard must be K/N with 1 <= K <= N (e.g. 3/8), got {bad:?}")
        );
    }
    let owners: Vec<u64> = (0..7)
        .map(|i| {
            (1..=3)
                .find(|&k| Shard { index: k, count: 3 }.contains(i))
                .unwrap()
        })
        .collect();
    assert_eq!(owners, [1, 2, 3, 1, 2, 3, 1]);
}

fn row_at(candidate: u64, tpot: f64, tokens: f64) -> afd_traces::sweep::SweepRow {
    let model = ModelArch::deepseek_v2_lite();
    let context = context(&model);
    let point = afd_point((1, 2), (1, 2), true);
    let candidate_row = judge(&point, &context).unwrap();
    let workload = small_workload();
    let mut options = RunOptions::new(Seed(1));
    options.max_events = 0;
    let mut inputs = inputs(&model, &workload);
    inputs.options = options;
    let mut row = evaluate::evaluate(&candidate_row, candidate, 9, "f", &inputs);
    row.outcome = Some("completed".to_owned());
    row.failed = Some(0);
    row.mean_tpot_ms = Some(tpot);
    row.output_tokens_per_s_per_gpu = Some(tokens);
    row
}

#[test]
fn the_frontier_keeps_only_undominated_points() {
    // (TPOT, tokens/s/GPU): 2 dominates 1; 3 and 4 tie and both stay; 5 is slower and no better.
    let rows = vec![
        row_at(0, 5.0, 100.0),
        row_at(1, 6.0, 90.0),
        row_at(2, 7.0, 150.0),
        row_at(3, 7.0, 150.0),
        row_at(4, 8.0, 150.0),
        row_at(5, 9.0, 200.0),
    ];
    let on: Vec<u64> = frontier(&rows, Latency::Tpot)
        .into_iter()
        .map(|i| rows[i].candidate)
        .collect();
    assert_eq!(on, [0, 2, 3, 5]);
}

#[test]
fn reusing_identical_runs_gives_the_same_bytes_as_simulating_every_candidate() {
    let model = ModelArch::deepseek_v2_lite();
    let workload = small_workload();
    let mut dimensions = Dimensions::default();
    // At concurrency 8 the larger max-num-seqs never bind; 64 tokens chunk the 48-144 token
    // prompts, so the budgets differ in some runs and not in others.
    dimensions
        .assign("dbo=off,2;capture=eager,16;max-num-seqs=4,8,16;max-num-batched-tokens=64,256,1024")
        .unwrap();
    let mut context = context(&model);
    context.budget = Budget {
        gpus: 3,
        min_gpus: 3,
        gpus_per_node: 4,
    };
    let plan = plan(&dimensions, &context);
    let inputs = inputs(&model, &workload);
    let every = run_counted(&plan, &inputs, Shard::WHOLE, 2, false, &|| {});
    let reused = run_counted(&plan, &inputs, Shard::WHOLE, 2, true, &|| {});
    let total = plan.candidates.len() as u64;
    let groups = reuse_groups(&plan, &(0..total).collect::<Vec<_>>()).len() as u64;
    assert!(total > 30, "{total}");
    assert_eq!((every.simulated, every.reused), (total, 0));
    assert_eq!(reused.simulated + reused.reused, total);
    let bytes = afd_traces::sweep::write_sweep_csv(&every.rows).unwrap();
    assert_eq!(
        afd_traces::sweep::write_sweep_csv(&reused.rows).unwrap(),
        bytes
    );
    // Limits changed some runs of a group (more distinct runs than groups), every distinct run
    // was simulated, and the rest were reused.
    let distinct: std::collections::BTreeSet<_> = every
        .rows
        .iter()
        .map(|r| r.event_log_hash.clone())
        .collect();
    let distinct = distinct.len() as u64;
    assert!(
        groups < distinct && distinct <= reused.simulated && reused.reused > total / 2,
        "{total} candidates, {groups} groups, {distinct} distinct runs, {} simulated",
        reused.simulated
    );
    // A shard reuses within its slice only, and still gives the single run's rows.
    let shard = run_counted(
        &plan,
        &inputs,
        Shard { index: 2, count: 2 },
        1,
        true,
        &|| {},
    );
    let expected: Vec<_> = every.rows.iter().filter(|r| r.candidate % 2 == 1).collect();
    assert_eq!(shard.rows.len(), expected.len());
    for (got, want) in shard.rows.iter().zip(expected) {
        let mut want = want.clone();
        (want.rank, want.frontier_tpot, want.frontier_ttft) = (None, None, None);
        assert_eq!(got, &want);
    }
}

/// The `nics` dimension runs each cross-node AFD candidate once per NIC count and no other
/// candidate more than once; more NICs per host never slow a candidate down, and a sweep without
/// the dimension keeps its fingerprint.
#[test]
fn nics_per_host_multiply_only_the_cross_node_afd_candidates_and_never_slow_them() {
    let model = ModelArch::deepseek_v2_lite();
    let workload = small_workload();
    let mut context = context(&model);
    context.budget = Budget {
        gpus: 4,
        min_gpus: 4,
        gpus_per_node: 2,
    };
    let mut dimensions = Dimensions::default();
    dimensions
        .assign("split=2:2;attention-tp=1;ffn-tp=1;dbo=off;capture=auto;max-num-seqs=16;max-num-batched-tokens=64")
        .unwrap();
    let without = plan(&dimensions, &context);
    dimensions.assign("nics=1,2,4").unwrap();
    let with = plan(&dimensions, &context);
    let cross: Vec<&Candidate> = without
        .candidates
        .iter()
        .filter(|c| c.cross_node && c.config.placement == Placement::Disaggregated)
        .collect();
    assert!(
        !cross.is_empty(),
        "2A2F on nodes of 2 GPUs hands off across nodes"
    );
    let others = without.candidates.len() - cross.len();
    assert_eq!(with.candidates.len(), others + 3 * cross.len());
    assert!(with.candidates.iter().all(|c| c.nics.is_some() == c.cross_node
        || c.config.placement == Placement::Colocated));
    let link = crate::model::link::Link::from_spec(
        &crate::model::link::LinkSpec::parse("tcp").unwrap(),
        &afd_traces::hardware::builtin_datasheets(),
    )
    .unwrap();
    let mut inputs = inputs(&model, &workload);
    inputs.cross_node_link = Some(evaluate::CrossNodeLink {
        link,
        gpus_per_node: 2,
    });
    assert_eq!(fingerprint(&without, &inputs), {
        let mut same = dimensions.clone();
        same.nics.clear();
        fingerprint(&plan(&same, &context), &inputs)
    });
    assert_ne!(fingerprint(&with, &inputs), fingerprint(&without, &inputs));
    let rows = run(&with, &inputs, Shard::WHOLE, 2, &|| {});
    for window in rows.windows(2) {
        let (a, b) = (&window[0], &window[1]);
        if a.attention_args == b.attention_args && a.nics < b.nics {
            let tpot = |r: &SweepRow| r.mean_tpot_ms.unwrap();
            assert!(
                tpot(b) <= tpot(a),
                "{:?} NICs {} ms, {:?} NICs {} ms",
                a.nics,
                tpot(a),
                b.nics,
                tpot(b)
            );
        }
    }
    assert!(rows.iter().any(|r| r.nics == Some(4)));
}
