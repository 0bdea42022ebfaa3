#!/usr/bin/env bash
# Measures the conformance suite's nightly run: `afd-conformance run` with its default budgets (5-minute
# time budget, 32 stateful sequences, 64-request load) against a fresh, correct twin pair of the seed
# recipe, once per seed. Prints pass/fail, wall time and counts per seed; a false failure or a run over
# five minutes is what the issue 7 acceptance rules out. A measurement, not a test.
#
# Usage: benches/conformance_seeds.sh [SEEDS...]     (default: 1 2 3 4 5 6 7 8 9 10)
#   OUT_DIR (default target/conformance-seeds) keeps each run's recipe, logs, report.json and junit.xml.
# Loopback only (127.0.0.1); every pair is stopped before the next starts.
set -euo pipefail
cd "$(dirname "$0")/.."

SEEDS=("$@")
if [ ${#SEEDS[@]} -eq 0 ]; then SEEDS=(1 2 3 4 5 6 7 8 9 10); fi
OUT=${OUT_DIR:-target/conformance-seeds}
mkdir -p "$OUT"

cargo build --release -q -p afd-conformance -p afd-twin --bins
BIN=target/release
source benches/conformance_pair.sh

printf '| seed | exit | wall s | pass / fail / indeterminate / skipped |\n| --- | --- | --- | --- |\n'
failed=0
for seed in "${SEEDS[@]}"; do
  dir="$OUT/seed-$seed"
  rm -rf "$dir" && mkdir -p "$dir"
  write_recipe sim/tests/fixtures/recipes/2a2f_graph_dbo_dp1tp2.sh "$dir/recipe.sh"
  start_pair "$dir" "$dir/recipe.sh"
  run_suite "$dir" "$seed"
  stop_pair
  counts=$(python3 -c 'import json,sys; c=json.load(open(sys.argv[1]))["counts"]; print("{pass} / {fail} / {indeterminate} / {skipped}".format(**c))' "$dir/report.json")
  printf '| %s | %s | %.1f | %s |\n' "$seed" "$CODE" "$WALL_S" "$counts"
  [ "$CODE" -eq 0 ] || { failed=$((failed + 1)); grep -A3 '^--- ' "$dir/summary.txt" || true; }
done
echo "runs with a failure: $failed of ${#SEEDS[@]} (reports under $OUT)"
[ "$failed" -eq 0 ]
