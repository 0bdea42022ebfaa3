#!/usr/bin/env python3
"""How many distinct tokens a fixed-shape burst's decode steps feed the experts, from the generated
text `afd-probe vllm` keeps for a workload with `keep_text` (the dummy model's word-level tokenizer
writes token i as the word `t<i>`), beside the step period the same burst measured.

The dummy-weight model's decode steps read few experts (docs/fidelity.md, "Why a replayed decode
step is cheap here"). cal23 and cal24 (2026-12-05) asked whether that is because its requests
generate few distinct tokens: it is not. Every step fed as many distinct tokens as it had requests,
and bursts at temperature 2 (vLLM's highest) stepped as greedy ones did.

Per workload with text it prints: the requests, the temperature asked for, the median over output
positions of the distinct tokens the burst's requests generated at that position (all requests
start together, so position k is one decode step), the share of requests that settle into a
two-token cycle (from their fifth token on, every token equals the one two before), and the decode
period: the median of the streamed requests' median gaps, or for a pair of unstreamed workloads of
one batch and temperature (`-o128-ns`, `-o256-ns`), the difference of their median end times over
the difference of their lengths; and, before it, the engine's own stamps: the median gap between
consecutive logged steps that both decoded the whole burst and nothing else (steadier than the
end-time pairs, which scatter by a few milliseconds a step between servers). Where the workload
counted its routed experts (`routed_experts`, a server started with
--enable-return-routed-experts), the experts a layer its decode steps reached (median over the
steps), one prompt's and all the burst's prompts' reached.

With --blind FILE (`traces/data/vllm/blind/*-decode-steps.predicted.json`) each workload's period is
set beside the prediction made before it ran (the dummy model's step, the measured table's) and the
error, and the loaded-weights step the same file holds (what a trained model's routing would cost).

usage: decode_tokens.py RUN.json[.xz] [--blind FILE] [--json]
Exit 2 on a missing or malformed file, or a run with no kept text.
"""
import argparse, json, re, statistics, sys

from stamped_steps import fail, read_run


def tokens(text):
    """The ids of `t<i>` words; None if a word is anything else."""
    words = text.split()
    ids = [re.fullmatch(r"t(\d+)", w) for w in words]
    return None if any(m is None for m in ids) else [int(m.group(1)) for m in ids]


def two_cycle(seq):
    return len(seq) >= 6 and all(seq[k] == seq[k - 2] for k in range(4, len(seq)))


def summarise(record):
    w, fixed = record["workload"], record.get("fixed") or {}
    burst = fixed.get("requests", [])[: w["num_prompts"]]
    seqs = [tokens(r["text"]) for r in burst if r.get("text") and not r.get("error")]
    seqs = [s for s in seqs if s]
    if not seqs:
        return None
    length = min(len(s) for s in seqs)
    distinct = [len({s[k] for s in seqs}) for k in range(length)]
    gaps = []
    for r in burst:
        c = r.get("chunk_s") or []
        if len(c) > 2:
            gaps.append(statistics.median(b - a for a, b in zip(c[1:], c[2:])))
    done = [r["done_s"] for r in burst if r.get("done_s") is not None and not r.get("error")]
    # The engine's own stamps: consecutive logged steps that both decoded the whole burst alone.
    steps = record.get("steps") or []
    stamped = [b["logged_s"] - a["logged_s"] for a, b in zip(steps, steps[1:])
               if a.get("logged_s") is not None and b.get("logged_s") is not None
               and a["ctx_requests"] == b["ctx_requests"] == 0
               and a["gen_requests"] == b["gen_requests"] == w["num_prompts"]]
    return {
        "workload": w["name"], "requests": len(seqs), "temperature": w.get("temperature"),
        "stream": w.get("stream", True), "output_len": w["output_len"],
        "distinct_median": statistics.median(distinct), "distinct_max": max(distinct),
        "two_cycle_share": sum(map(two_cycle, seqs)) / len(seqs),
        "streamed_gap_ms": statistics.median(gaps) * 1e3 if gaps else None,
        "done_median_s": statistics.median(done) if done else None,
        "stamped_step_ms": statistics.median(stamped) * 1e3 if stamped else None,
        "routed": routed_summary(fixed.get("routed")),
    }


