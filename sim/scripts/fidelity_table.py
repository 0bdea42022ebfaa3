#!/usr/bin/env python3
"""Renders docs/fidelity.md's real-vLLM tables from `afd-sim replay-vllm --json` outputs.

usage: fidelity_table.py NOW.json [BEFORE.json]
  NOW.json     afd-sim replay-vllm traces/data/vllm/ --json
  BEFORE.json  the same with an earlier profile (--engine OLD.json): its error goes in brackets
Prints the per-run table (output throughput, mean TPOT, mean TTFT) and the graph/eager ratio table.
"""
import json, sys

def load(path):
    with open(path) as f:
        return json.load(f)

def metrics(record):
    return {m["metric"]: m for m in record["metrics"]}

def main():
    if len(sys.argv) not in (2, 3):
        print(__doc__, file=sys.stderr)
        sys.exit(2)
    now = load(sys.argv[1])
    before = load(sys.argv[2]) if len(sys.argv) == 3 else None
    old = {}
    if before:
        old = {(r["server"], r["workload"]): metrics(r) for r in before["records"]}
    print("| server | workload | output tok/s real / pred / err | mean TPOT ms real / pred / err | mean TTFT ms real / pred / err |")
    print("|---|---|---|---|---|")
    for r in now["records"]:
        m = metrics(r)
        cells = []
        for key, digits in (("output_throughput", 0), ("mean_tpot_ms", 2), ("mean_ttft_ms", 0)):
            x = m[key]
            cell = f"{x['real']:.{digits}f} / {x['predicted']:.{digits}f} / {x['error'] * 100:+.1f} %"
            prior = old.get((r["server"], r["workload"]), {}).get(key)
            if prior:
                cell += f" ({prior['error'] * 100:+.1f} %)"
            cells.append(cell)
        server = r["server"].removeprefix("h200-dsv2l-")
        print(f"| {server} | {r['workload']} | " + " | ".join(cells) + " |")
    print()
    print("| graph/eager mean TPOT | real | predicted |")
    print("|---|---:|---:|")
    old_ratio = {}
    if before:
        old_ratio = {(x["server"], x["workload"]): x for x in before["graph_over_eager_tpot"]}
    for x in now["graph_over_eager_tpot"]:
        pred = f"{x['predicted']:.3f}"
        prior = old_ratio.get((x["server"], x["workload"]))
        if prior:
            pred += f" ({prior['predicted']:.3f})"
        # Older outputs name only the graph server.
        servers = x["server"] + (f" / {x['eager_server']}" if "eager_server" in x else "")
        print(f"| {x['workload']} at {x['limits']} ({servers}) | {x['real']:.3f} | {pred} |")

main()
