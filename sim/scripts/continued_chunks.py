#!/usr/bin/env python3
"""Splits the stamped prefill steps of FULL_DECODE_ONLY bursts by whether the step continues a prompt
that the step before it cut (chunked prefill), to show what the non-uniform table mixes.

usage: continued_chunks.py RUN.json.xz...
  RUN.json.xz  `afd-probe vllm` run files whose server log lines were stamped (probe f27393d on);
               files of other graph modes, and records that are not plain fixed-shape bursts of one
               prompt length (injected requests, prefix-cache hits, a lone prompt), are skipped

A burst's prompts are scheduled first come, first served, so the prefill tokens computed before a step
say where its first prompt stands: the step continues a chunk when they are not a whole number of
prompts. Periods as `stamped_steps.prefill_periods` reads them. Prints, per server and per band of
scheduled tokens (a step's prefill and decode tokens), the median period of steps that start a prompt
fresh and of steps that continue one, with their counts and decodes, and the same pooled over servers
(each server's median once). Exit 2 on a missing or unreadable file.
"""
import collections
import statistics
import sys

from stamped_steps import prefill_periods, read_run, usage

BANDS = ((0, 512), (512, 1536), (1536, 3072), (3072, 6144), (6144, 16384))


def full_decode_only(run):
    return any("FULL_DECODE_ONLY" in w for w in run.get("serve_args", []))


def burst_steps(record):
    """(tokens, decodes, continued, period_s) of every stamped prefill step of a plain burst."""
    w = record["workload"]
    steps = record.get("steps") or []
    if (w.get("kind") != "fixed-shape" or w.get("inject") or w["num_prompts"] < 2
            or not steps or any(s.get("logged_s") is None for s in steps)):
        return []
    length = w["input_len"]
    computed = sum(s["ctx_tokens"] for s in steps)
    if computed * 10 < w["num_prompts"] * length * 9:
        return []
    before, out = [], 0
    for s in steps:
        before.append(out)
        out += s["ctx_tokens"]
    rows = []
    for k, t0, t1 in prefill_periods(steps):
        s = steps[k]
        continued = before[k] % length != 0
        rows.append((s["ctx_tokens"] + s["gen_tokens"], s["gen_requests"], continued, t1 - t0))
    return rows


def band_of(tokens):
    return next((b for b in BANDS if b[0] < tokens <= b[1]), None)


def main():
    if len(sys.argv) < 2:
        usage(__doc__)
    by_server = collections.defaultdict(lambda: collections.defaultdict(list))
    for path in sys.argv[1:]:
        run = read_run(path)
        if not full_decode_only(run):
            continue
        name = path.rsplit("/", 1)[-1].replace(".json.xz", "")
        for record in run.get("records", []):
            for tokens, decodes, continued, period in burst_steps(record):
                band = band_of(tokens)
                if band:
                    by_server[name][(band, continued)].append((period, decodes))
    if not by_server:
        print("no stamped FULL_DECODE_ONLY bursts")
        return
    print(f"{'server':38} {'tokens':>11} {'fresh ms (n, decodes)':>24} {'continued ms (n, decodes)':>27} ratio")
    pooled = collections.defaultdict(list)
    for name in sorted(by_server):
        cells = by_server[name]
        for band in BANDS:
            fresh, cont = cells.get((band, False), []), cells.get((band, True), [])
            if not fresh and not cont:
                continue

            def cell(rows):
                if not rows:
                    return "-", None
                p = statistics.median(r[0] for r in rows) * 1e3
                d = statistics.median(r[1] for r in rows)
                return f"{p:6.1f} ({len(rows):3d}, {d:5.1f})", p

            ftxt, fp = cell(fresh)
            ctxt, cp = cell(cont)
            ratio = f"{cp / fp:5.2f}" if fp and cp else "  -"
            print(f"{name:38} {band[0]:>5}-{band[1]:<5} {ftxt:>24} {ctxt:>27} {ratio}")
            if fp and cp:
                pooled[band].append(cp / fp)
    print()
    for band in BANDS:
        if pooled[band]:
            print(f"tokens {band[0]}-{band[1]}: continued / fresh over {len(pooled[band])} servers, "
                  f"median {statistics.median(pooled[band]):.2f} "
                  f"(range {min(pooled[band]):.2f}-{max(pooled[band]):.2f})")


if __name__ == "__main__":
    main()
