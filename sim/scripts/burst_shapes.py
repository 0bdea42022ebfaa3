#!/usr/bin/env python3
"""What an eager step that prefills many tokens costs, by how many prompts share them and by the
decodes beside it and by whether it continues a chunked prompt, from stamped `afd-probe vllm` runs
(`cal40`, `cal41`, `cal42`; probe f27393d on).

Every step that prefilled at least `--min-tokens` prompt tokens (default 4,000) is one row: its
workload, the prompts and tokens it prefilled, the decodes beside it, what a one-prompt step of an
injection record prefilled (`whole`: an injected prompt; `first`: the chunk the budget cut from one;
`continued`: the rest of it, with that chunk as computed context, `cal42`), its period (the stamp of the
step before it less the stamp of the one before that, `stamped_steps.prefill_periods`), the record's
own decode level (the median period of its steps that only decoded, none after an idle spell) and
the step's period less that level: what the prefill added to the standing step on that server at
that moment. A period past 300 ms (a first-use compile) or before any decode level is left out, as
the shared helper leaves it.

Per GPU, decodes beside (8 or fewer, 9 or more), prompts in the step (1, 2-8, 9-32, 33 or more) and chunk it
then prints the median of what the prefill added over the rows. With --profile FILE (an engine
profile, `afd-sim engine-profile`'s output) each row measured on the profile's GPU is set beside the
two prices `sim/src/model/engine.rs` can give an eager step that prefills: the host's (the decode
table at its decodes and prompts, plus the prefill extra at its tokens), the price of one whole
prompt, and the larger of that and the per-token floor (`nonuniform_token_ns` times its tokens), the
price of several prompts or of a chunk that continues a prompt; each group's median signed error of
both. It fits nothing and changes nothing: it reads calibration runs, and a derivation rule is
chosen by `calibration_loso.py`, never here.

usage: burst_shapes.py [--min-tokens N] [--profile FILE] [--json] RUN.json[.xz]...
Exit 2 on a missing or malformed file, an unstamped run, or when no step qualifies.
"""
import collections, json, statistics, sys

from injected_steps import budget_of, interpolate
from stamped_steps import fail, machine, prefill_periods, read_json, read_run, step_periods, take_option, usage


BANDS = ("1", "2-8", "9-32", "33 or more")


def band(prompts):
    """The index in BANDS of a step's prompt count."""
    return 0 if prompts == 1 else 1 if prompts <= 8 else 2 if prompts <= 32 else 3


def decode_level(steps):
    """Median period (ms) of the record's steps that only decoded, by the shared convention."""
    periods = [(t1 - t0) * 1e3 for _, t0, t1 in
               step_periods(steps, lambda s: not s["ctx_requests"] and s["gen_requests"])]
    return statistics.median(periods) if periods else None


def short_gpu(name):
    """H100 or H200, from a GPU's name as a run's provenance or a profile gives it."""
    return "H100" if "H100" in name else "H200"


def chunk_kind(step, workload, budget):
    """What a one-prompt step of an injection record prefilled: `whole` (an injected prompt's length),
    `first` (a chunk that filled the budget beside the decodes) or `continued` (the rest of a prompt the
    step before cut, with that chunk as computed context); `-` for any other step."""
    lengths = {i["input_len"] for i in workload.get("inject") or []}
    if step["ctx_requests"] != 1 or not lengths:
        return "-"
    if step["ctx_tokens"] in lengths:
        return "whole"
    if budget and step["ctx_tokens"] + step["gen_requests"] == budget:
        return "first"
    return "continued"


def rows(path, run, min_tokens):
    """One dict per qualifying step of the run's fixed-shape records."""
    out = []
    budget = budget_of(run)
    for r in run.get("records", []):
        w = r.get("workload", {})
        steps = r.get("steps") or []
        if r.get("failure") or w.get("kind") != "fixed-shape" or not steps:
            continue
        if any("logged_s" not in s for s in steps):
            fail(f"{path}: workload {w.get('name')}: its steps carry no `logged_s` stamps "
                 "(a probe before f27393d)")
        level = decode_level(steps)
        for k, t0, t1 in prefill_periods(steps):
            s = steps[k]
            if s["ctx_tokens"] < min_tokens or level is None:
                continue
            period = (t1 - t0) * 1e3
            out.append({"file": path, "gpu": short_gpu(machine(run)), "workload": w["name"],
                        "prompts": s["ctx_requests"], "tokens": s["ctx_tokens"],
                        "decodes": s["gen_requests"], "chunk": chunk_kind(s, w, budget),
                        "period_ms": round(period, 1),
                        "decode_level_ms": round(level, 1), "added_ms": round(period - level, 1)})
    return out


