#!/usr/bin/env python3
"""Sets the stamped periods of a server's prefill steps against where its engine core's thread spent them.

usage: steps_against_threads.py RUN.json.xz PROC.log.xz SERVER.log.xz [GPU.csv.xz] [--window S]
  RUN.json.xz     an `afd-probe vllm` run file whose server log lines were stamped (probe f27393d on)
  PROC.log.xz     `gpu-probes/scripts/proc-sampler.py` readings taken beside that server
  SERVER.log.xz   the server's log, for the engine core's pid (`(EngineCore pid=N)`)
  GPU.csv.xz      optional nvidia-smi readings taken beside it (PROCS in vllm-engine.sh)
  --window S      seconds a window spans (default 1.0)

Time is cut into windows; a window with at least three steps that prefilled (decode steps and steps
after an idle spell over 0.3 s are left out, as in steps_against_host.py) gets the median of their
periods, and from the sampler's counters over the same window: the fraction of wall time the
engine core's main thread ran on a CPU, waited runnable for one, and neither (asleep: on the GPU, a
lock, the GIL); its involuntary switches a second; the time its other threads, the API server and
the bench client ran (CPUs' worth); the host's steal and busy CPUs; the GPU's SM clock.
Prints the correlation of the step period with each, and the windows by fifths of the period.
Exit 2 on a missing or unreadable file.
"""
import bisect
import collections
import csv
import datetime
import io
import json
import re
import statistics
import sys

from stamped_steps import correlation, fail, prefill_periods, read_text, take_option, usage


class Series:
    """A cumulative counter read at sample times; its value at t is the last reading at or before t."""

    def __init__(self):
        self.times, self.values = [], []

    def add(self, t, value):
        self.times.append(t)
        self.values.append(value)

    def at(self, t):
        i = bisect.bisect_right(self.times, t) - 1
        return self.values[i] if i >= 0 else None

    def delta(self, t0, t1):
        a, b = self.at(t0), self.at(t1)
        return None if a is None or b is None else [y - x for x, y in zip(a, b)]


def read_samples(path):
    lines = read_text(path).splitlines()
    try:
        head = json.loads(lines[0])
        tick = 1.0 / head["ticks_per_s"]
        samples = [json.loads(line) for line in lines[1:] if line.startswith("{")]
    except (ValueError, KeyError, IndexError) as e:
        fail(f"{path}: unreadable readings: {e}")
    if len(samples) < 10:
        fail(f"{path}: fewer than ten readings")
    threads = collections.defaultdict(Series)
    owner = {}
    cpus = Series()  # [steal, busy] in CPU-seconds, summed over every CPU
    for s in samples:
        steal = sum(c[7] for c in s["cpus"])
        busy = sum(c[0] + c[1] + c[2] + c[5] + c[6] for c in s["cpus"])
        cpus.add(s["t"], [steal * tick, busy * tick])
        for pid, tid, _comm, _cpu, run, wait, _slices, _vol, invol in s["threads"]:
            threads[tid].add(s["t"], [run * 1e-9, wait * 1e-9, invol])
            owner[tid] = pid
    return threads, owner, cpus


def classify(owner, engine_pid, api_pid):
    """The engine core's main thread and its other threads, the API server, and every other watched
    process by pid."""
    groups = collections.defaultdict(list)
    for tid, pid in owner.items():
        if pid == engine_pid:
            groups["engine_main" if tid == pid else "engine_other"].append(tid)
        else:
            groups["api_server" if pid == api_pid else f"pid{pid}"].append(tid)
    return groups


def read_gpu(path):
    text = read_text(path)
    rows = list(csv.reader(io.StringIO(text)))
    if len(rows) < 2:
        fail(f"{path}: no readings")
    header = [h.strip() for h in rows[0]]
    try:
        t_col, sm_col = header.index("timestamp"), next(i for i, h in enumerate(header) if h.startswith("clocks.current.sm") or h.startswith("clocks.sm"))
    except (ValueError, StopIteration):
        fail(f"{path}: no timestamp or SM clock column in {header}")
    times, clocks = [], []
    for row in rows[1:]:
        try:
            t = datetime.datetime.strptime(row[t_col].strip(), "%Y/%m/%d %H:%M:%S.%f")
            times.append(t.replace(tzinfo=datetime.timezone.utc).timestamp())
            clocks.append(float(row[sm_col]))
        except (ValueError, IndexError):
            continue
    return times, clocks


