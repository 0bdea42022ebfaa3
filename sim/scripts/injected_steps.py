#!/usr/bin/env python3
"""The stamped period of each step that prefilled a prompt injected into a standing decode burst, by
the prompt's tokens and the decodes beside it, from a stamped `afd-probe vllm` run (probe f27393d
on): does what a decode adds to a step without graphs grow, stop, or vanish?

A workload with `inject` (make-engine-plans.py `inject_burst`) starts `num_prompts` standing
requests and then sends the injected prompts. Its steps that prefilled one request beside exactly
the standing batch's decodes are counted: a step that prefilled a whole injected prompt, in the row
of that prompt's length, and a step that the budget filled with a chunk beside the decodes
(`--max-num-batched-tokens` tokens in all, as at 64/64), in the row of chunked steps. The standing
prompts' own prefill steps, and a chunk's short tail, are not. A step's period is the stamp of the
step before it less the stamp of the one before that (`stamped_steps.prefill_periods`: vLLM logs a
step once the next one is issued; steps after an idle spell are left out).

Per row it prints the median period (and the count) beside each standing batch, and the
least-squares slope through those medians (milliseconds a decode). At hundreds of decodes the stamps
can misplace a step (cal22's 1,808-token chunks beside 240 decodes read 22 ms): read such cells with
the run's other evidence. With --profile FILE (an
engine profile, `afd-sim engine-profile`'s output; the one a blind prediction was made from, e.g.
`git show REV:traces/data/engine/h200-dsv2l-vllm-engine.json`) each cell is set beside what the
profile prices that step at, as `sim/src/model/engine.rs` does for a step of the run's graph mode
that schedules a prefill: its non-uniform table at the step's tokens (prefill and decodes) plus the
decode term times the decodes, and the error.

usage: injected_steps.py RUN.json[.xz] [--profile FILE] [--json]
Exit 2 on a missing or malformed file, or a run with no injected step.
"""
import collections, json, statistics, sys

from stamped_steps import fail, prefill_periods, read_json, read_run, take_option, usage

MODES = {"FULL_DECODE_ONLY": "full-decode-only", "FULL_AND_PIECEWISE": "full-and-piecewise"}


def graph_mode(run):
    """The profile mode a run's server used: `--enforce-eager`, else its compilation config's
    cudagraph_mode (vLLM's default FULL_AND_PIECEWISE)."""
    args = run.get("serve_args") or []
    if "--enforce-eager" in args:
        return "eager"
    mode = "FULL_AND_PIECEWISE"
    for i, arg in enumerate(args[:-1]):
        if arg in ("--compilation-config", "-cc"):
            try:
                mode = json.loads(args[i + 1]).get("cudagraph_mode", mode)
            except (ValueError, AttributeError):
                fail(f"--compilation-config {args[i + 1]!r} in serve_args is not a JSON object")
    if mode not in MODES:
        fail(f"cudagraph_mode {mode} has no non-uniform table in an engine profile")
    return MODES[mode]


def interpolate(points, x):
    """`sim/src/model/engine.rs` `interpolate`: linear between points, flat below the first,
    extended along the last two past the end."""
    if len(points) == 1 or x <= points[0][0]:
        return points[0][1]
    i = next((k for k, p in enumerate(points) if p[0] >= x), len(points) - 1)
    i = max(i, 1)
    (xa, ya), (xb, yb) = points[i - 1], points[i]
    return max(ya + (yb - ya) * (x - xa) / (xb - xa), 0.0)


def budget_of(run):
    """The server's --max-num-batched-tokens, None when its serve args do not set it."""
    args = run.get("serve_args") or []
    for i, arg in enumerate(args[:-1]):
        if arg == "--max-num-batched-tokens":
            try:
                return int(args[i + 1])
            except ValueError:
                fail(f"--max-num-batched-tokens {args[i + 1]!r} in serve_args is not a number")
    return None


