#!/usr/bin/env bash
# Measures afd-twin's own overhead: requests/s and latency percentiles of a twin pair at --time-scale 0
# (no simulated time, so every millisecond is the twin's) under N concurrent clients, and checks that
# every request was answered once and /metrics is conserved.
#
# Usage: benches/twin_load.sh [NUM_PROMPTS] [CONCURRENCY] [OUT_DIR]
#   defaults: 20000 requests, 1000 concurrent clients, results in target/twin-load/
# Loopback only (127.0.0.1); the pair is stopped on exit.
set -euo pipefail
cd "$(dirname "$0")/.."

NUM_PROMPTS=${1:-20000}
CONCURRENCY=${2:-1000}
OUT=${3:-target/twin-load}
mkdir -p "$OUT"

cargo build --release -q -p afd-twin
TWIN=target/release/afd-twin

free_port() { python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])'; }
AFD_PORT=$(free_port)
HTTP_PORT=$(free_port)

role_args() {
  printf '%s\n' /path/model_weights/DeepSeek-V2-Lite --data-parallel-size 1 --tensor-parallel-size 2 \
    --enable-expert-parallel \
    --additional-config "{ \"afd\": { \"role\": \"$1\", \"connector\": \"P2pNcclAFDConnector\", \"host\": \"127.0.0.1\", \"port\": $AFD_PORT, \"num_attention_ranks\": 2, \"num_ffn_ranks\": 2 } }" \
    --max-num-seqs 64 --max-num-batched-tokens 64 --enable-dbo --dbo-decode-token-threshold 2 \
    --dbo-prefill-token-threshold 12 --max-cudagraph-capture-size 64 \
    --compilation-config '{ "cudagraph_mode": "FULL_DECODE_ONLY", "cudagraph_capture_sizes":[64] }' \
    --host 127.0.0.1 --port "$HTTP_PORT" --time-scale 0
}

mapfile -t FFN_ARGS < <(role_args ffn)
mapfile -t ATTN_ARGS < <(role_args attention)
"$TWIN" "${FFN_ARGS[@]}" > "$OUT/ffn.log" 2>&1 &
FFN_PID=$!
"$TWIN" "${ATTN_ARGS[@]}" > "$OUT/attention.log" 2>&1 &
ATTN_PID=$!
trap 'kill -TERM $ATTN_PID 2>/dev/null || true; sleep 0.5; kill -TERM $FFN_PID 2>/dev/null || true' EXIT

for _ in $(seq 100); do
  grep -q "Application startup complete." "$OUT/attention.log" && break
  sleep 0.1
done

echo "== $NUM_PROMPTS requests, $CONCURRENCY concurrent clients, 8-token prompts, 4-token outputs"
"$TWIN" bench --base-url "http://127.0.0.1:$HTTP_PORT" --num-prompts "$NUM_PROMPTS" \
  --max-concurrency "$CONCURRENCY" --random-input-len 8 --random-output-len 4 --ignore-eos \
  --percentile-metrics ttft,tpot,itl,e2el --metric-percentiles 50,99 --check-metrics \
  --save-result "$OUT/load.json"

echo "== one client, 2,000 requests (per-request overhead without queueing)"
"$TWIN" bench --base-url "http://127.0.0.1:$HTTP_PORT" --num-prompts 2000 --max-concurrency 1 \
  --random-input-len 8 --random-output-len 4 --ignore-eos \
  --percentile-metrics ttft,e2el --metric-percentiles 50,99 --check-metrics \
  --save-result "$OUT/single.json"
