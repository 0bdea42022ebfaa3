#!/usr/bin/env bash
# One device call of real-vLLM engine measurements (issue "Real vLLM as the ground truth"): for each
# server configuration named, `afd-probe vllm` starts `vllm serve` of DeepSeek-V2-Lite (dummy weights)
# on GPU 0, runs the configuration's plan, and the outputs are packed as $OUT/LABEL.tgz.
# usage: vllm-engine.sh LABEL...    (labels: eager-64-64 graph-64-64 graph-256-2048 graph-256-8192 eager-256-8192,
#        their repeats on fresh servers graph-64-64-r2 graph-256-2048-r2 graph-256-8192-r2 eager-256-8192-r2,
#        and cal-graph-256-8192 cal-eager-256-8192: the fixed-shape calibration plans on those servers;
#        cal2-graph-256-2048 cal2-eager-256-2048 cal2-piecewise-256-2048: mixed steps beside a standing batch;
#        piecewise-1024-8192: vLLM's defaults, no limit or mode flags; piecewise-64-64: FULL_AND_PIECEWISE at 64/64;
#        cal3-piecewise-64-64: mixed steps within the piecewise graphs at 64/64;
#        cal4-graph-256-2048: injections close together, lone prompts on an idle engine;
#        piecewise-1024-8192-w2: vLLM's defaults with judged workloads no earlier run used;
#        cal5-piecewise-1024-8192: mixed steps without graphs on vLLM's defaults;
#        cal6-piecewise-1024-8192: steps past the capture size beside 4 decodes, and a Poisson calibration run;
#        cal7-piecewise-64-64: mixed steps with the prompt length and the decodes' context varied apart;
#        cal8-piecewise-1024-8192: the idle engine's first step by idle spell and step kind, two Poisson calibration runs;
#        cal9-eager-256-2048: the same idle spells and running-engine prompts on an eager server;
#        cal10-eager-256-2048: each prompt length injected twice beside 1, 4, 16 and 64 eager decodes;
#        cal11-piecewise-1024-8192: long-context decode bursts on vLLM's defaults;
#        cal12-graph-256-2048: 2,048-token prefill steps beside long-context decodes, stamped step logs;
#        cal13-eager-64-64: chunked prefill at 64 tokens a step, lone and beside 1 and 4 decodes, stamped (its repeats
#        on fresh servers cal13-eager-64-64-r2 and -r3; cal39-eager-256-8192-r2 repeats cal39);
#        cal14-piecewise-1024-8192: decode batches of 256-1,024 on vLLM's defaults, streamed and not, stamped;
#        cal15-graph-256-8192: steps that prefill many short or prefix-cached prompts at once, stamped;
#        cal16-graph-256-8192: the front end's intake of 256 prompts sent at once, cold and cached, stamped;
#        cal17-graph-256-8192: arrival-bound decode runs beside the same server's fixed shapes, stamped;
#        graph-64-64-w3 eager-64-64-w3: the seed recipe's limits with judged workloads no earlier run used;
#        cal18-graph-64-64: steps without graphs at 64/64, lone and beside 2 and 8 decodes, and Poisson runs, stamped;
#        cal19-graph-64-64: the same steps for minutes, beside host-sampler.py's CPU readings (SAMPLER=0.2);
#        cal20-graph-64-64: cal19's steps and a low-load Poisson run, beside proc-sampler.py (PROCS=0.2);
#        cal21-graph-64-64: the same chunk with the engine idle between prompts and busy, interleaved (PROCS=0.2);
#        cal22-graph-256-2048: 2,048-token prompts injected beside 64-240 decodes, and a dec-sat calibration run;
#        cal23-graph-256-2048: decode bursts of 16-240 greedy, at temperature 1 and at 2, their generated text kept;
#        cal24-graph-256-2048: cal23's bursts without its bench runs;
#        cal25-graph-256-2048: decode bursts on a server that returns each token's routed experts,
#        counted (--enable-return-routed-experts: its steps price nothing; commit under routing/);
#        cal26-graph-256-2048: 1,024- and 256-token prompts injected beside 1-64 decodes, three rounds (PROCS=0.2);
#        cal27-graph-256-2048: 128- and 64-token prompts injected beside 1-64 decodes, three rounds (PROCS=0.2);
#        cal28-graph-64-64: 128-token prompts chunked beside 1-56 decodes at the 64-token budget (PROCS=0.2);
#        cal27-graph-256-2048-r2 cal28-graph-64-64-r2: the same plans, prompts and seeds on a fresh server;
#        cal29-graph-256-2048 cal30-graph-256-8192: the judged plans' six bench shapes in the judged
#        order, twice, as calibration runs on seeds of their own (PROCS=0.2);
#        cal31-graph-256-2048: cal29's plan with vLLM logging every Triton JIT compile during inference
#        (--jit-monitor-verbose: which shapes compile, when, and what the step around it cost);
#        graph-128-4096-w4 eager-128-4096-w4: limits no earlier server ran, judged workloads predicted
#        before they ran, after the warm-up `afd-sim warm-up` lists, every Triton compile logged;
#        cal32-graph-128-4096: full-budget prefill steps with and without chunks that continue a prompt;
#        cal32-graph-128-4096-r2: the same plan on a fresh server (another loan's host);
#        cal33-eager-256-2048 cal34-eager-256-2048 cal36-eager-256-2048: eager decode bursts of 1-256, calibration bench runs,
#        injections and lone prompts, one plan, each label on its own loan (the eager tables' host level);
#        cal37-eager-256-2048 (and -r2, the same plan on a fresh server): cal33's plan with `vllm bench serve`
#        sending 1, 4 and 16 prompts at once beside each round's probe bursts of those sizes (does the bench
#        client slow a small eager batch too?); each bench run costs 25-35 s of `vllm bench serve`'s own start, so
#        the plan outlasts one 600 s call: its two rounds of bursts and bench runs come first;
#        cal38-graph-256-2048 (and -r2, the same plan on a fresh server): `vllm bench serve` bursts of 64-512
#        prompts at once and 256 at a concurrency of 128, twice, beside the probe's own burst of 256: does the
#        wait for the client's connections grow with the burst (docs/fidelity.md, "The bench client's connections")?
#        cal39-eager-256-8192: prompts of 3,072-8,192 tokens injected beside 1, 16 and 64 standing eager decodes,
#        twice, and lone on the idle engine (eager steps past 2,048 tokens, which no stamped step had priced),
#        with each round's uniform decode bursts of 1-256 (one more loan for the eager decode table);
#        cal40-eager-256-8192: prefill bursts of 1-256 prompts filling one step of 8,192 or 2,048 tokens, twice
#        (an eager step's cost by its prompts and by its tokens, apart);
#        cal41-eager-256-8192: cal40's bursts of about 8,000 tokens sent into 64 and 1 standing eager decodes,
#        twice, beside the bare bursts (do the decodes beside a full prefill step make it cost more?);
#        cal42-eager-256-8192: prompts of 12,000 and 16,000 tokens (a full chunk, then one that continues it)
#        and whole prompts of the continued chunks' lengths, sent into 64 and 1 standing eager decodes, twice;
#        cal43-eager-256-2048: cal42's shapes at the 2,048-token budget (continued chunks after a 2,000-token context);
#        cal35-eager-profile-256-2048: an eager server with vLLM's torch profiler on, its hook
#        (profile-modules.py, always, whatever HOOK says) profiling decode and prefill shapes and
#        dividing each step's host time by module (the AFD roles' part of a plain step); the trace is
#        written plain (no gzip, no CUDA-time table) so each stop_profile returns in seconds)
# env:   PROBE (afd-probe binary), MODEL (model folder), TOOLS (../shared/vllm copied into the checkout),
#        HOOK (optional shell command run against the last server while it is up), LIMIT_S (seconds per label),
#        SAMPLER (seconds between host-sampler.py's CPU readings, written to $OUT/LABEL-host.log; none when unset),
#        PROCS (seconds between proc-sampler.py's readings of the server's threads, to $OUT/LABEL-proc.log, and
#        nvidia-smi's of the GPU's clocks, to $OUT/LABEL-gpu.csv; none when unset)
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
PROBE=${PROBE:-.device/bin/afd-probe}
MODEL=${MODEL:-/root/model/dsv2l}
TOOLS=${TOOLS:-.device/vllm-tools}
OUT=${OUT:-/tmp/out}
source "$TOOLS/device-env.sh"
if [ ! -f "$MODEL/config.json" ]; then
  python3 "$TOOLS/make_model.py" "$TOOLS/deepseek-v2-lite-config.json" "$MODEL"
