#!/usr/bin/env python3
"""Sets the stamped period of every step that prefilled against the host's CPU speed read while it ran.

usage: steps_against_host.py RUN.json.xz HOST.log.xz
  RUN.json.xz   an `afd-probe vllm` run file whose server log lines were stamped (probe f27393d on)
  HOST.log.xz   `gpu-probes/scripts/host-sampler.py` readings taken beside that server
                (`unix_s python_loop_ns torch_cpu_op_us` a line)
A step's period is the stamp of the step before it less the stamp of the one before that (vLLM
logs a step once the next one is issued); its reading is the median of the samples from 0.2 s before
that window to its end. Steps after an idle spell (over 0.3 s) and decode steps are left out.
Prints the correlation of period with each reading, per step and over workload medians, the median
period by fifths of the loop reading, and the workload table. Exit 2 on a missing or unreadable file.
"""
import bisect
import collections
import json
import statistics
import sys

from stamped_steps import correlation, fail, prefill_periods, read_text, usage


def main():
    if len(sys.argv) != 3:
        usage(__doc__)
    try:
        run = json.loads(read_text(sys.argv[1]))
        samples = [tuple(map(float, line.split())) for line in read_text(sys.argv[2]).splitlines()
                   if len(line.split()) == 3]
    except ValueError as e:
        fail(f"unreadable input: {e}")
    if not samples:
        fail(f"{sys.argv[2]}: no readings")
    times = [s[0] for s in samples]

    def reading(t0, t1, k):
        i, j = bisect.bisect_left(times, t0 - 0.2), bisect.bisect_right(times, t1)
        values = [samples[x][k] for x in range(i, j)]
        return statistics.median(values) if values else None

    rows = []
    for record in run["records"]:
        name = record["workload"]["name"]
        steps = record.get("steps") or []
        if name.startswith("warm"):
            continue
        for _, t0, t1 in prefill_periods(steps):
            loop, op = reading(t0, t1, 1), reading(t0, t1, 2)
            if loop is not None:
                rows.append((name, (t1 - t0) * 1e3, loop, op))
    if len(rows) < 3:
        fail("fewer than three steps that prefilled have a reading")
    periods, loops, ops = ([r[i] for r in rows] for i in (1, 2, 3))
    print(f"{len(rows)} steps that prefilled: correlation of period with the loop reading "
          f"{correlation(periods, loops):.2f}, with the PyTorch op {correlation(periods, ops):.2f}")
    by = collections.defaultdict(list)
    for r in rows:
        by[r[0]].append(r)
    table = [(name, len(v), *(statistics.median(x[i] for x in v) for i in (1, 2, 3)))
             for name, v in sorted(by.items())]
    if len(table) >= 3:
        print("over workload medians: {:.2f} and {:.2f}".format(
            correlation([t[2] for t in table], [t[3] for t in table]),
            correlation([t[2] for t in table], [t[4] for t in table])))
    ordered = sorted(rows, key=lambda r: r[2])
    for q in range(5):
        part = ordered[q * len(ordered) // 5:(q + 1) * len(ordered) // 5]
        print(f"loop {part[0][2]:6.1f}-{part[-1][2]:6.1f} ns: {len(part):4d} steps, "
              f"median period {statistics.median(r[1] for r in part):5.1f} ms")
    print(f"\n{'workload':24} {'steps':>5} {'period ms':>9} {'loop ns':>8} {'op us':>6}")
    for name, n, period, loop, op in table:
        print(f"{name:24} {n:5d} {period:9.1f} {loop:8.1f} {op:6.2f}")


if __name__ == "__main__":
    main()
