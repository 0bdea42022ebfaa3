#!/usr/bin/env bash
# One device call: smoke-test every subcommand at small sizes, then (PHASES containing "full") the
# measurements that are committed under traces/data/. Run from the repository root on the GPU machine:
#   PHASES="smoke full" gpu-probes/scripts/measure.sh        (reads ./.device/afd-probe)
# Every step has its own timeout so one hang cannot eat the call; a full step runs only when its smoke
# step passed. Results go to $OUT (or ./out); the last thing printed is a short summary table.
set -uo pipefail
OUT=${OUT:-./out}
PHASES=${PHASES:-smoke full}
PROBE=${PROBE:-./.device/afd-probe}
QWEN=${QWEN:-qwen3-30b-a3b}
mkdir -p "$OUT"
LOG="$OUT/measure.log"
: >"$LOG"
declare -A RC
SUMMARY=()

step() { # name timeout_s command...
  local name=$1 limit=$2
  shift 2
  local t0=$SECONDS
  echo "=== $name: $*" | tee -a "$LOG"
  timeout --signal=TERM --kill-after=10 "$limit" "$@" >>"$LOG" 2>&1
  local rc=$?
  RC[$name]=$rc
  SUMMARY+=("$(printf '%-22s rc=%-3s %4ss' "$name" "$rc" "$((SECONDS - t0))")")
  echo "=== $name: rc=$rc in $((SECONDS - t0)) s" | tee -a "$LOG"
}

passed() { [[ "${RC[$1]:-1}" == 0 ]]; }

{
  echo "date: $(date -u +%FT%TZ)"
  nvidia-smi --query-gpu=index,name,driver_version,memory.total,clocks.sm,clocks.mem --format=csv
  nvidia-smi topo -m
  env | grep -E '^(NCCL|CUDA)_' | sort
  ls -l /usr/lib/x86_64-linux-gnu/libnccl* 2>/dev/null
  "$PROBE" --version
} >>"$LOG" 2>&1

if [[ $PHASES == *smoke* ]]; then
  step smoke-launch 60 "$PROBE" launch --kernels 1:16 --iters 5
  step smoke-hbm 60 "$PROBE" hbm --sizes 16M:256M --iters 5
  step smoke-p2p 120 "$PROBE" p2p --sizes 8:4M --collective-sizes 8:1M --iters 5 --out "$OUT/smoke-p2p.json"
  step smoke-attention 120 "$PROBE" attention --tokens 1,64 --batch 1,16 --context 512,2048 \
    --prefill-tokens 64 --prefill-context 0,512 --iters 5
  step smoke-moe 150 "$PROBE" moe --tokens 1,64 --grid-active 1,64 --grid-tokens-per-expert 1,64 --layers 4 --iters 5
  step smoke-pipeline 150 "$PROBE" pipeline --tokens 4,32 --contexts 512 --steps 5 --warmup-steps 2 \
    --step-timeout-s 60 --out "$OUT/smoke-pipeline.json"
fi

if [[ $PHASES == *full* ]]; then
  if passed smoke-p2p && passed smoke-attention && passed smoke-moe && passed smoke-launch && passed smoke-hbm; then
    step calibrate 330 "$PROBE" calibrate --out "$OUT/h200-deepseek-v2-lite.json"
  fi
  if passed smoke-pipeline; then
    step pipeline 240 "$PROBE" pipeline --tokens 4,32,128,512 --contexts 1024,4096 --steps 100 \
      --warmup-steps 10 --out "$OUT/pipeline-deepseek-v2-lite.json"
  fi
  if passed smoke-moe; then
    step moe-qwen3 180 "$PROBE" moe --model "$QWEN" --out "$OUT/moe-qwen3-30b-a3b.json"
  fi
fi

for f in "$OUT"/*.json; do
  [[ -f $f ]] && [[ $(stat -c %s "$f") -gt 12000000 ]] && gzip -9 "$f"
done
grep -E "^(wrong|note .*fit|afd-probe:)|error|panicked" "$LOG" | tail -n 20
echo "---- summary"
printf '%s\n' "${SUMMARY[@]}"
