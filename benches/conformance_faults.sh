#!/usr/bin/env bash
# The fault → invariant table of docs/conformance.md: for every fault switch of afd-twin, start a pair with
# that fault, run the whole conformance suite, and list every invariant that failed (the crate's tests
# check the one each fault must fail; this shows everything else that caught it too).
#
# Usage: benches/conformance_faults.sh [SEED]   (default seed 7; results in target/conformance-faults/)
# Loopback only (127.0.0.1); every pair is stopped before the next starts.
set -euo pipefail
cd "$(dirname "$0")/.."

SEED=${1:-7}
OUT=${OUT_DIR:-target/conformance-faults}
RECIPES=sim/tests/fixtures/recipes
mkdir -p "$OUT"

cargo build --release -q -p afd-conformance -p afd-twin --bins
BIN=target/release
source benches/conformance_pair.sh

# fault | recipe | own FFN port (1) | `up --fault` values | extra `run` flags
CASES=(
  "misroute-to-wrong-engine|2a2f_graph_dbo_dp2tp1.sh||attention:misroute-to-wrong-engine|"
  "drop-response|2a2f_graph_dbo_dp1tp2.sh||attention:drop-response|"
  "duplicate-response|2a2f_graph_dbo_dp1tp2.sh||attention:duplicate-response|"
  "wrong-usage|2a2f_graph_dbo_dp1tp2.sh||attention:wrong-usage|"
  "stream-without-done|2a2f_graph_dbo_dp1tp2.sh||attention:stream-without-done|"
  "ffn-accepts-requests (shared port)|2a2f_graph_dbo_dp1tp2.sh||ffn:ffn-accepts-requests|"
  "ffn-accepts-requests (own port)|2a2f_graph_dbo_dp1tp2.sh|1|ffn:ffn-accepts-requests|"
  "ffn-hangs-requests (shared port)|2a2f_graph_dbo_dp1tp2.sh||ffn:ffn-hangs-requests|--request-timeout 1s"
  "ffn-hangs-requests (own port)|2a2f_graph_dbo_dp1tp2.sh|1|ffn:ffn-hangs-requests|"
  "wrong-engine-labels|2a2f_graph_dbo_dp1tp2.sh||attention:wrong-engine-labels|"
  "metrics-not-conserved|2a2f_graph_dbo_dp1tp2.sh||attention:metrics-not-conserved|"
  "ignore-pinning|2a2f_graph_dbo_dp2tp1.sh||attention:ignore-pinning|"
  "wrong-rank-mapping-log|2a2f_graph_dbo_dp1tp2.sh||wrong-rank-mapping-log|"
  "rendezvous-mismatch-accepted|broken/cross.rank-counts-match.sh||rendezvous-mismatch-accepted|"
  "hang-after-n-requests|2a2f_graph_dbo_dp1tp2.sh||attention:hang-after-n-requests|"
  "health-lies|2a2f_graph_dbo_dp1tp2.sh||attention:health-lies|"
  "slow-ffn-step=30|2a2f_graph_dbo_dp1tp2.sh||ffn:slow-ffn-step=30|--max-itl-ms 15"
)

printf '| fault | exit | wall s | invariants failed |\n| --- | --- | --- | --- |\n'
for case in "${CASES[@]}"; do
  IFS='|' read -r name recipe own_port faults extra <<<"$case"
  dir="$OUT/$(echo "$name" | tr -c 'a-z0-9=-' '_')"
  rm -rf "$dir" && mkdir -p "$dir"
  write_recipe "$RECIPES/$recipe" "$dir/recipe.sh" $own_port
  fault_flags=()
  for f in $faults; do fault_flags+=(--fault "$f"); done
  start_pair "$dir" "$dir/recipe.sh" "${fault_flags[@]}"
  # shellcheck disable=SC2086
  run_suite "$dir" "$SEED" --request-timeout 3s --ffn-deadline 1s --settle-timeout 3s --drain-timeout 3s $extra
  stop_pair
  failed=$(python3 -c 'import json,sys; print(", ".join("`%s`" % i for i in json.load(open(sys.argv[1]))["failed"]))' "$dir/report.json")
  printf '| `%s` | %s | %.1f | %s |\n' "$name" "$CODE" "$WALL_S" "$failed"
done
