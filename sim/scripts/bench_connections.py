#!/usr/bin/env python3
"""How long `vllm bench serve`'s burst takes to reach the engine after its first request, by burst size.

`vllm bench serve` sending N prompts at once (vllm/benchmarks/serve.py of 0.26.0) writes the first on
the one keep-alive connection its `/metrics` fetch left idle and opens a connection for every other
before they reach the server; with `--max-concurrency C` the first C do so. The engine steps the
first request alone until the rest arrive. For every calibration bench run that sent its prompts at
once and whose step lines are stamped, this reads the window in which the burst's second request
reached the engine, as `afd-sim engine-profile` does for `connect_ns` (sim/src/model/engine.rs,
`connect_s`): under asynchronous scheduling the first step holding two requests, k, was planned at
its predecessor's stamp and the step before at the stamp before, so the request came between the
two. It prints each run's window from the first step's stamp, its middle over the connections the
burst opened (C - 1), and per server the median of those; then the median over servers, the
figure the profile takes from runs of 64 or more prompts (those below are printed, not counted).
A burst whose second request met the first step (k < 2) bounds nothing from below and is listed
as such.

usage: bench_connections.py RUN.json.xz...
Exit 2 on a missing or malformed file, or when no file holds such a run.
"""
import statistics
import sys

from stamped_steps import fail, machine, read_run, usage

# Fewest connections a run must open to count (`CONNECT_MIN_BURST` in sim/src/model/engine.rs).
MIN_BURST = 64


def window_s(steps):
    """(k, from, to): the first step holding two requests and the window its second one reached
    the engine in, seconds from the first step's stamp; None without stamps or such a step."""
    stamps = [s.get("logged_s") for s in steps]
    if not stamps or any(t is None for t in stamps):
        return None
    for k, s in enumerate(steps):
        if s.get("ctx_requests", 0) + s.get("gen_requests", 0) >= 2:
            if k < 2:
                return (k, None, stamps[k - 1] - stamps[0] if k else 0.0)
            return (k, stamps[k - 2] - stamps[0], stamps[k - 1] - stamps[0])
    return None


def main(paths):
    if not paths:
        usage(__doc__)
    by_server = {}
    for path in paths:
        run = read_run(path)
        card = machine(run)
        print(f"{path} ({card})")
        figures = []
        for record in run.get("records") or []:
            w = record.get("workload") or {}
            if not w.get("calibration") or w.get("request_rate") is not None or record.get("failure"):
                continue
            burst = min(w.get("num_prompts", 0), w.get("max_concurrency") or 1 << 30)
            found = window_s(record.get("steps") or [])
            if found is None:
                print(f"  {w.get('name')}: {burst} at once, no stamped step of two requests")
                continue
            k, lo, hi = found
            if lo is None:
                print(f"  {w.get('name')}: {burst} at once, the second request met the first step (k = {k})")
                continue
            mid = (lo + hi) / 2
            per = mid / (burst - 1)
            counted = burst >= MIN_BURST
            if counted:
                figures.append(per)
            print(f"  {w.get('name')}: {burst} at once, reached between {lo * 1e3:.0f} and {hi * 1e3:.0f} ms,"
                  f" {per * 1e6:.0f} µs a connection{'' if counted else ' (not counted)'}")
        if figures:
            by_server[path] = statistics.median(figures)
            print(f"  server median {by_server[path] * 1e6:.0f} µs over {len(figures)}")
    if not by_server:
        fail("no file holds a stamped calibration burst of 64 or more prompts whose second request came later")
    print(f"median over {len(by_server)} servers: {statistics.median(by_server.values()) * 1e6:.0f} µs a connection")


if __name__ == "__main__":
    main(sys.argv[1:])