def injected_periods(run):
    """{(row, decodes beside): [period ms]} over the run's injection workloads, a row
    ("prompt", its tokens) for steps that prefilled a whole prompt and ("chunk", the budget) for
    steps the budget filled."""
    budget = budget_of(run)
    cells = collections.defaultdict(list)
    for r in run.get("records", []):
        w = r.get("workload", {})
        inject = w.get("inject") or []
        if not inject or r.get("failure") or not r.get("steps"):
            continue
        lengths = {i["input_len"] for i in inject}
        batch = w["num_prompts"]
        steps = r["steps"]
        if any("logged_s" not in s for s in steps):
            fail(f"workload {w.get('name')}: its steps carry no `logged_s` stamps (a run of a probe "
                 "before f27393d, whose server log lines were not stamped)")
        for k, t0, t1 in prefill_periods(steps):
            s = steps[k]
            if s["ctx_requests"] != 1 or s["gen_requests"] != batch:
                continue
            if s["ctx_tokens"] in lengths:
                cells[(("prompt", s["ctx_tokens"]), batch)].append((t1 - t0) * 1e3)
            elif budget and s["ctx_tokens"] + s["gen_tokens"] == budget:
                cells[(("chunk", budget), batch)].append((t1 - t0) * 1e3)
    return cells


def slope(points):
    """Least-squares slope of (x, y) points, None when every x is the same."""
    mx = statistics.fmean(p[0] for p in points)
    sxx = sum((p[0] - mx) ** 2 for p in points)
    if not sxx:
        return None
    my = statistics.fmean(p[1] for p in points)
    return sum((p[0] - mx) * (p[1] - my) for p in points) / sxx


def main():
    args = sys.argv[1:]
    profile_path = take_option(args, "--profile", str, "an engine profile file")
    as_json = "--json" in args
    args = [a for a in args if a != "--json"]
    if len(args) != 1 or args[0].startswith("-"):
        usage(__doc__)
    run = read_run(args[0])
    cells = injected_periods(run)
    if not cells:
        fail(f"{args[0]}: no step prefilled an injected prompt beside its standing batch")
    priced = None
    if profile_path:
        profile = read_json(profile_path)
        mode = graph_mode(run)
        try:
            costs = next(m for m in profile["modes"] if m["mode"] == mode)
            table = [(t, ns / 1e6) for t, ns in costs["nonuniform_period_ns"]]
            per_decode = costs["mixed_decode_ns"] / 1e6
        except (KeyError, TypeError, StopIteration):
            fail(f"{profile_path}: no {mode} mode with a non-uniform table and a decode term")
        if not table:
            fail(f"{profile_path}: the {mode} mode's non-uniform table is empty")
        priced = lambda tokens, b: interpolate(table, tokens) + per_decode * b
    rows = sorted({k[0] for k in cells}, key=lambda r: (r[0] == "chunk", -r[1]))
    batches = sorted({k[1] for k in cells})
    out = {"run": run.get("label"), "rows": []}
    for kind, tokens in rows:
        row = {"kind": kind, "tokens": tokens, "cells": []}
        for b in batches:
            values = cells.get(((kind, tokens), b))
            if not values:
                continue
            cell = {"decodes": b, "steps": len(values), "median_ms": statistics.median(values)}
            if priced:
                # A whole prompt's step schedules it and the decodes; a chunked one, the budget.
                cell["priced_ms"] = priced(tokens + b if kind == "prompt" else tokens, b)
                cell["error"] = cell["priced_ms"] / cell["median_ms"] - 1
            row["cells"].append(cell)
        # Through the cells' medians: a few steps that met a stall (up to 300 ms) would tilt a line
        # through every step.
        row["slope_ms_per_decode"] = slope([(c["decodes"], c["median_ms"]) for c in row["cells"]])
        out["rows"].append(row)
    if as_json:
        print(json.dumps(out, indent=1))
        return
    print(f"{out['run']}: steps that prefilled one injected prompt beside its standing decodes")
    for row in out["rows"]:
        print(f"{row['tokens']}-token prompt:" if row["kind"] == "prompt"
              else f"steps of a chunk beside the decodes, {row['tokens']} tokens in all (the budget):")
        for c in row["cells"]:
            line = f"  beside {c['decodes']:>3} decodes: {c['median_ms']:7.1f} ms ({c['steps']} steps)"
            if "priced_ms" in c:
                line += f", profile {c['priced_ms']:7.1f} ms ({c['error']:+.1%})"
            print(line)
        s = row["slope_ms_per_decode"]
        print("  slope through the medians: " + ("n/a" if s is None else f"{s:+.3f} ms a decode"))


if __name__ == "__main__":
    main()
