#!/usr/bin/env bash
# Shared by benches/conformance_*.sh (sourced, not run): start and stop a twin pair of a recipe with
# `afd-conformance up`, on free loopback ports. Expects BIN (the directory of the release binaries).

free_port() { python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])'; }

# write_recipe SRC DST [own-ffn-port]: SRC with free HTTP and AFD ports; with a third argument the FFN
# server gets an HTTP port of its own (the seed recipe shares one between both roles).
write_recipe() {
  sed -e "s/--port 18305/--port $(free_port)/" -e "s/\"port\": 6269/\"port\": $(free_port)/" "$1" > "$2"
  if [ -n "${3:-}" ]; then
    python3 - "$2" "$(free_port)" <<'PY'
import re, sys
path, port = sys.argv[1], sys.argv[2]
head, sep, ffn = open(path).read().rpartition("CUDA_VISIBLE_DEVICES=2,3")
open(path, "w").write(head + sep + re.sub(r"--port \d+", f"--port {port}", ffn, count=1))
PY
  fi
}

UP_PID=
# start_pair DIR RECIPE [up flags...]: starts the pair, logs and `up` output in DIR, waits until it serves.
# The twins run at --time-scale 0 (steps back to back), as the figures in docs/conformance.md were taken.
start_pair() {
  local dir=$1 recipe=$2
  shift 2
  "$BIN/afd-conformance" up "$recipe" --twin-bin "$BIN/afd-twin" --log-dir "$dir" --time-scale 0 "$@" > "$dir/up.out" 2>&1 &
  UP_PID=$!
  for _ in $(seq 300); do
    grep -qs "check it with" "$dir/up.out" && return 0
    kill -0 "$UP_PID" 2>/dev/null || { cat "$dir/up.out"; return 2; }
    sleep 0.1
  done
  echo "the pair in $dir did not come up" >&2
  return 2
}

stop_pair() {
  [ -n "$UP_PID" ] && { kill -TERM "$UP_PID" 2>/dev/null; wait "$UP_PID" || true; }
  UP_PID=
}
trap stop_pair EXIT

# run_suite DIR SEED [run flags...]: the suite against DIR's pair; sets CODE and WALL_S.
run_suite() {
  local dir=$1 seed=$2 start end
  shift 2
  start=$(date +%s.%N)
  set +e
  "$BIN/afd-conformance" run --recipe "$dir/recipe.sh" --attention-log "$dir/attn.log" \
    --ffn-log "$dir/ffn.log" --seed "$seed" --json "$dir/report.json" --junit "$dir/junit.xml" "$@" \
    > "$dir/summary.txt" 2>&1
  CODE=$?
  set -e
  end=$(date +%s.%N)
  WALL_S=$(echo "$end - $start" | bc)
}
