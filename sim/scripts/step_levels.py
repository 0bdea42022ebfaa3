#!/usr/bin/env python3
"""Each FULL_DECODE_ONLY server's level against an engine profile's non-uniform table, beside the
host speed its provenance read before it started: do servers on slow hosts step slower?

Steps without graphs are host-bound, and the table is a median over servers (docs/fidelity.md,
"Every server counts once"), so each server's steps sit at a level of their own. For every stamped
run file (probe f27393d on) of a `FULL_DECODE_ONLY` server whose provenance holds the host-speed
readings (`notes.torch_launch_us`, `notes.python_loop_ns`, gpu-probes/scripts/host-speed.py), the
level is the median, over its fixed-shape workloads' steps that prefilled (at least 64 tokens; the
period from the stamps as `stamped_steps.prefill_periods` reads it), of the step's period over the
table at the step's tokens (interpolated as `sim/src/model/engine.rs` does). Servers with fewer than
ten such steps are left out.

Prints one line per server (launch µs, loop ns, level, steps, name) and the correlation of the level
with each reading.

With `--bench`, instead: does `vllm bench serve`'s client slow a step without graphs, as it slows an
eager decode step (docs/fidelity.md)? For every stamped FULL_DECODE_ONLY server with calibration
bench runs, the level of its prefill steps beside at least one decode in those runs beside the level
of the same kind of step in its fixed shapes (the probe's own client), at least five steps of each,
and their ratio (and each calibration bench run's own, indented); the median ratio over servers. No
host reading is needed.

usage: step_levels.py [--bench] PROFILE RUN.json.xz...
  PROFILE   an engine profile (`afd-sim engine-profile`'s output, e.g.
            traces/data/engine/h200-dsv2l-vllm-engine.json)
Exit 2 on a missing or malformed file, or when fewer than three servers qualify.
"""
import json, statistics, sys

from injected_steps import graph_mode, interpolate
from stamped_steps import correlation, fail, prefill_periods, read_json, read_run, usage

MIN_STEPS = 10


def level(run, table, kind="fixed-shape", beside_decodes=False, name=None):
    """(median period / table, steps counted) over the run's stamped prefill steps of one kind of
    record (`fixed-shape`, or `bench-serve` for its calibration bench runs; `name`: that workload
    only); with `beside_decodes` only the steps that decoded too."""
    ratios = []
    for r in run.get("records", []):
        steps = r.get("steps") or []
        workload = r.get("workload", {})
        if r.get("failure") or workload.get("kind") != kind:
            continue
        if name is not None and workload.get("name") != name:
            continue
        if kind == "bench-serve" and not workload.get("calibration"):
            continue
        if not steps or any("logged_s" not in s for s in steps):
            continue
        for k, t0, t1 in prefill_periods(steps):
            if beside_decodes and steps[k]["gen_requests"] < 1:
                continue
            tokens = steps[k]["ctx_tokens"] + steps[k]["gen_tokens"]
            if tokens >= 64:
                ratios.append((t1 - t0) * 1e3 / interpolate(table, tokens))
    return (statistics.median(ratios) if ratios else None), len(ratios)


def bench_against_fixed(paths, table):
    """The `--bench` report: each server's bench-run level over its fixed-shape level."""
    rows = []
    for path in paths:
        run = read_run(path)
        if "--enforce-eager" in (run.get("serve_args") or []) or graph_mode(run) != "full-decode-only":
            continue
        fixed, n_fixed = level(run, table, "fixed-shape", beside_decodes=True)
        bench, n_bench = level(run, table, "bench-serve", beside_decodes=True)
        if n_fixed >= 5 and n_bench >= 5:
            each = []
            for r in run.get("records", []):
                w = r.get("workload", {})
                if w.get("kind") == "bench-serve" and w.get("calibration"):
                    value, n = level(run, table, "bench-serve", beside_decodes=True, name=w.get("name"))
                    if n >= 5:
                        each.append((w.get("name"), value / fixed, n))
            rows.append((bench / fixed, fixed, n_fixed, bench, n_bench, run.get("label", path), each))
    if len(rows) < 3:
        fail(f"{len(rows)} FULL_DECODE_ONLY servers with five or more stamped prefill steps beside "
             "decodes in both their fixed shapes and their calibration bench runs: a median needs three")
    for ratio, fixed, n_fixed, bench, n_bench, label, each in sorted(rows, key=lambda r: r[5]):
        print("fixed shapes %5.3f (%3d steps)  bench runs %5.3f (%3d steps)  ratio %5.3f  %s"
              % (fixed, n_fixed, bench, n_bench, ratio, label))
        for name, workload_ratio, n in each:
            print("    %-28s ratio %5.3f (%3d steps)" % (name, workload_ratio, n))
    ratios = [r[0] for r in rows]
    print("bench over fixed: median %.3f, from %.3f to %.3f (%d servers)"
          % (statistics.median(ratios), min(ratios), max(ratios), len(rows)))


def main():
    args = sys.argv[1:]
    bench = "--bench" in args
    args = [a for a in args if a != "--bench"]
    if len(args) < 2 or any(a.startswith("-") for a in args):
        usage(__doc__)
    profile = read_json(args[0])
    try:
        costs = next(m for m in profile["modes"] if m["mode"] == "full-decode-only")
        table = [(t, ns / 1e6) for t, ns in costs["nonuniform_period_ns"]]
    except (KeyError, TypeError, StopIteration):
        fail(f"{args[0]}: no full-decode-only mode with a non-uniform table")
    if not table:
        fail(f"{args[0]}: the full-decode-only non-uniform table is empty")
    if bench:
        bench_against_fixed(args[1:], table)
        return
    rows = []
    for path in args[1:]:
        run = read_run(path)
        notes = run.get("provenance", {}).get("notes") or {}
        if "torch_launch_us" not in notes or "--enforce-eager" in (run.get("serve_args") or []):
            continue
        if graph_mode(run) != "full-decode-only":
            continue
        try:
            launch, loop = float(notes["torch_launch_us"]), float(notes.get("python_loop_ns", "nan"))
        except ValueError:
            fail(f"{path}: provenance notes hold a host-speed reading that is not a number")
        value, steps = level(run, table)
        if value is not None and steps >= MIN_STEPS:
            rows.append((launch, loop, value, steps, run.get("label", path)))
    if len(rows) < 3:
        fail(f"{len(rows)} FULL_DECODE_ONLY servers with host readings and {MIN_STEPS}+ stamped "
             "prefill steps: a correlation needs three")
    for row in sorted(rows):
        print("%6.2f µs %6.1f ns  level %5.3f  %4d steps  %s" % row)
    print("correlation of the level with the launch reading %.2f, with the loop reading %.2f "
          "(%d servers)" % (correlation([r[0] for r in rows], [r[2] for r in rows]),
                            correlation([r[1] for r in rows], [r[2] for r in rows]), len(rows)))


if __name__ == "__main__":
    main()
