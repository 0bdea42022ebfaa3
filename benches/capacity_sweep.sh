#!/usr/bin/env bash
# Measures capacity sweeps (issue "The planner answers the question users ask"): wall time,
# candidates/s and probes/s (simulations/s) of `afd-sim sweep --tpot-slo ... --ttft-slo ...` with no
# load, whose every candidate searches its capacity, and the peak resident memory.
#
# Usage: benches/capacity_sweep.sh [GPUS...]      (default: 16 64)
#   env: THREADS (default: every core), PROMPTS (--num-prompts, default 1024), SHARD (K/N, default whole),
#        OUT_DIR (default target/capacity-sweep), EXTRA (more sweep flags)
# Prints one line per budget and writes OUT_DIR/gpusN.{csv,json,log}.
set -euo pipefail
cd "$(dirname "$0")/.."
OUT=${OUT_DIR:-target/capacity-sweep}
mkdir -p "$OUT"
cargo build --release -q --bin afd-sim
BIN=target/release/afd-sim
threads=()
if [ -n "${THREADS:-}" ]; then threads=(--threads "$THREADS"); fi
shard=()
if [ -n "${SHARD:-}" ]; then shard=(--shard "$SHARD"); fi
echo "cpu: $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2- | xargs), $(nproc) cores"
for gpus in "${@:-16 64}"; do
  for g in $gpus; do
    tag="gpus$g${SHARD:+-shard${SHARD/\//of}}"
    /usr/bin/time -f '%e %M' -o "$OUT/$tag.time" \
      "$BIN" sweep --gpus "$g" --tpot-slo 50 --ttft-slo 2000 --num-prompts "${PROMPTS:-1024}" \
      "${threads[@]}" "${shard[@]}" ${EXTRA:-} --out "$OUT/$tag.csv" --json > "$OUT/$tag.json" 2> "$OUT/$tag.log"
    read -r wall rss_kib < "$OUT/$tag.time"
    python3 - "$OUT/$tag.csv" "$wall" "$rss_kib" "$g" <<'PY'
import csv, sys
path, wall, rss, gpus = sys.argv[1], float(sys.argv[2]), int(sys.argv[3]), sys.argv[4]
rows = list(csv.DictReader(open(path)))
probes = sum(int(r["capacity_probes"] or 0) for r in rows)
print(f"{gpus} GPUs: {len(rows)} candidates, {probes} probes in {wall:.1f} s: "
      f"{len(rows)/wall:.1f} candidates/s, {probes/wall:.1f} probes/s (reused rows count their source's probes); "
      f"peak RSS {rss/1024:.0f} MiB")
PY
  done
done
