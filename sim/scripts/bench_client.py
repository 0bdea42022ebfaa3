#!/usr/bin/env python3
"""Does `vllm bench serve`'s own client slow an eager decode step, and from how many streams?

On one eager server a uniform decode batch of B requests is measured two ways in the same round: the
probe's fixed-shape burst `fx-dB-c128-oN-R` (its own lean client; the step is the median gap between a
request's streamed tokens) and the calibration bench run `cal-bench-dB-c128-oN-R` (`vllm bench serve`
sending the B prompts at once; its mean time per output token). The engine profile's eager decode table
reads the probe's bursts at every batch and `vllm bench serve`'s runs where it has them (64 and 256
requests until cal37), and the judged runs use the bench client: the table holds only if the client
costs a small batch nothing. This prints, per run file and round, each batch's two figures and their
ratio (bench over probe), then the median ratio by batch over every pair.

A pair needs both records of one round (the names' suffix `a`, `b`, or none) on one server; a
file with no pair is listed as such. Files of any GPU are read: an eager step is its host's, so a
ratio is a host figure (which card measured each is printed).

usage: bench_client.py RUN.json.xz...
Exit 2 on a missing or malformed file, or when no file holds a pair.
"""
import re
import statistics
import sys

from stamped_steps import fail, machine, read_run, usage

# The round's suffix is absent from the first batch's records (one round, named `-`).
BURST = re.compile(r"^fx-d(\d+)-c128-o\d+(?:-(\w+))?$")
BENCH = re.compile(r"^cal-bench-d(\d+)-c128-o\d+(?:-(\w+))?$")


def median_gap_s(record):
    """The median gap between consecutive streamed tokens over a burst's requests, seconds."""
    gaps = []
    for request in (record.get("fixed") or {}).get("requests") or []:
        chunks = request.get("chunk_s") or []
        gaps += [b - a for a, b in zip(chunks, chunks[1:])]
    return statistics.median(gaps) if gaps else None


def pairs(run):
    """{(batch, round): [probe s, bench s]} over a run's eager decode bursts and bench runs."""
    found = {}
    for record in run.get("records") or []:
        workload = record.get("workload") or {}
        name = workload.get("name", "")
        burst, bench = BURST.match(name), BENCH.match(name)
        if burst and not workload.get("inject") and record.get("fixed"):
            value = median_gap_s(record)
            key, slot = (int(burst.group(1)), burst.group(2) or "-"), 0
        elif bench and (record.get("bench_result") or {}).get("mean_tpot_ms"):
            value = record["bench_result"]["mean_tpot_ms"] / 1e3
            key, slot = (int(bench.group(1)), bench.group(2) or "-"), 1
        else:
            continue
        if value:
            found.setdefault(key, [None, None])[slot] = value
    return {k: v for k, v in found.items() if None not in v}


def main(paths):
    if not paths:
        usage(__doc__)
    by_batch = {}
    for path in paths:
        run = read_run(path)
        if "--enforce-eager" not in (run.get("serve_args") or []):
            fail(f"{path}: not an eager server (its serve words have no --enforce-eager)")
        notes = (run.get("provenance") or {}).get("notes") or {}
        card = machine(run)
        found = pairs(run)
        print(f"{path} ({card}, torch_launch_us {notes.get('torch_launch_us', '?')})")
        if not found:
            print("  no burst and bench run of one batch and round")
        for (batch, rnd), (probe, bench) in sorted(found.items(), key=lambda kv: (kv[0][1], kv[0][0])):
            ratio = bench / probe
            by_batch.setdefault(batch, []).append(ratio)
            print(f"  round {rnd} {batch:4d} requests: probe {probe * 1e3:6.1f} ms  bench {bench * 1e3:6.1f} ms  ratio {ratio:.3f}")
    if not by_batch:
        fail("no file holds a burst and a bench run of one batch and round")
    print("bench over probe by batch (median over pairs):")
    for batch, ratios in sorted(by_batch.items()):
        print(f"  {batch:4d} requests: {statistics.median(ratios):.3f} over {len(ratios)} pairs, {min(ratios):.3f}-{max(ratios):.3f}")


if __name__ == "__main__":
    main(sys.argv[1:])