def routed_summary(routed):
    """A burst's counted experts (a plan's `routed_experts`), or None."""
    if not routed or not routed.get("decode_distinct"):
        return None
    return {
        "decode_experts_median": statistics.median(routed["decode_distinct"]),
        "prompt_experts": routed["prompt_distinct"],
        "prompt_union_experts": routed["prompt_union_distinct"],
        "layers": routed["layers"], "top_k": routed["top_k"],
    }


def pair_periods(rows):
    """Unstreamed pairs of one batch and temperature: the period from their end times."""
    by = {}
    for r in rows:
        if not r["stream"] and r["done_median_s"] is not None:
            by.setdefault((r["requests"], r["temperature"]), []).append(r)
    for pair in by.values():
        if len(pair) == 2 and pair[0]["output_len"] != pair[1]["output_len"]:
            short, long_ = sorted(pair, key=lambda r: r["output_len"])
            period = (long_["done_median_s"] - short["done_median_s"]) / (
                long_["output_len"] - short["output_len"])
            for r in pair:
                r["pair_period_ms"] = period * 1e3


def add_predictions(rows, path):
    """Each row's predicted period from a blind decode-steps file, and the error."""
    try:
        with open(path) as f:
            steps = {int(s["batch"]): s for s in json.load(f)["steps"]}
    except (OSError, ValueError, KeyError, TypeError) as e:
        fail(f"{path}: not a decode-steps prediction ({e})")
    for r in rows:
        step = steps.get(r["requests"])
        period = r.get("pair_period_ms") or r["streamed_gap_ms"]
        if step is None or period is None:
            continue
        predicted = step["dummy_ms"]
        r["predicted_ms"], r["error"] = predicted, predicted / period - 1
        r["loaded_ms"] = step["loaded_ms"]


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("run")
    ap.add_argument("--blind", metavar="FILE")
    ap.add_argument("--json", action="store_true")
    args = ap.parse_args()
    run = read_run(args.run)
    rows = [s for s in map(summarise, run.get("records", [])) if s]
    if not rows:
        fail(f"{args.run}: no fixed-shape workload kept its text (a plan's keep_text)")
    pair_periods(rows)
    if args.blind:
        add_predictions(rows, args.blind)
    if args.json:
        json.dump(rows, sys.stdout, indent=1)
        print()
        return
    print("workload                     reqs  temp   distinct/step (median, max)  2-cycles  "
          "stamped  period")
    for r in rows:
        period = r.get("pair_period_ms") or r["streamed_gap_ms"]
        temp = "default" if r["temperature"] is None else f"{r['temperature']:g}"
        blind = (f"  predicted {r['predicted_ms']:.2f} ms ({100 * r['error']:+.1f} %), "
                 f"trained routing {r['loaded_ms']:.2f} ms"
                 if "predicted_ms" in r else "")
        counted = r.get("routed")
        if counted:
            blind += (f"  experts a layer: decode {counted['decode_experts_median']:.1f}, "
                      f"a prompt {counted['prompt_experts']:.1f}, "
                      f"all prompts {counted['prompt_union_experts']:.1f}")
        print(f"{r['workload']:<28} {r['requests']:>4} {temp:>7} {r['distinct_median']:>12g} "
              f"{r['distinct_max']:>6}        {100 * r['two_cycle_share']:>5.0f} %  "
              + (f"{r['stamped_step_ms']:5.2f} ms  " if r["stamped_step_ms"] is not None
                 else "      -   ")
              + (f"{period:.2f} ms" if period is not None else "-") + blind)


if __name__ == "__main__":
    main()
