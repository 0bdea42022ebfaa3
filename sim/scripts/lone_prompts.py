#!/usr/bin/env python3
"""A lone prompt's first token on an idle engine: what each server measured, beside what afd-sim
prices for that server's own serve words.

Every fixed-shape workload of one request (`num_prompts` 1, not injected beside standing decodes,
the prompt within one step's budget) is a lone prompt on an idle engine: its first token's latency
is the stream's first chunk less its send time. For each run file whose graph mode the engine
profile prices, the script asks `afd-sim predict --real-engine` for the same serve words, one prompt
of the same length, 4 output tokens, and sets the model's mean TTFT beside the measured ones.

Prints one line per (mode, prompt length): the servers' median first tokens (each server's median
over its lone prompts of that length), their median, the model's price per server's limits, and
their ratio. It fits nothing and changes nothing: a derivation rule is chosen by
`calibration_loso.py`, never here.

usage: lone_prompts.py [--sim BIN] [--engine PROFILE] RUN.json.xz...
  --sim BIN        the afd-sim binary (default: target/release/afd-sim)
  --engine PROFILE the engine profile to price with (default: the built-in one)
Exit 2 on a missing or malformed file, a failed prediction, or when no lone prompt is found.
"""
import collections, json, statistics, subprocess, sys

from injected_steps import budget_of, graph_mode
from stamped_steps import fail, read_run, take_option, usage

PROBE_WORDS = {"--host": 1, "--port": 1, "--kernel-config": 1, "--enable-logging-iteration-details": 0}


def serve_line(run):
    """The run's serve words without the probe's own (as `afd-sim compare` strips them), as one
    shell-quoted `vllm serve` line."""
    words, args, i = [], run.get("serve_args") or [], 0
    while i < len(args):
        if args[i] in PROBE_WORDS:
            i += 1 + PROBE_WORDS[args[i]]
            continue
        words.append(args[i])
        i += 1
    quoted = ("'" + w.replace("'", "'\\''") + "'" for w in words)
    return "vllm serve " + " ".join(quoted)


def lone_first_tokens(run):
    """{prompt length: [first-token seconds]} over the run's lone-prompt fixed shapes."""
    limit = budget_of(run) or 8192  # vLLM 0.26.0's default on an H200
    out = collections.defaultdict(list)
    for r in run.get("records", []):
        w = r.get("workload", {})
        fixed = r.get("fixed") or {}
        requests = fixed.get("requests") or []
        if r.get("failure") or w.get("kind") != "fixed-shape" or w.get("num_prompts") != 1:
            continue
        if "inj" in w.get("name", "") or len(requests) != 1 or w.get("input_len", 0) > limit:
            continue
        q = requests[0]
        if q.get("error") or not q.get("chunk_s"):
            continue
        out[w["input_len"]].append(q["chunk_s"][0] - q["sent_s"])
    return out


def priced(sim, engine, line, tokens):
    """afd-sim's mean TTFT (seconds) for one prompt of `tokens` tokens on the server `line`."""
    args = [sim, "predict", "--serve-args", line, "--real-engine", "--num-prompts", "1",
            "--input-len", str(tokens), "--output-len", "4", "--request-rate", "inf", "--json"]
    if engine:
        args += ["--engine", engine]
    try:
        done = subprocess.run(args, capture_output=True, text=True)
    except OSError as e:
        fail(f"{sim}: {e}")
    if done.returncode != 0:
        fail(f"afd-sim predict for {line!r} at {tokens} tokens: {done.stderr.strip()}")
    return json.loads(done.stdout)["mean_ttft_ms"] / 1e3


def main(args):
    sim = take_option(args, "--sim", str, "the afd-sim binary") or "target/release/afd-sim"
    engine = take_option(args, "--engine", str, "an engine profile")
    if not args or any(a.startswith("--") for a in args):
        usage(__doc__)
    cells = collections.defaultdict(lambda: ([], []))
    for path in args:
        run = read_run(path)
        found = lone_first_tokens(run)
        if not found:
            continue
        mode, line = graph_mode(run), serve_line(run)
        for tokens, seconds in found.items():
            measured, model = cells[(mode, tokens)]
            measured.append(statistics.median(seconds))
            model.append(priced(sim, engine, line, tokens))
    if not cells:
        fail("no lone prompt (a one-request fixed shape that is not injected) in the run files")
    print("mode                 tokens  servers  measured ms (median; each)            model ms  measured/model")
    for (mode, tokens), (measured, model) in sorted(cells.items()):
        each = ", ".join(f"{1e3 * m:.0f}" for m in measured)
        m, p = statistics.median(measured), statistics.median(model)
        print(f"{mode:<20} {tokens:>6}  {len(measured):>7}  {1e3 * m:6.1f}  ({each:<28}) {1e3 * p:8.1f}  {m / p:6.2f}")


if __name__ == "__main__":
    main(sys.argv[1:])