def eager_prices(profile, row):
    """(host, the larger of host and floor) in ms for `row` by the profile's eager mode, None when the
    profile has none or was measured on another GPU."""
    if short_gpu(profile.get("gpu", "")) != row["gpu"]:
        return None
    eager = next((m for m in profile.get("modes", []) if m.get("mode") == "eager"), None)
    if not eager or not eager.get("prefill_extra_ns"):
        return None
    host = (interpolate(eager["decode_period_ns"], row["decodes"] + row["prompts"])
            + interpolate(eager["prefill_extra_ns"], row["tokens"])) / 1e6
    floor = eager["nonuniform_token_ns"] * (row["tokens"] + row["decodes"]) / 1e6
    return round(host, 1), round(max(host, floor), 1)


def main():
    args = sys.argv[1:]
    profile_path = take_option(args, "--profile", str, "an engine profile file")
    profile = read_json(profile_path) if profile_path else None
    if profile is not None and not isinstance(profile, dict):
        fail(f"{profile_path}: not an engine profile (a JSON object)")
    min_tokens = take_option(args, "--min-tokens", int, "a whole number of tokens")
    min_tokens = 4000 if min_tokens is None else min_tokens
    as_json = "--json" in args
    args = [a for a in args if a != "--json"]
    if not args or any(a.startswith("-") for a in args):
        usage(__doc__)
    found = [row for path in args for row in rows(path, read_run(path), min_tokens)]
    if not found:
        fail(f"no stamped step prefilled {min_tokens} tokens or more in {', '.join(args)}")
    for row in found:
        prices = eager_prices(profile, row) if profile else None
        if prices:
            row["host_price_ms"], row["floored_price_ms"] = prices
    cells = collections.defaultdict(list)
    for row in found:
        cells[(row["gpu"], row["decodes"] > 8, band(row["prompts"]), row["chunk"])].append(row)
    summary = []
    for (gpu, many, prompts, chunk), rs in sorted(cells.items()):
        cell = {"gpu": gpu, "decodes_beside": "9 or more" if many else "8 or fewer",
                "prompts": BANDS[prompts], "chunk": chunk, "steps": len(rs),
                "median_added_ms": round(statistics.median(r["added_ms"] for r in rs), 1)}
        for key in ("host_price_ms", "floored_price_ms"):
            errors = [r[key] / r["period_ms"] - 1 for r in rs if key in r]
            if errors:
                cell[key[:-9] + "_median_error"] = round(statistics.median(errors), 3)
        summary.append(cell)
    if as_json:
        print(json.dumps({"steps": found, "by_shape": summary}, indent=1))
        return
    print(f"{'workload':<26} {'gpu':<5} {'prompts':>7} {'tokens':>6} {'decodes':>7} {'chunk':>9} "
          f"{'period':>7} {'level':>6} {'added':>6}" + (f" {'host':>6} {'floored':>7}" if profile else ""))
    for row in found:
        priced = (f" {row['host_price_ms']:>6.1f} {row['floored_price_ms']:>7.1f}"
                  if "host_price_ms" in row else "")
        print(f"{row['workload']:<26} {row['gpu']:<5} {row['prompts']:>7} {row['tokens']:>6} "
              f"{row['decodes']:>7} {row['chunk']:>9} {row['period_ms']:>7.1f} {row['decode_level_ms']:>6.1f} "
              f"{row['added_ms']:>6.1f}{priced}")
    print("\nwhat the prefill added (ms), median by GPU, decodes beside and prompts in the step"
          + (" (and the median signed error of each price)" if profile else "") + ":")
    for c in summary:
        prices = "".join(f", {k[:-13]} {100 * c[k]:+.1f} %" for k in ("host_median_error", "floored_median_error")
                         if k in c)
        chunk = "" if c["chunk"] == "-" else f" ({c['chunk']})"
        print(f"  {c['gpu']:<5} {c['decodes_beside']:>10} decodes, {c['prompts']:>10} prompts{chunk:<12}: "
              f"{c['median_added_ms']:>6.1f} ({c['steps']} steps{prices})")


if __name__ == "__main__":
    main()
