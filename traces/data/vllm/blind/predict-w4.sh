#!/usr/bin/env bash
# The blind predictions of the w4 plans' judged runs (README.md, "128/4096 after the warm-up"): run from the
# repository root with a release afd-sim built.
set -euo pipefail
tmp=$(mktemp -d); trap 'rm -rf "$tmp"' EXIT
K='{"enable_flashinfer_autotune": false}'; G='{"cudagraph_mode": "FULL_DECODE_ONLY"}'
S="vllm serve /root/model/dsv2l --load-format dummy --kernel-config '$K' --max-num-seqs 128 --max-num-batched-tokens 4096"
for label in graph-128-4096-w4 eager-128-4096-w4; do
  case $label in
    graph-*) serve="$S --compilation-config '$G' --jit-monitor-verbose" ;;
    eager-*) serve="$S --enforce-eager --jit-monitor-verbose" ;;
  esac
  python3 - "$label" <<'PY' > "$tmp/$label.tsv"
import json, sys
label = sys.argv[1]
p = json.load(open(f"gpu-probes/plans/engine-dsv2l-{label}.json"))
for w in p["workloads"]:
    rate = w.get("request_rate", "inf"); conc = w.get("max_concurrency", "none")
    print(w["name"], w["num_prompts"], w["input_len"], w["output_len"], rate, conc, w["seed"], sep="\t")
PY
  while IFS=$'\t' read -r name n i o rate conc seed; do
    ./target/release/afd-sim predict --serve-args "$serve" --real-engine --warm-kernels \
      --num-prompts "$n" --input-len "$i" --output-len "$o" --request-rate "$rate" --max-concurrency "$conc" \
      --bench-seed "$seed" --json > "traces/data/vllm/blind/h200-dsv2l-$label-$name.predicted.json" 2>/dev/null
    python3 -c "
import json,sys
d=json.load(open(sys.argv[1]))
print(sys.argv[2], '%.1f'%d['output_throughput'], '%.2f'%d['mean_tpot_ms'], '%.1f'%d['mean_ttft_ms'])" "traces/data/vllm/blind/h200-dsv2l-$label-$name.predicted.json" "$label $name"
  done < "$tmp/$label.tsv"
done
