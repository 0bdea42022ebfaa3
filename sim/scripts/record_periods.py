#!/usr/bin/env python3
"""Per workload of a stamped run: the periods of its steps that prefilled, and how busy the engine core was.

usage: record_periods.py RUN.json.xz [PROC.log.xz SERVER.log.xz] [--gaps NAME]
  RUN.json.xz    an `afd-probe vllm` run file whose server log lines were stamped (probe f27393d on)
  PROC.log.xz    `gpu-probes/scripts/proc-sampler.py` readings taken beside that server, and
  SERVER.log.xz  its log (for the engine core's pid): adds the fraction of each workload's span the
                 engine core's main thread was on a CPU (without them, from the run's own `host`
                 readings where its probe took them)
  --gaps NAME    also print every step of workload NAME from the third: its period, prefills and decodes

A step's period is the stamp of the step before it less the stamp of the one before that (vLLM writes
a step's line once the next one is issued); steps whose period is outside 20-300 ms (an idle spell) and
decode-only steps are left out. Prints per workload: the steps kept, their median period and its 10th
and 90th percentiles, the median decodes beside them. Exit 2 on a missing or unreadable file.
"""
import bisect
import json
import re
import statistics
import sys

from stamped_steps import fail, prefill_periods, read_text, take_option, usage


def main_thread_on_cpu(proc_path, server_path):
    """A function of (t0, t1) giving the engine core's main thread's time on a CPU over wall time."""
    found = re.search(r"\(EngineCore pid=(\d+)\)", read_text(server_path))
    if not found:
        fail(f"{server_path}: no `(EngineCore pid=N)` line")
    pid = int(found.group(1))
    times, run_s = [], []
    try:
        for line in read_text(proc_path).splitlines()[1:]:
            sample = json.loads(line)
            for row in sample["threads"]:
                if row[1] == pid:
                    times.append(sample["t"])
                    run_s.append(row[4] * 1e-9)
    except (ValueError, KeyError, IndexError) as e:
        fail(f"{proc_path}: unreadable readings: {e}")
    if len(times) < 2:
        fail(f"{proc_path}: no readings of the engine core (pid {pid})")

    def fraction(t0, t1):
        i, j = bisect.bisect_right(times, t0) - 1, bisect.bisect_right(times, t1) - 1
        if i < 0 or j <= i:
            return None
        return (run_s[j] - run_s[i]) / (times[j] - times[i])
    return fraction


def recorded_on_cpu(record):
    """The same share from the probe's own readings (`host` of the record, probes since the twelfth
    session), over the workload's whole span rather than its steps' span; None without them."""
    host = record.get("host")
    return host["engine_core_on_cpu_s"] / host["wall_s"] if host and host.get("wall_s") else None


def main():
    args = sys.argv[1:]
    gaps_of = take_option(args, "--gaps", str, "a workload name")
    if len(args) not in (1, 3):
        usage(__doc__)
    try:
        run = json.loads(read_text(args[0]))
        records = run["records"]
    except (ValueError, KeyError) as e:
        fail(f"{args[0]}: not an afd-vllm-run file: {e}")
    sampled = main_thread_on_cpu(args[1], args[2]) if len(args) == 3 else None
    show = sampled is not None or any(r.get("host") for r in records)
    print(f"{'workload':26} {'steps':>5} {'median ms':>9} {'p10':>6} {'p90':>6} {'decodes':>7}"
          + (f" {'on CPU':>6}" if show else ""))
    for record in records:
        name = record["workload"]["name"]
        steps = record.get("steps") or []
        if name.startswith("warm") or len(steps) < 3 or steps[0].get("logged_s") is None:
            continue
        kept = prefill_periods(steps)
        periods = [(t1 - t0) * 1e3 for _, t0, t1 in kept]
        decodes = [steps[k]["gen_requests"] for k, _, _ in kept]
        if name == gaps_of:
            for k in range(2, len(steps)):
                s, gap = steps[k], steps[k - 1]["logged_s"] - steps[k - 2]["logged_s"]
                print(f"  {k:4d} period {gap * 1e3:8.1f} ms  prefill {s['ctx_requests']}/{s['ctx_tokens']}"
                      f"  decodes {s['gen_requests']}")
        if len(periods) < 2:
            continue
        deciles = statistics.quantiles(periods, n=10)
        line = (f"{name:26} {len(periods):5d} {statistics.median(periods):9.1f} {deciles[0]:6.1f} "
                f"{deciles[-1]:6.1f} {statistics.median(decodes):7.0f}")
        if show:
            share = (sampled(steps[0]["logged_s"], steps[-1]["logged_s"]) if sampled
                     else recorded_on_cpu(record))
            line += f" {share:6.2f}" if share is not None else f" {'-':>6}"
        print(line)


if __name__ == "__main__":
    main()