def step_periods(run):
    out = []
    for record in run["records"]:
        name = record["workload"]["name"]
        if not name.startswith("warm"):
            out += [(t0, t1, name) for _, t0, t1 in prefill_periods(record.get("steps") or [])]
    return out


def main():
    args = sys.argv[1:]
    window = take_option(args, "--window", float, "a number of seconds")
    window = 1.0 if window is None else window
    if not window > 0:
        fail("--window takes a positive number of seconds")
    if len(args) not in (3, 4):
        usage(__doc__)
    try:
        run = json.loads(read_text(args[0]))
    except ValueError as e:
        fail(f"{args[0]}: {e}")
    log = read_text(args[2])
    found = re.search(r"\(EngineCore pid=(\d+)\)", log)
    if not found:
        fail(f"{args[2]}: no `(EngineCore pid=N)` line")
    engine_pid = int(found.group(1))
    api = re.search(r"\(APIServer pid=(\d+)\)", log)
    threads, owner, cpus = read_samples(args[1])
    groups = classify(owner, engine_pid, int(api.group(1)) if api else None)
    if not groups.get("engine_main"):
        fail(f"{args[1]}: no readings of the engine core (pid {engine_pid})")
    gpu = read_gpu(args[3]) if len(args) == 4 else None
    steps = step_periods(run)
    by_window = collections.defaultdict(list)
    for t0, t1, name in steps:
        by_window[int(t1 // window)].append((t1 - t0) * 1e3)
    others = sorted(g for g in groups if g.startswith("pid"))
    busiest = sorted(others, key=lambda g: -sum(threads[t].values[-1][0] - threads[t].values[0][0]
                                                 for t in groups[g]))[:1]
    busiest = [g for g in ("api_server",) if g in groups] + busiest
    rows = []
    for w, periods in sorted(by_window.items()):
        if len(periods) < 3:
            continue
        t0, t1 = w * window, (w + 1) * window
        main_d = threads[groups["engine_main"][0]].delta(t0, t1)
        host = cpus.delta(t0, t1)
        if main_d is None or host is None:
            continue
        row = {"period_ms": statistics.median(periods), "steps": len(periods),
               "main_run": main_d[0] / window, "main_wait": main_d[1] / window,
               "main_asleep": max(0.0, 1 - (main_d[0] + main_d[1]) / window),
               "main_invol_per_s": main_d[2] / window,
               "engine_other_run": sum((threads[t].delta(t0, t1) or [0])[0] for t in groups["engine_other"]) / window,
               "steal_cpus": host[0] / window, "busy_cpus": host[1] / window}
        for g in busiest:
            row[f"{g}_run"] = sum((threads[t].delta(t0, t1) or [0])[0] for t in groups[g]) / window
        if gpu:
            i, j = bisect.bisect_left(gpu[0], t0), bisect.bisect_right(gpu[0], t1)
            row["sm_mhz"] = statistics.fmean(gpu[1][i:j]) if j > i else float("nan")
        rows.append(row)
    if len(rows) < 5:
        fail("fewer than five windows hold three steps that prefilled and readings")
    keys = [k for k in rows[0] if k not in ("period_ms", "steps")]
    periods = [r["period_ms"] for r in rows]
    print(f"{len(rows)} windows of {window:g} s ({sum(r['steps'] for r in rows)} steps that prefilled); "
          f"engine core pid {engine_pid}; beside it: {', '.join(busiest)} (the busiest other watched process)")
    print("correlation with the median period: " +
          ", ".join(f"{k} {correlation(periods, [r[k] for r in rows]):+.2f}" for k in keys))
    ordered = sorted(rows, key=lambda r: r["period_ms"])
    print(f"\n{'period ms':>13} {'n':>3} " + " ".join(f"{k[:14]:>14}" for k in keys))
    for q in range(5):
        part = ordered[q * len(ordered) // 5:(q + 1) * len(ordered) // 5]
        print(f"{part[0]['period_ms']:6.1f}-{part[-1]['period_ms']:6.1f} {len(part):3d} " +
              " ".join(f"{statistics.median(r[k] for r in part):14.3f}" for k in keys))


if __name__ == "__main__":
    main()
