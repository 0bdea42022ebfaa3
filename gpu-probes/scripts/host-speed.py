#!/usr/bin/env python3
"""How fast this host drives an eager PyTorch step, measured on an idle GPU before a server starts.

A vLLM step under --enforce-eager is the host's: Python and PyTorch dispatch one small kernel after
another, and the GPU waits. Two lent machines of one kind stepped 25-30 % apart (traces/data/vllm/
PROVENANCE.md, fifth batch) and their CPU model strings were the same, so each server's provenance
carries this measurement instead: the host time of one tiny eager CUDA op (`x.add_(1)` on a 1-element
tensor, launch-bound) and of one iteration of a plain Python loop, each the median of 7 repeats.
Prints `torch_launch_us=X python_loop_ns=Y` for `afd-probe vllm --note`.
"""
import statistics
import time

import torch

N_OPS = 20000
N_LOOP = 2_000_000

x = torch.zeros(1, device="cuda")
for _ in range(2000):
    x.add_(1)
torch.cuda.synchronize()
launch = []
for _ in range(7):
    t = time.perf_counter()
    for _ in range(N_OPS):
        x.add_(1)
    torch.cuda.synchronize()
    launch.append((time.perf_counter() - t) / N_OPS * 1e6)
loop = []
for _ in range(7):
    t = time.perf_counter()
    s = 0
    for i in range(N_LOOP):
        s += i
    loop.append((time.perf_counter() - t) / N_LOOP * 1e9)
print(f"torch_launch_us={statistics.median(launch):.3f} python_loop_ns={statistics.median(loop):.2f}")
