#!/usr/bin/env python3
"""Samples the host's CPU speed while a vLLM server runs, without touching the GPU.

A step vLLM issues op by op (eager, or the compiled model without graphs) is the host's, and the
same step moved by tens of per cent within one server, seconds apart (traces/data/vllm/PROVENANCE.md,
twentieth batch). host-speed.py reads the host once before a server starts, on the idle GPU; a
second CUDA context beside a running server would time-slice the GPU with it, so this sampler reads
only the CPU: every PERIOD_S, one plain Python loop (LOOP iterations) and one run of tiny PyTorch CPU
ops (OPS of them, the dispatcher's own cost without a kernel launch), each timed on its own.
Prints one line per sample, `unix_s python_loop_ns torch_cpu_op_us`, flushed, until killed.
usage: host-sampler.py [PERIOD_S]   (default 0.2)
"""
import sys
import time

import torch

PERIOD_S = float(sys.argv[1]) if len(sys.argv) > 1 else 0.2
LOOP = 100_000
OPS = 1_000

torch.set_num_threads(1)
x = torch.zeros(1)
for _ in range(OPS):
    x.add_(1)
while True:
    start = time.time()
    t = time.perf_counter()
    s = 0
    for i in range(LOOP):
        s += i
    loop_ns = (time.perf_counter() - t) / LOOP * 1e9
    t = time.perf_counter()
    for _ in range(OPS):
        x.add_(1)
    op_us = (time.perf_counter() - t) / OPS * 1e6
    print(f"{start:.6f} {loop_ns:.2f} {op_us:.3f}", flush=True)
    time.sleep(max(0.0, PERIOD_S - (time.time() - start)))
