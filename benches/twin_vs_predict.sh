#!/usr/bin/env bash
# Compares what a client measures against an afd-twin pair at --time-scale 1 with what `afd-sim predict`
# predicts for the same workload: TTFT, TPOT, ITL and E2EL (mean and median, milliseconds), side by side.
#
# The pair is the seed recipe (sim/tests/fixtures/recipes/2a2f_graph_dbo_dp1tp2.sh) run as docs/twin.md
# says: the recipe with `uv run vllm serve` replaced by afd-twin (on free loopback ports). The load is
# `afd-twin bench`, vllm bench serve semantics, with the recipe's benchmark settings; `afd-sim predict`
# reads the same recipe and draws the same lengths and arrival times from the same seed.
#
# Usage: benches/twin_vs_predict.sh [NUM_PROMPTS] [OUT_DIR]
#   defaults: 1024 prompts (about 205 s of real time at 5 requests/s), results in target/twin-vs-predict/
# Environment: REQUEST_RATE (5), MAX_CONCURRENCY (32), INPUT_LEN (1024), OUTPUT_LEN (128), SEED (0),
#   TIME_SCALE (1; latencies from the twin are divided by it before the comparison),
#   KERNEL_MODEL (0; 1 prices both sides from kernels alone: afd-twin and afd-sim predict --kernel-model).
# Exit status 1 when a compared figure differs by more than 10 %.
set -euo pipefail
cd "$(dirname "$0")/.."

NUM_PROMPTS=${1:-1024}
OUT=${2:-target/twin-vs-predict}
REQUEST_RATE=${REQUEST_RATE:-5}
MAX_CONCURRENCY=${MAX_CONCURRENCY:-32}
INPUT_LEN=${INPUT_LEN:-1024}
OUTPUT_LEN=${OUTPUT_LEN:-128}
SEED=${SEED:-0}
TIME_SCALE=${TIME_SCALE:-1}
KERNEL_MODEL=${KERNEL_MODEL:-0}
case "$KERNEL_MODEL" in
  0) PRICING=() ;;
  1) PRICING=(--kernel-model) ;;
  *) echo "KERNEL_MODEL=$KERNEL_MODEL: expected 0 or 1" >&2; exit 2 ;;
esac
RECIPE=sim/tests/fixtures/recipes/2a2f_graph_dbo_dp1tp2.sh
mkdir -p "$OUT"

cargo build --release -q -p afd-twin -p afd-sim-cli --bin afd-sim
TWIN=$PWD/target/release/afd-twin
SIM=$PWD/target/release/afd-sim

free_port() { python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])'; }
AFD_PORT=$(free_port)
HTTP_PORT=$(free_port)

# The recipe, twin edition: the serve command and the two ports change, nothing else.
sed -e "s#uv run vllm serve#\"$TWIN\" --time-scale $TIME_SCALE ${PRICING[*]:-}#" \
    -e "s#\"port\": 6269#\"port\": $AFD_PORT#" -e "s#--port 18305#--port $HTTP_PORT#" \
    "$RECIPE" > "$OUT/recipe.sh"
(cd "$OUT" && exec bash recipe.sh) &
PAIR=$!
cleanup() {
  # Stop the Attention twin (a child of the recipe's shell); the FFN twin follows it, as in a real pair.
  local attention
  attention=$(pgrep -P "$PAIR" -f '"role": "attention"' || true)
  [ -n "$attention" ] && kill -TERM $attention 2>/dev/null || true
  wait "$PAIR" 2>/dev/null || true
}
trap cleanup EXIT

for _ in $(seq 200); do
  grep -q "Application startup complete." "$OUT/attn.log" 2>/dev/null && break
  sleep 0.1
done
grep -q "Application startup complete." "$OUT/attn.log" || { cat "$OUT/attn.log" "$OUT/ffn.log"; exit 2; }

echo "== afd-twin bench: $NUM_PROMPTS prompts, $INPUT_LEN in / $OUTPUT_LEN out, rate $REQUEST_RATE, concurrency $MAX_CONCURRENCY, time scale $TIME_SCALE" >&2
"$TWIN" bench --base-url "http://127.0.0.1:$HTTP_PORT" --num-prompts "$NUM_PROMPTS" \
  --random-input-len "$INPUT_LEN" --random-output-len "$OUTPUT_LEN" --request-rate "$REQUEST_RATE" \
  --max-concurrency "$MAX_CONCURRENCY" --ignore-eos --seed "$SEED" \
  --percentile-metrics ttft,tpot,itl,e2el --metric-percentiles 50,99 --check-metrics --save-detailed \
  --save-result "$OUT/twin.json" > "$OUT/twin.txt"

echo "== afd-sim predict on the same recipe and workload" >&2
"$SIM" predict "$RECIPE" ${PRICING[@]+"${PRICING[@]}"} --requests-csv "$OUT/predict-requests.csv" --num-prompts "$NUM_PROMPTS" --input-len "$INPUT_LEN" \
  --output-len "$OUTPUT_LEN" --request-rate "$REQUEST_RATE" --max-concurrency "$MAX_CONCURRENCY" \
  --seed "$SEED" --json > "$OUT/predict.json"

python3 - "$OUT/twin.json" "$OUT/predict.json" "$TIME_SCALE" <<'EOF'
import json, sys
twin = json.load(open(sys.argv[1]))
sim = json.load(open(sys.argv[2]))
scale = float(sys.argv[3])
print(f"completed: twin {twin['completed']} (failed {twin['failed']}), predict {sim['completed']}")
print(f"duration s: twin {twin['duration'] / scale:.1f}, predict {sim['duration']:.1f}")
print()
print(f"| metric (ms) | afd-twin bench | afd-sim predict | difference |")
print(f"| --- | ---: | ---: | ---: |")
worst = 0.0
for metric in ["ttft", "tpot", "itl", "e2el"]:
    for stat in ["mean", "median"]:
        key = f"{stat}_{metric}_ms"
        got, want = twin[key] / scale, sim[key]
        diff = (got - want) / want * 100 if want else float("inf")
        worst = max(worst, abs(diff))
        print(f"| {stat} {metric.upper()} | {got:.2f} | {want:.2f} | {diff:+.1f} % |")
print()
print(f"largest difference: {worst:.1f} % ({'within' if worst <= 10 else 'beyond'} 10 %)")
sys.exit(0 if worst <= 10 else 1)
EOF
