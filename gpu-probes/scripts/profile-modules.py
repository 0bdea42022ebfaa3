#!/usr/bin/env python3
"""`afd-probe vllm --hook`: vLLM's torch profiler around a few fixed shapes, each step's host time
divided by module (sim/scripts/module_shares.py), for the AFD roles' share of a plain step.

Runs against a server started with `--profiler-config '{"profiler": "torch", "torch_profiler_dir":
DIR, ...}'` (vllm-engine.sh's `cal35-…` label): for each shape, `POST /start_profile`, the shape's
requests sent together (token-id prompts, `ignore_eos`, greedy), `POST /stop_profile`, then the
trace file the worker wrote into DIR is read by module_shares.py into `OUT/modules-SHAPE.json`.
Beside it, always, `OUT/events-SHAPE.json.gz`: the trace's annotations (`user_annotation`), its
`nn.Module` events and every other Python call of 10 µs or more, so the division can be read again
(or otherwise) without the whole trace, which is too large to bring back. `OUT/modules.json` lists
every shape's wall time, its trace's name and size, and what module_shares.py said (or why it
could not), rewritten after each shape so a hook stopped at its time limit keeps what it did. The
server's own log says when each profile started and stopped.

usage: profile-modules.py --trace-dir DIR --out OUT     (env: VLLM_URL, VLLM_MODEL, as the probe's hook sets them)
Exit 2 on bad arguments; a shape that fails is recorded and the next one runs.
"""
import argparse
import gzip
import json
import os
import pathlib
import random
import subprocess
import sys
import threading
import time
import urllib.error
import urllib.request

# (name, requests sent together, prompt tokens, tokens out), most wanted first (a short loan may
# stop the hook early): the seed recipe's 64-token step, decode steps at two batches, a mixed
# step's worth of prefill beside nothing, and a large prefill.
SHAPES = (("prefill-64", 1, 64, 4), ("decode-b16", 16, 128, 8), ("decode-b64", 64, 128, 8),
          ("prefill-512", 1, 512, 2), ("prefill-2048", 1, 2048, 2))
# A Python call shorter than this is left out of the extract (modules and annotations never are).
EXTRACT_MIN_US = 10.0
SCRIPTS = pathlib.Path(__file__).resolve().parent.parent.parent / "sim" / "scripts"
sys.path.insert(0, str(SCRIPTS))
from stamped_steps import read_json  # noqa: E402 (found through SCRIPTS)


def post(url, body=None, timeout=300):
    data = None if body is None else json.dumps(body).encode()
    request = urllib.request.Request(url, data=data, method="POST",
                                     headers={"Content-Type": "application/json"})
    with urllib.request.urlopen(request, timeout=timeout) as response:
        return response.status, response.read()


def burst(base, model, n, input_len, output_len, seed):
    """n requests of `input_len` random token ids sent together; the failures' reasons."""
    rng = random.Random(seed)
    failures = []

    def one(i):
        prompt = [rng.randrange(1000, 30000) for _ in range(input_len)]
        body = {"model": model, "prompt": prompt, "max_tokens": output_len, "min_tokens": output_len,
                "ignore_eos": True, "temperature": 0.0}
        try:
            post(f"{base}/v1/completions", body, timeout=240)
        except (urllib.error.URLError, OSError) as e:
            failures.append(f"request {i}: {e}")

    threads = [threading.Thread(target=one, args=(i,)) for i in range(n)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    return failures


def new_trace(trace_dir, before, timeout_s=180):
    """The trace file that appeared in `trace_dir` since `before`, once its size holds still."""
    deadline = time.time() + timeout_s
    last = None
    while time.time() < deadline:
        fresh = [p for p in trace_dir.glob("*.json*") if p.name not in before and p.is_file()]
        if fresh:
            newest = max(fresh, key=lambda p: p.stat().st_mtime)
            size = newest.stat().st_size
            if last == (newest, size) and size > 0:
                return newest
            last = (newest, size)
        time.sleep(2)
    return None


def extract(trace, dest):
    """The events module_shares.py (and a later reading) needs, gzipped into `dest`; their count."""
    data = read_json(str(trace))
    events = data.get("traceEvents", []) if isinstance(data, dict) else data
    kept = []
    for e in events:
        if not isinstance(e, dict) or e.get("ph") != "X":
            continue
        cat, name = e.get("cat", ""), str(e.get("name", ""))
        if cat == "user_annotation" or name.startswith("nn.Module: ") or (
                cat == "python_function" and float(e.get("dur", 0.0)) >= EXTRACT_MIN_US):
            kept.append({k: e[k] for k in ("ph", "cat", "name", "ts", "dur", "pid", "tid") if k in e})
    with gzip.open(dest, "wt") as f:
        json.dump({"traceEvents": kept}, f, separators=(",", ":"))
    return len(kept)


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--trace-dir", required=True)
    parser.add_argument("--out", required=True)
    args = parser.parse_args()
    base = os.environ.get("VLLM_URL")
    model = os.environ.get("VLLM_MODEL")
    if not base or not model:
        print("profile-modules.py: VLLM_URL and VLLM_MODEL must be set (afd-probe vllm --hook sets them)",
              file=sys.stderr)
        sys.exit(2)
    trace_dir = pathlib.Path(args.trace_dir)
    out = pathlib.Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    trace_dir.mkdir(parents=True, exist_ok=True)
    results = []
    for k, (name, n, input_len, output_len) in enumerate(SHAPES):
        record = {"shape": name, "requests": n, "input_len": input_len, "output_len": output_len}
        before = {p.name for p in trace_dir.glob("*")}
        t0 = time.time()
        try:
            post(f"{base}/start_profile")
            record["failures"] = burst(base, model, n, input_len, output_len, seed=1000 + k)
            post(f"{base}/stop_profile", timeout=600)
        except (urllib.error.URLError, OSError) as e:
            record["error"] = f"profiler endpoint: {e}"
        record["wall_s"] = round(time.time() - t0, 2)
        trace = new_trace(trace_dir, before)
        if trace is None:
            record.setdefault("error", f"no new trace in {trace_dir}")
        else:
            record["trace"] = trace.name
            record["trace_bytes"] = trace.stat().st_size
            summary = out / f"modules-{name}.json"
            done = subprocess.run([sys.executable, str(SCRIPTS / "module_shares.py"), str(trace), "--json"],
                                  capture_output=True, text=True, timeout=600)
            if done.returncode == 0:
                summary.write_text(done.stdout)
                record["summary"] = summary.name
            else:
                record["error"] = f"module_shares.py: {done.stderr.strip()[-500:]}"
            try:
                record["extract_events"] = extract(trace, out / f"events-{name}.json.gz")
            except (OSError, ValueError, TypeError, SystemExit) as e:
                record["extract_error"] = str(e)[-300:]
            trace.unlink()  # the next shape's trace is found as the new file; the disk is not unbounded
        results.append(record)
        print(json.dumps(record), flush=True)
        (out / "modules.json").write_text(json.dumps({"shapes": results}, indent=1) + "\n")


if __name__ == "__main__":
    main()