fi
graph='{"cudagraph_mode": "FULL_DECODE_ONLY"}'
# FlashInfer's start-up autotune costs about 2 minutes per start and tunes no kernel these runs use
# (Triton fused MoE, FLASH_ATTN_MLA): switched off, and recorded in every run's serve words.
kernel='{"enable_flashinfer_autotune": false}'
labels=("$@")
# The card the device lent (an H100 may come where an H200 was asked for), into every run's notes.
gpu=$(nvidia-smi --query-gpu=name --format=csv,noheader 2>/dev/null | head -1 || echo unknown)
for i in "${!labels[@]}"; do
  label=${labels[$i]}
  case "$label" in
    eager-64-64|cal13-eager-64-64|eager-64-64-w3) plan=$label; flags=(--enforce-eager --max-num-seqs 64 --max-num-batched-tokens 64) ;;
    cal13-eager-64-64-r2|cal13-eager-64-64-r3) plan=cal13-eager-64-64; flags=(--enforce-eager --max-num-seqs 64 --max-num-batched-tokens 64) ;;
    graph-64-64-w3|cal18-graph-64-64|cal18-graph-64-64-r2|cal19-graph-64-64|cal20-graph-64-64|cal21-graph-64-64|cal28-graph-64-64) plan=$label; flags=(--max-num-seqs 64 --max-num-batched-tokens 64 --compilation-config "$graph") ;;
    graph-64-64|graph-64-64-r2) plan=graph-64-64; flags=(--max-num-seqs 64 --max-num-batched-tokens 64 --compilation-config "$graph") ;;
    graph-256-2048|graph-256-2048-r2) plan=graph-256-2048; flags=(--max-num-seqs 256 --max-num-batched-tokens 2048 --compilation-config "$graph") ;;
    eager-256-2048) plan=$label; flags=(--enforce-eager --max-num-seqs 256 --max-num-batched-tokens 2048) ;;
    graph-256-8192|graph-256-8192-r2) plan=$label; flags=(--max-num-seqs 256 --max-num-batched-tokens 8192 --compilation-config "$graph") ;;
    eager-256-8192|eager-256-8192-r2) plan=$label; flags=(--enforce-eager --max-num-seqs 256 --max-num-batched-tokens 8192) ;;
    cal-graph-256-8192|cal15-graph-256-8192|cal16-graph-256-8192|cal17-graph-256-8192|cal30-graph-256-8192) plan=$label; flags=(--max-num-seqs 256 --max-num-batched-tokens 8192 --compilation-config "$graph") ;;
    cal-eager-256-8192|cal39-eager-256-8192|cal40-eager-256-8192|cal41-eager-256-8192|cal42-eager-256-8192) plan=$label; flags=(--enforce-eager --max-num-seqs 256 --max-num-batched-tokens 8192) ;;
    cal39-eager-256-8192-r2) plan=cal39-eager-256-8192; flags=(--enforce-eager --max-num-seqs 256 --max-num-batched-tokens 8192) ;;
    cal2-graph-256-2048) plan=$label; flags=(--max-num-seqs 256 --max-num-batched-tokens 2048 --compilation-config "$graph") ;;
    cal2-eager-256-2048) plan=$label; flags=(--enforce-eager --max-num-seqs 256 --max-num-batched-tokens 2048) ;;
    cal2-piecewise-256-2048) plan=$label; flags=(--max-num-seqs 256 --max-num-batched-tokens 2048) ;;  # vLLM's default FULL_AND_PIECEWISE
    piecewise-1024-8192|piecewise-1024-8192-w2|cal5-piecewise-1024-8192|cal6-piecewise-1024-8192|cal8-piecewise-1024-8192|cal11-piecewise-1024-8192|cal14-piecewise-1024-8192) plan=$label; flags=() ;;  # every limit and mode vLLM's default for an H200
    piecewise-64-64) plan=$label; flags=(--max-num-seqs 64 --max-num-batched-tokens 64) ;;
    cal3-piecewise-64-64|cal7-piecewise-64-64) plan=$label; flags=(--max-num-seqs 64 --max-num-batched-tokens 64) ;;  # FULL_AND_PIECEWISE
    cal9-eager-256-2048|cal10-eager-256-2048|cal43-eager-256-2048) plan=$label; flags=(--enforce-eager --max-num-seqs 256 --max-num-batched-tokens 2048) ;;
    cal38-eager-256-2048) plan=cal38-graph-256-2048; flags=(--enforce-eager --max-num-seqs 256 --max-num-batched-tokens 2048) ;;
    cal38-graph-256-2048|cal38-graph-256-2048-r2) plan=cal38-graph-256-2048; flags=(--max-num-seqs 256 --max-num-batched-tokens 2048 --compilation-config "$graph") ;;
    cal4-graph-256-2048|cal12-graph-256-2048|cal22-graph-256-2048|cal23-graph-256-2048|cal24-graph-256-2048|cal26-graph-256-2048|cal27-graph-256-2048|cal29-graph-256-2048) plan=$label; flags=(--max-num-seqs 256 --max-num-batched-tokens 2048 --compilation-config "$graph") ;;
    graph-128-4096-w4) plan=$label; flags=(--max-num-seqs 128 --max-num-batched-tokens 4096 --compilation-config "$graph" --jit-monitor-verbose) ;;
    cal32-graph-128-4096) plan=$label; flags=(--max-num-seqs 128 --max-num-batched-tokens 4096 --compilation-config "$graph" --jit-monitor-verbose) ;;
    cal32-graph-128-4096-r2) plan=cal32-graph-128-4096; flags=(--max-num-seqs 128 --max-num-batched-tokens 4096 --compilation-config "$graph" --jit-monitor-verbose) ;;
    cal33-eager-256-2048|cal34-eager-256-2048|cal36-eager-256-2048) plan=cal33-eager-256-2048; flags=(--enforce-eager --max-num-seqs 256 --max-num-batched-tokens 2048) ;;
    cal37-eager-256-2048|cal37-eager-256-2048-r2) plan=cal37-eager-256-2048; flags=(--enforce-eager --max-num-seqs 256 --max-num-batched-tokens 2048) ;;
    eager-128-4096-w4) plan=$label; flags=(--enforce-eager --max-num-seqs 128 --max-num-batched-tokens 4096 --jit-monitor-verbose) ;;
    cal31-graph-256-2048) plan=cal29-graph-256-2048; flags=(--max-num-seqs 256 --max-num-batched-tokens 2048 --compilation-config "$graph" --jit-monitor-verbose) ;;
    cal27-graph-256-2048-r2) plan=cal27-graph-256-2048; flags=(--max-num-seqs 256 --max-num-batched-tokens 2048 --compilation-config "$graph") ;;
    cal28-graph-64-64-r2) plan=cal28-graph-64-64; flags=(--max-num-seqs 64 --max-num-batched-tokens 64 --compilation-config "$graph") ;;
    cal35-eager-profile-256-2048) plan=$label; flags=(--enforce-eager --max-num-seqs 256 --max-num-batched-tokens 2048
      --profiler-config "{\"profiler\": \"torch\", \"torch_profiler_dir\": \"/root/prof/$label\", \"ignore_frontend\": true, \"torch_profiler_with_stack\": true, \"torch_profiler_use_gzip\": false, \"torch_profiler_dump_cuda_time_total\": false}") ;;
    cal25-graph-256-2048) plan=$label; flags=(--max-num-seqs 256 --max-num-batched-tokens 2048 --compilation-config "$graph" --enable-return-routed-experts) ;;
    *) echo "unknown label $label" >&2; exit 2 ;;
  esac
  hook=()
  if [ -n "${HOOK:-}" ] && [ "$i" -eq $((${#labels[@]} - 1)) ]; then hook=(--hook "$HOOK" --hook-timeout 240); fi
  case "$label" in
    cal35-*) rm -rf "/root/prof/$label"
      hook=(--hook "python3 $here/profile-modules.py --trace-dir /root/prof/$label --out /root/runs/$label/modules" --hook-timeout 330) ;;
  esac
  rm -rf "/root/runs/$label"
  # The host's eager dispatch speed on the idle GPU, into the run's provenance notes (host-speed.py).
  speed=$(timeout 120 python3 "$here/host-speed.py" 2>/dev/null || echo "host_speed=failed")
  echo "$label: $speed"
  notes=()
  for kv in $speed; do notes+=(--note "$kv"); done
  sampler=
  if [ -n "${SAMPLER:-}" ]; then
    python3 "$here/host-sampler.py" "$SAMPLER" > "$OUT/$label-host.log" 2>&1 &
    sampler=$!
  fi
  procs=()
  if [ -n "${PROCS:-}" ]; then
    python3 "$here/proc-sampler.py" "$PROCS" > "$OUT/$label-proc.log" 2>&1 &
    procs+=($!)
    reasons=clocks_event_reasons.active
    nvidia-smi --help-query-gpu > "$OUT/.query-fields" 2>&1 || true
    grep -q "$reasons" "$OUT/.query-fields" || reasons=clocks_throttle_reasons.active
    rm -f "$OUT/.query-fields"
    ms=$(python3 -c "print(round($PROCS * 1000))")
    nvidia-smi --query-gpu="timestamp,clocks.sm,clocks.mem,power.draw,temperature.gpu,utilization.gpu,$reasons" \
      --format=csv,nounits -lms "$ms" > "$OUT/$label-gpu.csv" 2>&1 &
    procs+=($!)
  fi
  timeout "${LIMIT_S:-560}" "$PROBE" vllm --plan "$here/../plans/engine-dsv2l-$plan.json" \
    --out "/root/runs/$label" --label "$label" --vllm 'python3 -m vllm.entrypoints.cli.main' \
    --note gpu_machine="$gpu" --note bundle="../shared/vllm (vLLM 0.26.0 wheel, stripped of FA2 and sm_100)" \
    "${notes[@]}" "${hook[@]}" -- "$MODEL" --load-format dummy --kernel-config "$kernel" "${flags[@]}" || echo "probe for $label ended with $?"
  if [ -n "$sampler" ]; then kill "$sampler" 2>/dev/null || true; fi
  for p in "${procs[@]}"; do kill "$p" 2>/dev/null || true; done
  tar czf "$OUT/$label.tgz" -C /root/runs "$label"
  ls -la "$OUT/$label.tgz"
done
