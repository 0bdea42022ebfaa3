#!/usr/bin/env python3
"""Each server's uniform decode bursts against an engine profile's decode table: the level its loan
stepped at, beside the host readings taken before it started and how far its judged runs' mean TPOT
lay from the prediction.

Eager and graph-less steps are host-bound and the profile's decode table is a median over servers
(docs/fidelity.md, "Every server counts once"), so each server's decodes run at a level of its own.
A server's level is the median, over its fixed-shape bursts `fx-dN-c128*` (N prompts of 128 tokens,
streamed), of the burst's median gap between streamed tokens over the profile's decode table at N
requests in the server's mode (interpolated as `sim/src/model/engine.rs` does). As the derivation's
decode table, a burst is left out whose prefill takes more than a quarter as many steps as its
answer has tokens (at the server's `--max-num-batched-tokens`, 8,192 where absent: then its gaps are
chunked-prefill steps'), and so are a burst with fewer than five gaps and one past the mode's table
(a graph mode's table stops where the probe's stream set the pace).

usage: decode_levels.py PROFILE REPORT RUN.json.xz...
  PROFILE   an engine profile (`afd-sim engine-profile`'s output, e.g.
            traces/data/engine/h100-dsv2l-vllm-engine.json)
  REPORT    `afd-sim replay-vllm DIR --json`'s output over the same runs ('-' for none)
  RUN       `afd-probe vllm` run files; those of a mode the profile does not price are skipped
Prints one line per server: its mode, `torch_launch_us`, `python_loop_ns`, the level (and the bursts
behind it) and the median real / predicted mean TPOT of its judged runs in REPORT. Exit 2 on a
missing or malformed file.
"""
import re
import statistics
import sys

from injected_steps import budget_of, graph_mode, interpolate
from stamped_steps import fail, read_json, read_run, usage

BURST = re.compile(r"fx-d(\d+)-c128")
MIN_GAPS = 5
DEFAULT_BUDGET = 8192


def few_prefill_steps(run, workload):
    """Whether a burst's prefill takes at most a quarter as many steps as its answer has tokens
    (`few_prefill_steps` in sim/src/model/engine.rs)."""
    tokens = workload.get("num_prompts", 0) * workload.get("input_len", 0)
    steps = -(-tokens // (budget_of(run) or DEFAULT_BUDGET))
    return steps * 4 <= workload.get("output_len", 0)


def burst_gap_s(record):
    """The median gap between a streamed burst's consecutive tokens, over its requests."""
    gaps = []
    for request in (record.get("fixed") or {}).get("requests", []):
        chunks = request.get("chunk_s") or []
        gaps += [b - a for a, b in zip(chunks, chunks[1:])]
    return statistics.median(gaps) if len(gaps) >= MIN_GAPS else None


def tpot_ratios(report):
    """Real over predicted mean TPOT of each judged record, by run name."""
    out = {}
    for record in report.get("records", []):
        for metric in record.get("metrics", []):
            if metric.get("metric", metric.get("name")) == "mean_tpot_ms" and metric.get("predicted"):
                out.setdefault(record["run"], []).append(metric["real"] / metric["predicted"])
    return out


def main(args):
    if len(args) < 3:
        usage(__doc__)
    profile = read_json(args[0])
    try:
        tables = {m["mode"]: m["decode_period_ns"] for m in profile["modes"]}
    except (KeyError, TypeError):
        fail(f"{args[0]}: not an engine profile (no modes with decode_period_ns)")
    ratios = tpot_ratios(read_json(args[1])) if args[1] != "-" else {}
    print(f"{'server':44} {'mode':17} {'launch us':>9} {'loop ns':>8} {'level':>6} bursts  TPOT real/pred")
    for path in args[2:]:
        run = read_run(path)
        mode = graph_mode(run)
        table = tables.get(mode)
        if not table:
            continue
        levels = []
        for record in run.get("records", []):
            found = BURST.match(record.get("workload", {}).get("name", ""))
            if not found or record.get("failure") or not few_prefill_steps(run, record["workload"]):
                continue
            batch = int(found.group(1))
            gap = burst_gap_s(record)
            if gap is None or batch > table[-1][0]:
                continue
            levels.append(gap * 1e9 / interpolate(table, batch))
        name = path.rsplit("/", 1)[-1].removesuffix(".json.xz")
        notes = run.get("provenance", {}).get("notes", {})
        level = f"{statistics.median(levels):6.3f} {len(levels):6d}" if levels else f"{'-':>6} {0:6d}"
        tpot = f"{statistics.median(ratios[name]):.3f}" if name in ratios else "-"
        print(f"{name:44} {mode:17} {notes.get('torch_launch_us', '-'):>9} "
              f"{notes.get('python_loop_ns', '-'):>8} {level}  {tpot}")


if __name__ == "__main__":
    main(sys.argv[1:])
