#!/usr/bin/env python3
"""Writes sim/tests/fixtures/numpy-legacy-gamma.json: the draws `vllm bench serve` takes for its
request gaps (`np.random.seed(seed)` then `np.random.gamma(shape=burstiness, scale=theta)` per
request, vllm/benchmarks/serve.py get_request), for the simulator's replay of them to be checked
against. numpy's legacy RandomState stream is frozen across numpy versions (NEP 19), so any numpy
gives these numbers. Usage: python3 sim/scripts/numpy_gamma_vectors.py > sim/tests/fixtures/numpy-legacy-gamma.json
"""
import json

import numpy as np

cases = []
for seed in (0, 1, 92292, 4294967295):
    for shape in (1.0, 0.5, 2.0, 0.25, 3.7):
        np.random.seed(seed)
        draws = [float(np.random.gamma(shape=shape, scale=1.0)) for _ in range(24)]
        cases.append({"seed": seed, "shape": shape, "draws": draws})
# get_request's send offsets (no ramp-up): gamma gaps, cumulated, rescaled to end at n / rate.
send_times = []
for seed, n, rate, burstiness in ((92292, 40, 4.0, 1.0), (0, 160, 16.0, 0.5), (7, 30, 2.0, 3.0)):
    np.random.seed(seed)
    theta = 1.0 / (rate * burstiness)
    delay_ts = [np.random.gamma(shape=burstiness, scale=theta) for _ in range(n)]
    for i in range(1, len(delay_ts)):
        delay_ts[i] += delay_ts[i - 1]
    factor = (n / rate) / delay_ts[-1]
    send_times.append({"seed": seed, "num_prompts": n, "request_rate": rate,
                       "burstiness": burstiness,
                       "send_s": [float(d * factor) for d in delay_ts]})
# With --ramp-up-strategy (and --request-rate inf) each gap takes the ramp's rate at its request
# (_get_current_request_rate) and the offsets are not rescaled.
for seed, n, strategy, start, end, burstiness in ((5, 30, "linear", 2, 10, 1.0),
                                                 (9, 20, "exponential", 1, 16, 0.5)):
    np.random.seed(seed)
    delay_ts = []
    for i in range(n):
        progress = i / max(n - 1, 1)
        if strategy == "linear":
            rate = start + (end - start) * progress
        else:
            rate = start * ((end / start) ** progress)
        delay_ts.append(np.random.gamma(shape=burstiness, scale=1.0 / (rate * burstiness)))
    for i in range(1, len(delay_ts)):
        delay_ts[i] += delay_ts[i - 1]
    send_times.append({"seed": seed, "num_prompts": n, "request_rate": "inf", "burstiness": burstiness,
                       "ramp_up_strategy": strategy, "ramp_up_start_rps": start,
                       "ramp_up_end_rps": end, "send_s": [float(d) for d in delay_ts]})
print(json.dumps({
    "source": f"numpy {np.__version__}: np.random.seed(seed); np.random.gamma(shape=shape, scale=1.0) x 24; "
              "send_times as vllm/benchmarks/serve.py get_request computes them",
    "cases": cases,
    "send_times": send_times,
}, indent=1))
