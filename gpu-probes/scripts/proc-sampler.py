#!/usr/bin/env python3
"""Samples where a running vLLM server's threads spend their time, from /proc only (no CUDA, no torch).

host-sampler.py timed a Python loop on whatever CPU it ran on, and its readings followed the
engine's step periods only loosely (traces/data/vllm/PROVENANCE.md, twenty-first batch): it never saw
the engine core's own CPU. This reads, every PERIOD_S, for every thread of every process whose
command line names vLLM or Python's multiprocessing (the API server, the engine core, the bench
client): the kernel's scheduler statistics (/proc/PID/task/TID/schedstat: time on a CPU, time
runnable but waiting for one, slices), its voluntary and involuntary context switches, and the CPU it
last ran on; and for the host: every CPU's time by state (steal included, /proc/stat) and the CPU
pressure stall totals (/proc/pressure/cpu) where the kernel has them.
So a slow step can be told apart as the engine core's thread busy (slower work or a slower CPU), waiting
to run (another thread had its CPU), stolen (the hypervisor had it) or asleep (waiting on the GPU or
on a lock, the GIL included).

One JSON object a line, flushed, until killed:
  {"t": unix_s, "cpus": [[user, nice, system, idle, iowait, irq, softirq, steal], ...] (clock ticks),
   "psi": [some_total_us, full_total_us] or null,
   "threads": [[pid, tid, comm, cpu, run_ns, wait_ns, slices, voluntary, involuntary], ...]}
A thread is listed on the first sample that sees it and on every sample where its run or wait time
moved. The first line is {"ticks_per_s": N, "cpus_online": N} for the units.
usage: proc-sampler.py [PERIOD_S]   (default 0.2)
"""
import json
import os
import sys
import time

PERIOD_S = float(sys.argv[1]) if len(sys.argv) > 1 else 0.2
RESCAN_S = 1.0
MARKERS = (b"vllm", b"multiprocessing", b"EngineCore", b"APIServer")


def read(path):
    try:
        with open(path, "rb") as f:
            return f.read()
    except OSError:
        return None


def watched_pids():
    pids = []
    for name in os.listdir("/proc"):
        if not name.isdigit() or int(name) == os.getpid():
            continue
        cmdline = read(f"/proc/{name}/cmdline")
        if cmdline and any(m in cmdline for m in MARKERS):
            pids.append(int(name))
    return pids


def cpu_states():
    text = read("/proc/stat") or b""
    rows = []
    for line in text.split(b"\n"):
        if line.startswith(b"cpu") and line[3:4].isdigit():
            rows.append([int(v) for v in line.split()[1:9]])
    return rows


def pressure():
    text = read("/proc/pressure/cpu")
    if not text:
        return None
    totals = [int(f.split(b"=")[1]) for f in text.split() if f.startswith(b"total=")]
    return totals if totals else None


def thread_row(pid, tid):
    base = f"/proc/{pid}/task/{tid}"
    sched = read(f"{base}/schedstat")
    stat = read(f"{base}/stat")
    status = read(f"{base}/status")
    if not sched or not stat or not status:
        return None
    run_ns, wait_ns, slices = (int(v) for v in sched.split()[:3])
    close = stat.rindex(b")")
    comm = stat[stat.index(b"(") + 1:close].decode(errors="replace")
    cpu = int(stat[close + 2:].split()[36])  # field 39, `processor`
    switches = {}
    for line in status.split(b"\n"):
        if line.startswith((b"voluntary_ctxt_switches", b"nonvoluntary_ctxt_switches")):
            key, value = line.split(b":")
            switches[key] = int(value)
    return [pid, tid, comm, cpu, run_ns, wait_ns, slices,
            switches.get(b"voluntary_ctxt_switches", 0), switches.get(b"nonvoluntary_ctxt_switches", 0)]


def main():
    print(json.dumps({"ticks_per_s": os.sysconf("SC_CLK_TCK"), "cpus_online": os.cpu_count()}), flush=True)
    seen = {}
    pids, scanned = [], 0.0
    while True:
        start = time.time()
        if start - scanned >= RESCAN_S:
            pids, scanned = watched_pids(), start
        threads = []
        for pid in pids:
            try:
                tids = [int(t) for t in os.listdir(f"/proc/{pid}/task")]
            except OSError:
                continue
            for tid in tids:
                row = thread_row(pid, tid)
                if row is None:
                    continue
                if seen.get(tid) != (row[4], row[5]):
                    seen[tid] = (row[4], row[5])
                    threads.append(row)
        line = {"t": round(start, 6), "cpus": cpu_states(), "psi": pressure(), "threads": threads}
        print(json.dumps(line, separators=(",", ":")), flush=True)
        time.sleep(max(0.0, PERIOD_S - (time.time() - start)))


if __name__ == "__main__":
    main()
