#!/usr/bin/env python3
"""Writes the engine-probe plans gpu-probes/plans/engine-dsv2l-LABEL.json (issue "Real vLLM as the ground truth").

Every bench-serve workload gets its own seed: `vllm bench serve`'s random dataset builds request i's prompt
from the seed alone, so two runs with one seed share prompts (a shorter prompt is a prefix of the longer one)
and the second run's prefills are prefix-cache hits. Fixed shapes are repeated (names -a, -b, -c) so a
single JIT compile or scheduling hiccup cannot price a term; warm-ups touch every fused-MoE config bucket first.
usage: make-engine-plans.py [LABEL...]   (default: every label below)
"""
import json, sys, zlib, pathlib

LIMITS = {  # label: (max_num_seqs, max_num_batched_tokens)
    "graph-64-64": (64, 64), "eager-64-64": (64, 64), "graph-256-2048": (256, 2048),
    "eager-256-2048": (256, 2048),
    "cal-graph-256-8192": (256, 8192), "cal-eager-256-8192": (256, 8192),
    "cal2-graph-256-2048": (256, 2048), "cal2-eager-256-2048": (256, 2048),
    "cal2-piecewise-256-2048": (256, 2048),
    # Repeats on fresh servers. The first batch's 256/8192 plans gave every workload seed 1 (shared
    # prompts, so later runs hit the prefix cache): their repeats take per-workload seeds from their
    # own labels, same shapes. graph-64-64 and graph-256-2048 repeat with their plans unchanged.
    "graph-256-8192-r2": (256, 8192), "eager-256-8192-r2": (256, 8192),
    # vLLM's own defaults (sixth batch): no limit or mode flags at all (FULL_AND_PIECEWISE, 1024 seqs and
    # 8192 tokens on an H200), and FULL_AND_PIECEWISE at the seed recipe's 64/64, where every mixed
    # step fits the piecewise graphs.
    "piecewise-1024-8192": (1024, 8192), "piecewise-64-64": (64, 64),
    # Seventh batch: mixed steps within the piecewise graphs at the seed recipe's 64/64 budget.
    "cal3-piecewise-64-64": (64, 64),
    # Eighth batch: requests injected close together (a step's tokens leave only once the next step
    # is issued), beside one standing request, and lone prompts on the idle engine.
    "cal4-graph-256-2048": (256, 2048),
    # Ninth batch: vLLM's defaults again (a fresh server), judged workloads no earlier run used,
    # predicted before they ran.
    "piecewise-1024-8192-w2": (1024, 8192),
    # Tenth batch: the default server's mixed steps without graphs, 1,024-6,144-token prompts
    # injected beside 8 and 32 standing decodes (the ninth batch's pre-r12 found them unmeasured).
    "cal5-piecewise-1024-8192": (1024, 8192),
    # Planned, not yet run: the two disagreements docs/fidelity.md leaves open, one variable at a time.
    # The default server's steps past the largest capture size at the batch a few requests a second
    # keep, beside a calibration Poisson run on the same server and host.
    "cal6-piecewise-1024-8192": (1024, 8192),
    # Mixed 64-token steps at 64/64 with the prefill's prompt length and the decodes' context varied
    # apart.
    "cal7-piecewise-64-64": (64, 64),
    # Eleventh batch (cal6, cal7 ran): what the first step after an idle spell costs, by how long the
    # engine sat idle and by step kind (a piecewise graph or none), beside the same prompts on a
    # running engine, and two calibration Poisson runs on the same server and host.
    "cal8-piecewise-1024-8192": (1024, 8192),
    # Planned, not yet run (the sixth session's last device call ran past its limit): the same idle
    # spells and running-engine prompts on an eager server (the eleventh batch's pairs priced the
    # graph modes only).
    "cal9-eager-256-2048": (256, 2048),
    # Twelfth batch: the eager mixed step, each prompt length twice beside standing batches of 1, 4,
    # 16 and 64 (the eleventh batch's and cal2's single injections disagreed by batch).
    "cal10-eager-256-2048": (256, 2048),
    # What a decode's context costs a replayed FULL graph under vLLM's default FULL_AND_PIECEWISE
    # (only FULL_DECODE_ONLY servers had measured it): long-context decode bursts and the same
    # batches at 128-token contexts, on one server.
    "cal11-piecewise-1024-8192": (1024, 8192),
    # Thirteenth batch: FULL_DECODE_ONLY's steps that prefill 2,048-token prompts beside long-context
    # decodes, each step's period read from the microsecond stamps the probe now gives every log line.
    "cal12-graph-256-2048": (256, 2048),
    # Eager steps that continue a chunked prefill (a chunk with computed context) at the seed
    # recipe's 64/64 budget, stamped: the eager 64/64 servers' arrival-bound prefill runs stepped
    # slower than their own decode bursts.
    "cal13-eager-64-64": (64, 64),
    # Uniform decode batches of 256-1,024 on vLLM's defaults, stamped, streamed and unstreamed: the
    # batches past the 512-token capture size run the compiled model without graphs, and no table
    # had measured a decode step there (the model priced it as a mixed step).
    "cal14-piecewise-1024-8192": (1024, 8192),
    # Steps that prefill many requests at once, stamped: short prompts, and prompts the prefix cache
    # holds but for their last tokens (the first graph 256/8192 server's cached bench prompts
    # stepped far slower than their computed tokens price).
    "cal15-graph-256-8192": (256, 8192),
    # The front end's intake of prompts the prefix cache holds, against the same prompts cold: cal15's
    # cached calibration run took its 256 requests in one 964 ms block, 3.8 ms each.
    "cal16-graph-256-8192": (256, 8192),
    # FULL_DECODE_ONLY's arrival-bound decode runs against the same server's fixed shapes, stamped:
    # every judged graph server's `dec-r8` and `dec-r16` stepped slower than the model prices them
    # (TPOT 4-28 %, TTFT 9-67 % under), while cal12's calibration Poisson runs of long prompts came
    # in faster. Is the step of a Poisson run what the same server's fixed shapes price?
    "cal17-graph-256-8192": (256, 8192),
    # Tenth session: the seed recipe's 64/64 limits on fresh servers, FULL_DECODE_ONLY and eager, with
    # judged workloads no earlier run used, predicted before they ran (traces/data/vllm/blind/).
    "graph-64-64-w3": (64, 64), "eager-64-64-w3": (64, 64),
    # Eleventh session: graph-64-64-w3's steps without graphs took 80-90 ms in its arrival-bound runs
    # and 58 ms in its concurrency-bound one, minutes apart. The load, or the host's phase? Lone
    # chunks and chunks beside 2 and 8 decodes interleaved within seconds, then calibration Poisson
    # and concurrency-bound runs of the judged shapes on seeds of their own, one server, stamped.
    "cal18-graph-64-64": (64, 64), "cal18-graph-64-64-r2": (64, 64),
    # cal18 found one 64-token step without graphs at 52-130 ms within a minute on one server. Does
    # it follow the host's CPU speed of the moment? The same steps, longer, while host-sampler.py
    # reads the CPU's speed five times a second (SAMPLER=0.2).
    "cal19-graph-64-64": (64, 64),
    # cal19's CPU readings were taken on the sampler's own CPU, not the engine core's. The same
    # steps beside proc-sampler.py (PROCS=0.2): the engine core's threads' time on a CPU, waiting
    # for one, and asleep; every CPU's steal; the GPU's clocks (nvidia-smi).
    "cal20-graph-64-64": (64, 64),
    # Low-load calibration runs stepped slower than saturated ones on three of four 64/64 servers,
    # where the engine core's thread was on a CPU 29 % of the time against 100 %. The same 64-token
    # chunk with the engine idle between prompts, busy between them, and busy throughout, interleaved.
    "cal21-graph-64-64": (64, 64),
    # Both graph 256/2048 servers ran the judged `dec-sat` at 8.9 and 9.1 thousand tokens/s where
    # the model gives 10.9: its prefill steps hold 2,048 tokens beside a hundred or more decodes, a
    # shape no fixed shape measured (replay-vllm's repeats, docs/fidelity.md).
    "cal22-graph-256-2048": (256, 2048),
    # The dummy model's replayed decode steps read fewer experts than even routing picks
    # (sim/scripts/decode_experts.py). Decode bursts greedy, at temperature 1, at vLLM's default and
    # at temperature 2, every request's generated text kept (sim/scripts/decode_tokens.py).
    "cal23-graph-256-2048": (256, 2048),
    # cal23's bursts again, without its bench runs (run 2026-12-05 as a device-side edit of cal23).
    "cal24-graph-256-2048": (256, 2048),
    # The experts the decode steps reach, counted from the routing vLLM returns
    # (--enable-return-routed-experts), where decode_experts.py infers them from the periods.
    "cal25-graph-256-2048": (256, 2048),
    # What a decode adds to a step without graphs beside 1 to 64 decodes, on one server: a line,
    # or a rise that stops past a few decodes?
    "cal26-graph-256-2048": (256, 2048),
    # cal26 found a 256- and a 1,024-token prefill's step flat from 1 to 64 decodes beside it, where
    # the 64/64 servers' pairs (2 and 8 decodes) say 0.23-2.83 ms a decode: is that the small prefill
    # or the budget? 64- and 128-token prompts beside 1-64 decodes on a 2K server (cal27), and
    # 128-token prompts chunked beside 1-56 decodes at the 64-token budget (cal28).
    "cal27-graph-256-2048": (256, 2048),
    "cal28-graph-64-64": (64, 64),
    # Both judged FULL_DECODE_ONLY 256/2048 servers ran `pre-r4` at 70.9 and 23.2 ms TPOT, where
    # cal12's calibration runs of the same shape ran 4.4 and 7.9 ms (the model 7.7); both judged
    # 256/8192 servers ran `dec-r16` at 17.2 and 18.2 ms, where cal17's ran 14.1 and 13.2 (the model
    # 11.6-13.9). The judged plans ran those shapes after `dec-r8` and `dec-sat` (and `mix-c64`), the
    # calibration plans after fixed shapes only. The order, or the server? The judged plans' six
    # bench shapes in the judged order, twice, on seeds of their own (cal29, cal30).
    "cal29-graph-256-2048": (256, 2048),
    "cal30-graph-256-8192": (256, 8192),
    # Twenty-first session: limits no earlier server ran (128 seqs, 4,096 tokens), FULL_DECODE_ONLY
    # and eager, judged workloads predicted before they ran (traces/data/vllm/blind/), after a
    # warm-up that `afd-sim warm-up` says leaves no fused-MoE kernel to compile on first use; the
    # servers log every Triton compile after start-up (--jit-monitor-verbose), which checks it.
    "graph-128-4096-w4": (128, 4096), "eager-128-4096-w4": (128, 4096),
    # graph-128-4096-w4's `pre-sat` stepped about 125 ms a 4,096-token step where its eager twin took
    # about 80 and its own warm-up bursts of fresh 128-token prompts 76-86: every step of that run
    # prefilled a chunk with computed context (3,072-token prompts at a 4,096 budget). Bursts of the
    # same tokens a step with and without such chunks, interleaved on one FULL_DECODE_ONLY server.
    "cal32-graph-128-4096": (128, 4096),
    # An AFD pair issues its steps without graphs at vLLM's pace, each role its part of a plain step
    # (docs/fidelity.md, "AFD roles at vLLM's host pace"); the part is the lean costs' until measured.
    # An eager server with vLLM's torch profiler on: the plan's fixed shapes unprofiled, then
    # profile-modules.py (the label's hook) profiles the same shapes and divides each step by module.
    "cal35-eager-profile-256-2048": (256, 2048),
    # `vllm bench serve`'s burst reaches the server only once its client has opened a connection
    # for every request but the first: bursts of 64-512 at once, stamped (twenty-seventh session).
    "cal38-graph-256-2048": (256, 2048),
    # Eager steps of 3,072-8,192 tokens beside 1-64 decodes, stamped: no calibration step of that
    # size had been measured (the judged eager 128/4096 pre-sat stepped at 83.6 ms, the model 75.0).
    "cal39-eager-256-8192": (256, 8192),
    "cal40-eager-256-8192": (256, 8192),
    "cal41-eager-256-8192": (256, 8192),
    "cal42-eager-256-8192": (256, 8192),
    "cal43-eager-256-2048": (256, 2048),
}

# `afd-sim warm-up --serve-args 'vllm serve M --max-num-seqs 128 --max-num-batched-tokens 4096 ...'`
# (the JIT rule of sim/src/model/engine/jit.rs; a test in sim/cli holds these lists to it).
JIT_PROMPTS = {
    "graph-128-4096-w4": (11, 33, 65, 97, 129, 136, 513),
    "eager-128-4096-w4": (1, 3, 8, 11, 33, 40, 65, 72, 97, 129, 136, 513),
}

def plan_document(warm, work):
    return {"format": "afd-vllm-plan", "schema_version": 1, "warmup": warm, "workloads": work}

def seed(label, name):
    return zlib.crc32(f"{label}/{name}".encode())

def fx(label, name, input_len, output_len, num_prompts, timeout_s=60, same_as=None, text=False, stream=True,
       temperature=None, keep_text=False, routed_experts=False):
    w = {"name": name, "kind": "fixed-shape", "input_len": input_len, "output_len": output_len,
         "num_prompts": num_prompts, "seed": seed(label, same_as or name), "timeout_s": timeout_s}
    if text: w["prompt_form"] = "text"
    if not stream: w["stream"] = False
    if temperature is not None: w["temperature"] = temperature
    if keep_text: w["keep_text"] = True
    if routed_experts: w["routed_experts"] = True
    return w

def bench(label, name, input_len, output_len, num_prompts, timeout_s, rate=None, conc=None):
    w = {"name": name, "kind": "bench-serve", "input_len": input_len, "output_len": output_len,
         "num_prompts": num_prompts, "seed": seed(label, name) % 100000 + 1000, "timeout_s": timeout_s}
    if rate is not None: w["request_rate"] = rate
    if conc is not None: w["max_concurrency"] = conc
    return w

def calibration_plan(label):
    """Fixed shapes only, for the terms the first plans could not price: the streaming path's cost
    per token (the same bursts streamed and not), `vllm bench serve`'s own client (bench runs of those
    shapes, marked calibration and never judged), the tokenizer's share of the front end (cached text
    bursts beside cached token-id bursts), and decode over long contexts."""
    warm = [fx(label, "warm-p16", 16, 4, 1), fx(label, "warm-p512", 512, 4, 1),
            fx(label, "warm-p2048", 2048, 2, 1, 90)]
    warm += [fx(label, f"warm-d{b}", 64, 8, b) for b in (1, 4, 16, 64, 256)]
    work = []
    for b in (64, 256):
        work += [fx(label, f"fx-d{b}-c128-o128", 128, 128, b, 90),
                 fx(label, f"fx-d{b}-c128-o128-ns", 128, 128, b, 90, stream=False),
                 fx(label, f"fx-d{b}-c128-o64-ns", 128, 64, b, 90, stream=False)]
    for b in (64, 256):
        w = bench(label, f"cal-bench-d{b}-c128-o128", 128, 128, b, 150)
        w["calibration"] = True
        work.append(w)
    for form in ("ids", "text"):
        t = form == "text"
        tag = "-text" if t else ""
        for n, c in ((256, 256), (64, 2048)):
            name = f"fx-fe{tag}-n{n}-c{c}"
            work += [fx(label, f"{name}-warm", c, 2, n, 90, text=t),
                     fx(label, name, c, 2, n, 90, same_as=f"{name}-warm", text=t)]
    work += [fx(label, "fx-d64-c2048-o64", 2048, 64, 64, 90), fx(label, "fx-d16-c4096-o64", 4096, 64, 16, 90)]
    return plan_document(warm, work)

def inject_burst(label, name, batch, output_len, prompts, start_s=0.5, every_s=0.3, stream=True,
                 standing_len=128):
    """A standing burst of `batch` prompts of `standing_len` tokens decoding `output_len` tokens, and
    one 4-token request of each length in `prompts` sent into it `every_s` apart: each is prefilled in
    a mixed step beside the standing decode batch, whose streams show that step's period as one long
    gap."""
    w = fx(label, name, standing_len, output_len, batch, 90, stream=stream)
    w["inject"] = [{"at_s": round(start_s + k * every_s, 3), "input_len": p, "output_len": 4}
                   for k, p in enumerate(prompts)]
    return w

def cal2_plan(label):
    """Mixed steps beside a standing decode batch (the step that prefills a request arriving while
    others decode, which the lone-prompt records could not price), the same bursts streamed and not
    (does the streaming path slow the engine?), `vllm bench serve`'s client beside the probe's on the
    same shape, interleaved (the client's share of a host-bound step), and more decode bursts."""
    seqs, budget = LIMITS[label]
    eager = "eager" in label
    warm = [fx(label, f"warm-p{n}", n, 2, 1, 90) for n in (16, 48, 100, 200, 300, 512, 700, 1024, 2048)]
    warm += [fx(label, f"warm-d{b}", 64, 8, b) for b in (1, 4, 16, 64, 256)]
    warm += [inject_burst(label, "warm-inject", 16, 96, (64, 300, 2048), 0.3, 0.3)]
    sizes = (64, 256, 1024, 2048, 300)
    work = []
    if eager:
        for rep in "ab":
            work += [fx(label, f"fx-d64-c128-o96-{rep}", 128, 96, 64, 90)]
            w = bench(label, f"cal-bench-d64-c128-o96-{rep}", 128, 96, 64, 150)
            w["calibration"] = True
            work.append(w)
        work += [inject_burst(label, "fx-inj-b8-o96", 8, 96, (64, 2048, 300), 1.0, 1.6),
                 inject_burst(label, "fx-inj-b64-o96", 64, 96, (64, 2048, 300), 1.6, 1.6)]
        work += [fx(label, f"fx-d{b}-c128-o64", 128, 64, b, 90) for b in (1, 16, 256)]
        w = bench(label, "cal-bench-d256-c128-o64", 128, 64, 256, 150)
        w["calibration"] = True
        work.append(w)
    else:
        for b, out in ((8, 480), (64, 400), (200, 300)):
            work.append(inject_burst(label, f"fx-inj-b{b}-o{out}", b, out, sizes))
        work.append(inject_burst(label, "fx-inj-b64-o400-ns", 64, 400, sizes, stream=False))
        for b in (128, 256):
            work += [fx(label, f"fx-d{b}-c128-o256", 128, 256, b, 90),
                     fx(label, f"fx-d{b}-c128-o256-ns", 128, 256, b, 90, stream=False),
                     fx(label, f"fx-d{b}-c128-o128-ns", 128, 128, b, 90, stream=False)]
            w = bench(label, f"cal-bench-d{b}-c128-o256", 128, 256, b, 150)
            w["calibration"] = True
            work.append(w)
        work += [fx(label, f"fx-d{b}-c128-o64", 128, 64, b, 90) for b in (1, 16, 32)]
    return plan_document(warm, work)

def cal3_plan(label):
    """Mixed steps at a 64-token budget under FULL_AND_PIECEWISE, where every step replays the full or
    the piecewise graphs: B standing decodes beside a prompt prefilled (64 - B) tokens a step, for B
    from 8 to 63 (max_num_seqs 64 leaves one slot). Every mixed step schedules 64 tokens, so the
    period's change with B is what a decode adds to a piecewise step beside the prefill, which the
    judged piecewise-64-64 saturated runs (63 decodes and one prefill token a step) found missing."""
    warm = [fx(label, f"warm-p{n}", n, 2, 1, 90) for n in (16, 48, 100, 200, 300, 512)]
    warm += [fx(label, f"warm-d{b}", 64, 8, b) for b in (1, 4, 16, 64)]
    warm += [inject_burst(label, "warm-inject", 16, 400, (64, 200), 1.5, 2.0)]
    work = []
    for b in (8, 32, 56, 63):
        # Injections after the standing prompts are all decoding (63 prompts of 128 tokens take
        # 126 steps of 64 tokens), one at a time: a 200-token prompt beside 63 decodes takes 200 steps.
        work.append(inject_burst(label, f"fx-inj-b{b}-o3000", b, 3000, (64, 200, 64), 2.5, 4.5))
    work += [fx(label, f"fx-d{b}-c128-o64", 128, 64, b, 90) for b in (1, 16, 63)]
    return plan_document(warm, work)

def cal4_plan(label):
    """Under asynchronous scheduling the engine core issues step n+1 before it waits for step n's
    tokens (vllm/v1/engine/core.py `step_with_batch_queue`), so a step's tokens leave only once the
    next step is issued: when that one is a host-bound mixed step (the compiled model without graphs,
    the piecewise graphs), the first request's first token waits for the second's step. Cascades
    inject two or three prompts 20-40 ms apart into 8 standing decodes (the second arrives while the
    first's step is issued), beside lone injections as controls; one standing request shows a
    running engine's first token at batch 1, and lone prompts on the idle engine what an idle start
    adds. The cascade records are never read into the step tables (their steps share stalls)."""
    warm = [fx(label, f"warm-p{n}", n, 2, 1, 90) for n in (16, 48, 100, 200, 300, 512, 700, 1024, 2048)]
    warm += [fx(label, f"warm-d{b}", 64, 8, b) for b in (1, 4, 16, 64, 256)]
    warm += [inject_burst(label, "warm-inject", 16, 96, (64, 300, 1024), 0.3, 0.3)]
    cascade = [(0.5, 256), (1.0, 256), (1.02, 256), (1.5, 256), (1.54, 256), (2.0, 256), (2.03, 256),
               (2.06, 256), (2.5, 64), (2.52, 64), (3.0, 1024), (3.5, 1024), (3.52, 256), (4.0, 256)]
    work = []
    for rep in "ab":
        w = fx(label, f"fx-cascade-b8-o2000-{rep}", 128, 2000, 8, 90)
        w["inject"] = [{"at_s": at, "input_len": n, "output_len": 4} for at, n in cascade]
        work.append(w)
    work.append(inject_burst(label, "fx-inj-b1-o1500", 1, 1500, (256, 256, 64, 1024, 300), 0.5, 0.5))
    for length in (64, 256, 1024):
        for rep in "abc":
            work.append(fx(label, f"fx-p{length}-{rep}", length, 4, 1, 90))
    return plan_document(warm, work)

def w2_plan(label):
    """Judged `vllm bench serve` runs of shapes and rates no earlier run used, on a fresh server with
    vLLM's defaults: longer prompts and outputs, a higher decode rate, a concurrency-bound long-prompt
    run and a saturated one. Warm-ups only besides (no fixed shape joins the profile)."""
    warm = [fx(label, "warm-p16", 16, 4, 1), fx(label, "warm-p512", 512, 4, 1),
            fx(label, "warm-p2048", 2048, 2, 1, 90), fx(label, "warm-p4096", 4096, 2, 1, 90)]
    warm += [fx(label, f"warm-d{b}", 64, 8, b) for b in (1, 4, 16, 64, 256, 512)]
    work = [bench(label, "e2e-dec-r32", 512, 256, 320, 150, rate=32.0),
            bench(label, "e2e-pre-r12", 2048, 64, 120, 120, rate=12.0),
            bench(label, "e2e-long-c32", 4096, 256, 96, 150, conc=32),
            bench(label, "e2e-chat-r4", 1024, 512, 40, 150, rate=4.0),
            bench(label, "e2e-sat-2k", 2048, 512, 256, 180)]
    return plan_document(warm, work)

def w3_plan(label):
    """Judged `vllm bench serve` runs at the seed recipe's 64/64 limits of shapes and rates no earlier
    run used, on a fresh server: short prompts at 2 req/s, a chat shape at 1 req/s, a concurrency-bound
    decode run and long prompts at 0.5 req/s. Warm-ups only besides (no fixed shape joins the
    profile)."""
    warm = [fx(label, "warm-p16", 16, 4, 1), fx(label, "warm-p512", 512, 4, 1),
            fx(label, "warm-p2048", 2048, 2, 1, 90)]
    warm += [fx(label, f"warm-d{b}", 64, 8, b) for b in (1, 4, 16, 64)]
    work = [bench(label, "e2e-dec-r2", 128, 128, 32, 150, rate=2.0),
            bench(label, "e2e-chat-r1", 512, 256, 16, 150, rate=1.0),
            bench(label, "e2e-dec-c32", 256, 64, 96, 150, conc=32),
            bench(label, "e2e-long-r0p5", 2048, 16, 8, 150, rate=0.5)]
    return plan_document(warm, work)

def w4_plan(label):
    """Judged `vllm bench serve` runs at limits no earlier server ran (128 seqs, 4,096 tokens a step),
    shapes and rates no earlier run used, on a fresh server. The warm-ups are the judged plans' and one
    lone prompt of each length `afd-sim warm-up` lists (`warm-jit-N`), then a prompt of twice the
    budget (its second chunk runs MLA's chunked-context path, whose mask kernel also compiles on first
    use): by the rule, no bench run meets a first-use compile."""
    seqs, budget = LIMITS[label]
    warm = [fx(label, "warm-p16", 16, 4, 1), fx(label, "warm-p512", 512, 4, 1),
            fx(label, "warm-p2048", 2048, 2, 1, 90)]
    warm += [fx(label, f"warm-d{b}", 128, 8, b) for b in (1, 4, 16, 64, 128)]
    warm += [fx(label, f"warm-jit-{n}", n, 2, 1) for n in JIT_PROMPTS[label]]
    warm.append(fx(label, f"warm-chunk-p{2 * budget}", 2 * budget, 2, 1, 90))
    work = [bench(label, "e2e-dec-r6", 384, 128, 60, 150, rate=6.0),
            bench(label, "e2e-dec-sat", 192, 192, seqs, 150),
            bench(label, "e2e-pre-r3", 1536, 24, 24, 150, rate=3.0),
            bench(label, "e2e-pre-sat", 3072, 24, 48, 150),
            bench(label, "e2e-mix-c32", 768, 96, 96, 150, conc=32),
            bench(label, "e2e-dec-r12", 96, 192, 120, 150, rate=12.0)]
    return plan_document(warm, work)

def cal32_plan(label):
    """FULL_DECODE_ONLY at 128/4096: prompts sent at once and answered with one token (no decode
    follows a prefill), so every step is a full-budget prefill. Aligned bursts (24 prompts of 4,096
    tokens: one whole prompt a step; 48 of 2,048: two) against split ones of the same tokens a step
    (32 of 3,072, 64 of 1,536: nearly every step continues a chunk whose earlier tokens are computed
    context, beside a fresh prompt), two rounds interleaved, after the warm-up `afd-sim warm-up`
    lists and one split burst (MLA's chunked-context mask kernel compiles on its first use). Sized to
    fit what is left of a session's device time after a fresh server's start."""
    warm = [fx(label, "warm-p16", 16, 4, 1)]
    warm += [fx(label, f"warm-jit-{n}", n, 2, 1) for n in JIT_PROMPTS["graph-128-4096-w4"]]
    warm.append(fx(label, "warm-split-3072-n8", 3072, 1, 8, 90))
    work = []
    for rep in "ab":
        for kind, length, n in (("al", 4096, 24), ("sp", 3072, 32), ("al", 2048, 48), ("sp", 1536, 64)):
            work.append(fx(label, f"fx-{kind}-p{length}-n{n}-{rep}", length, 1, n, 90, stream=False))
    return plan_document(warm, work)

def cal5_plan(label):
    """Mixed steps past the largest capture size on vLLM's default server (FULL_AND_PIECEWISE at
    1,024 seqs and 8,192 tokens): prompts of 1,024 to 6,144 tokens, each prefilled in one step
    without graphs, injected 0.6 s apart beside 8 and then 32 standing decodes (the pairs of one
    length price what a decode adds to such a step)."""
    warm = [fx(label, f"warm-p{n}", n, 2, 1, 90) for n in (16, 512, 1024, 2048, 3072, 4096, 6144)]
    warm += [fx(label, f"warm-d{b}", 64, 8, b) for b in (1, 8, 32, 64)]
    warm += [inject_burst(label, "warm-inject", 16, 400, (1024, 3072, 6144), 0.3, 0.4)]
    lengths = (1024, 2048, 3072, 4096, 6144, 2048, 4096)
    work = [inject_burst(label, f"fx-inj-b{b}-o1800", b, 1800, lengths, 0.5, 0.6) for b in (8, 32)]
    return plan_document(warm, work)

def cal6_plan(label):
    """vLLM's default server, where the fixed shapes and the low-load judged runs disagree on a step
    past the largest capture size (docs/fidelity.md, the tenth batch): prompts of 520-2,048 tokens
    injected one at a time beside 4 standing decodes (the batch a few requests a second keep), prompts
    within the capture size beside the same batch as controls, lone prompts on the idle engine, and a
    calibration `vllm bench serve` run of 1,024-token prompts at 4 req/s on the same server and host.
    No step table reads that run (only all-at-once calibration runs price a decode period) and nothing
    judges it: set beside this server's injected steps it says whether the step or the host moved."""
    warm = [fx(label, f"warm-p{n}", n, 2, 1, 90) for n in (16, 256, 512, 520, 768, 1024, 2048)]
    warm += [fx(label, f"warm-d{b}", 64, 8, b) for b in (1, 4, 8)]
    warm += [inject_burst(label, "warm-inject", 4, 400, (520, 1024, 2048), 0.3, 0.4)]
    past = (520, 640, 768, 1024, 2048, 520, 768, 1024, 2048)
    work = [inject_burst(label, "fx-inj-b4-o2500", 4, 2500, past, 0.5, 0.6),
            inject_burst(label, "fx-inj-b4-o1000-within", 4, 1000, (256, 384, 480, 256, 480), 0.5, 0.6)]
    for length in (1024, 2048):
        for rep in "abc":
            work.append(fx(label, f"fx-p{length}-{rep}", length, 4, 1, 90))
    w = bench(label, "cal-bench-p1024-r4", 1024, 32, 40, 120, rate=4.0)
    w["calibration"] = True
    work.append(w)
    return plan_document(warm, work)

def cal7_plan(label):
    """Mixed 64-token steps under FULL_AND_PIECEWISE at 64/64, where steps of one shape in the step log
    took 17.7 ms in `fx-d16-c512` and 12.8 ms in `fx-d16-c128` (docs/fidelity.md, "What is still
    wrong"): bursts of 16 prompts of 128, 256 and 512 tokens, and prompts of 128-512 tokens injected
    beside 8 standing decodes of short (128-token) and of long (512-token) prompts, so that the
    prefill's prompt length and the decodes' context vary one at a time."""
    warm = [fx(label, f"warm-p{n}", n, 2, 1, 90) for n in (16, 128, 256, 512)]
    warm += [fx(label, f"warm-d{b}", 64, 8, b) for b in (1, 8, 16)]
    work = [fx(label, f"fx-d16-c{c}", c, 16, 16, 90) for c in (128, 256, 512)]
    for standing in (128, 512):
        work.append(inject_burst(label, f"fx-inj-b8-s{standing}-o1500", 8, 1500,
                                 (128, 256, 512, 128, 512), 1.0, 1.0, standing_len=standing))
    return plan_document(warm, work)

def idle_spells(label, name, lengths, idles, service=None):
    """Lone 4-token requests of each length in `lengths` on an engine left idle for each spell in
    `idles` (seconds) before it: one 16-token request opens the workload and is done within 50 ms
    (`service[16]` where given), and each later request is sent its spell after the one before should
    be done (`service`, by default `IDLE_SERVICE_S`, allows for its prefill and three decodes). The
    record keeps every send and token time, so the spell actually met is read from the data, not from
    this plan."""
    service = service or IDLE_SERVICE_S
    w = fx(label, name, 16, 2, 1, 90)
    at, inject = service.get(16, 0.05), []
    for length in lengths:
        for idle in idles:
            at = round(at + idle, 3)
            inject.append({"at_s": at, "input_len": length, "output_len": 4})
            at += service[length]
    w["inject"] = inject
    return w

IDLE_SERVICE_S = {64: 0.05, 256: 0.06, 1024: 0.16, 2048: 0.2}

IDLE_LENGTHS = (64, 256, 1024, 2048)

def idle_pairs(label, idles, standing_output, service=None):
    """The workloads that pair a server's idle engine with its running one: lone prompts of
    `IDLE_LENGTHS` after each idle spell in `idles`, in two orders, and the same lengths injected 1 s
    apart beside one standing decode of `standing_output` tokens."""
    lengths = IDLE_LENGTHS
    return [idle_spells(label, "fx-idle-a", lengths, idles, service),
            idle_spells(label, "fx-idle-b", lengths[::-1], idles[::-1], service),
            inject_burst(label, f"fx-inj-b1-o{standing_output}", 1, standing_output,
                         lengths + lengths[::-1], 0.5, 1.0)]

def cal8_plan(label):
    """vLLM's default server: the idle engine's first step. The profile's idle start (about 7 ms) comes
    from lone prompts that one piecewise graph prefills, yet the sixth batch's lone 1,024-token prompts
    (a step without graphs) met no such cost beside injected ones. Lone prompts of 64 and 256 tokens
    (one piecewise step) and of 1,024 and 2,048 (no graph) after idle spells of 0.05-2.5 s, twice in two
    orders; the same lengths injected beside one standing decode (the running engine); calibration
    Poisson runs of 256-token prompts at 4 req/s and 1,024-token prompts at 2 req/s, which no table
    reads and nothing judges."""
    warm = [fx(label, f"warm-p{n}", n, 2, 1, 90) for n in (16,) + IDLE_LENGTHS]
    warm += [fx(label, f"warm-d{b}", 64, 8, b) for b in (1, 4)]
    warm += [inject_burst(label, "warm-inject", 1, 400, (256, 1024), 0.3, 0.4)]
    work = idle_pairs(label, (0.05, 0.3, 1.0, 2.5), 3000)
    for name, length, rate in (("cal-bench-p256-r4", 256, 4.0), ("cal-bench-p1024-r2", 1024, 2.0)):
        w = bench(label, name, length, 32, 40, 120, rate=rate)
        w["calibration"] = True
        work.append(w)
    return plan_document(warm, work)

EAGER_IDLE_SERVICE_S = {16: 0.3, 64: 0.3, 256: 0.35, 1024: 0.45, 2048: 0.55}

def cal9_plan(label):
    """An eager server (256/2048): lone prompts after idle spells and the same lengths beside one
    standing decode, as `cal8_plan` on vLLM's defaults, so that eager steps get the pairs that price
    a prefill beside no decode. Short: the session's last device minutes."""
    warm = [fx(label, f"warm-p{n}", n, 2, 1, 90) for n in (16,) + IDLE_LENGTHS]
    warm += [fx(label, "warm-d1", 64, 8, 1)]
    return plan_document(warm, idle_pairs(label, (0.05, 0.3, 1.0), 200, EAGER_IDLE_SERVICE_S))

def cal10_plan(label):
    """An eager server (256/2048): what a prefill adds to an eager step, measured often enough to tell
    a batch dependence from a host's drift. Prompts of `IDLE_LENGTHS` tokens, each twice (0.8 s apart,
    so each injected step has standing steps around it), beside standing batches of 1, 4, 16 and 64
    decodes of 128-token prompts. The warm-ups inject every length beside 1 and 64 decodes first: a
    mixed step's fused-MoE Triton kernels compile on the first use of their size (the eleventh
    batch's cal9 met 0.5-0.6 s compiles at its first 256- and 1,024-token injections)."""
    warm = [fx(label, f"warm-p{n}", n, 2, 1, 90) for n in (16,) + IDLE_LENGTHS]
    warm += [fx(label, f"warm-d{b}", 64, 8, b) for b in (1, 4, 16, 64)]
    warm += [inject_burst(label, f"warm-inject-b{b}", b, 60, IDLE_LENGTHS, 0.3, 0.5) for b in (1, 64)]
    lengths = IDLE_LENGTHS + IDLE_LENGTHS
    work = [inject_burst(label, f"fx-inj-b{b}-o200", b, 200, lengths, 0.5, 0.8) for b in (1, 4, 16, 64)]
    return plan_document(warm, work)

def cal11_plan(label):
    """vLLM's default server: uniform decode bursts of 16-128 requests at contexts of 1,024-4,096
    tokens (each prefilled in at most a quarter as many steps as it decodes, so the median gap is a
    decode step's), beside the same batches at 128-token contexts: what each context token adds to a
    replayed FULL graph's decode step under FULL_AND_PIECEWISE."""
    warm = [fx(label, f"warm-p{n}", n, 2, 1, 90) for n in (16, 2048)]
    warm += [fx(label, f"warm-d{b}", 64, 8, b) for b in (1, 16, 32, 64, 128)]
    warm += [fx(label, "warm-b16-c4096", 4096, 2, 16, 90)]
    work = []
    for b, c, out in ((64, 2048, 64), (16, 4096, 64), (32, 4096, 128), (128, 1024, 64)):
        work += [fx(label, f"fx-d{b}-c{c}-o{out}", c, out, b, 90),
                 fx(label, f"fx-d{b}-c128-o{out}", 128, out, b, 90)]
    return plan_document(warm, work)

def cal12_plan(label):
    """FULL_DECODE_ONLY at 256/2048, with every log line stamped to the microsecond (the probe sets
    VLLM_LOGGING_PREFIX), so each step's period is read from the step log itself, not from the
    clients' token times: steps that prefill 2,048-token prompts beside decodes of 2,048-token
    contexts. Sixty-four such prompts at once, twice (their steady steps hold two chunks beside 15
    decodes, and took 75-120 ms on one server); the same prompts injected one at a time beside 1, 4
    and 16 standing decodes of 2,048-token contexts; and calibration `vllm bench serve` runs of
    2,048-token prompts at 4 req/s (two seeds), 8 req/s and all at once, which no table reads and
    nothing judges (the graph 256/2048 servers' judged `pre-r4` stepped at about 180 ms, per
    second-resolution log stamps, where the fixed shapes priced 81 ms)."""
    warm = [fx(label, f"warm-p{n}", n, 2, 1, 90) for n in (16, 64, 256, 1024, 2048)]
    warm += [fx(label, f"warm-d{b}", 64, 8, b) for b in (1, 4, 16, 64)]
    warm += [inject_burst(label, f"warm-inject-b{b}", b, 120, (2048, 2048, 1024), 0.3, 0.3,
                          standing_len=2048) for b in (1, 16)]
    warm += [fx(label, "warm-d64-c2048", 2048, 4, 64, 90)]
    work = [fx(label, f"fx-d64-c2048-{rep}", 2048, 16, 64, 90) for rep in "ab"]
    for b in (1, 4, 16):
        work.append(inject_burst(label, f"fx-inj-b{b}-s2048-o800", b, 800,
                                 (2048, 2048, 2048, 2048, 1024, 256), 0.5, 0.5, standing_len=2048))
    for name, rate in (("cal-bench-p2048-r4-a", 4.0), ("cal-bench-p2048-r4-b", 4.0),
                       ("cal-bench-p2048-r8", 8.0), ("cal-bench-p2048-sat", None)):
        w = bench(label, name, 2048, 32, 64 if rate is None else 40, 120, rate=rate)
        w["calibration"] = True
        work.append(w)
    return plan_document(warm, work)

def cal13_plan(label):
    """Chunked prefill at a 64-token budget with every log line stamped (the probe's
    VLLM_LOGGING_PREFIX), so each chunk's step period is read from the step log: lone prompts of
    1,024 and 256 tokens (16 and 4 chunks, the first without computed context, the rest with 64-960
    tokens of it) and of 64 tokens (one chunk, none), three times each; the same lengths injected
    1.2 s apart beside 1 and 4 standing decodes; and a calibration `vllm bench serve` run of
    1,024-token prompts at 1 req/s (its own seed), which no table reads and nothing judges."""
    warm = [fx(label, f"warm-p{n}", n, 2, 1, 90) for n in (16, 64, 256, 1024)]
    warm += [fx(label, f"warm-d{b}", 64, 8, b) for b in (1, 4)]
    warm += [inject_burst(label, "warm-inject", 1, 40, (64, 1024), 0.3, 0.5)]
    work = []
    for length in (1024, 256, 64):
        for rep in "abc":
            work.append(fx(label, f"fx-p{length}-{rep}", length, 4, 1, 90))
    for b in (1, 4):
        work.append(inject_burst(label, f"fx-inj-b{b}-o120", b, 120, (1024, 64, 1024, 256), 0.5, 1.2))
    w = bench(label, "cal-bench-p1024-r1", 1024, 32, 16, 150, rate=1.0)
    w["calibration"] = True
    work.append(w)
    return plan_document(warm, work)

def cal14_plan(label):
    """vLLM's default server (1024/8192, FULL_AND_PIECEWISE, graphs up to 512 tokens) with every log
    line stamped: uniform decode batches of 256, 512, 768 and 1,024 requests of 128-token prompts,
    each streamed (128 tokens) and unstreamed at 64 and 192 tokens (the unstreamed pair's
    difference over 128 tokens is a step of the engine without the stream's front-end cost, and
    each prefills in 4-16 steps against 64-192 decode steps); a calibration `vllm bench serve` run
    of 1,024 such prompts at once, which nothing judges (sent at once, it may price the front
    end's cost per streamed token, `stream_token_s`)."""
    warm = [fx(label, f"warm-p{n}", n, 2, 1, 90) for n in (16, 2048)]
    warm += [fx(label, f"warm-d{b}", 64, 8, b, 90) for b in (1, 64, 256, 512, 768, 1024)]
    work = []
    for b in (256, 512, 768, 1024):
        work += [fx(label, f"fx-d{b}-c128-o128", 128, 128, b, 90),
                 fx(label, f"fx-u{b}-c128-o64", 128, 64, b, 90, stream=False),
                 fx(label, f"fx-u{b}-c128-o192", 128, 192, b, 90, stream=False)]
    w = bench(label, "cal-bench-d1024-c128-o128", 128, 128, 1024, 150)
    w["calibration"] = True
    work.append(w)
    return plan_document(warm, work)

def cal15_plan(label):
    """FULL_DECODE_ONLY at 256/8192 with every log line stamped: bursts whose steps prefill tens of
    requests at once, each request few tokens. Uncached 16-token prompts (no context), and prompts
    of 256 and 1,024 tokens sent a second time, when the prefix cache holds all but their last
    block (16 tokens computed beside 240 or 1,008 cached). The front end takes the requests in one
    at a time, so a step holds what reached the engine while the last one ran: the stamps give each
    step's period beside its count of prefill requests. Then two calibration `vllm bench serve`
    runs on one seed, which nothing judges (the one sent at once may price the front end's cost
    per streamed token): 80 prompts of 256 tokens at 8 req/s
    and 256 such prompts at once (the first 80 then cached), the judged first graph server's
    `dec-r8`/`dec-sat` pair on a seed of its own."""
    warm = [fx(label, f"warm-p{n}", n, 2, 1, 90) for n in (16, 256, 2048)]
    warm += [fx(label, f"warm-d{b}", 64, 8, b) for b in (1, 16, 64, 256)]
    warm += [fx(label, "warm-cache-n64-c256-a", 256, 2, 64, 90),
             fx(label, "warm-cache-n64-c256-b", 256, 8, 64, 90, same_as="warm-cache-n64-c256-a")]
    work = [fx(label, f"fx-many-n{n}-c16", 16, 8, n, 90) for n in (64, 128, 256)]
    for n, c in ((256, 256), (128, 1024), (64, 256)):
        first = f"fx-cache-n{n}-c{c}-a"
        work += [fx(label, first, c, 2, n, 90), fx(label, f"fx-cache-n{n}-c{c}-b", c, 8, n, 90, same_as=first)]
    work += same_seed_calibration(bench(label, "cal-bench-cache-r8", 256, 128, 80, 120, rate=8.0),
                                  bench(label, "cal-bench-cache-sat", 256, 256, 256, 120))
    return plan_document(warm, work)

def same_seed_calibration(first, then):
    """Two bench runs on the first's seed (the second's prompts begin with the first's, which the
    prefix cache then holds), both marked calibration."""
    then["seed"] = first["seed"]
    for w in (first, then):
        w["calibration"] = True
    return [first, then]

def cal16_plan(label):
    """FULL_DECODE_ONLY at 256/8192, stamped: how long the front end takes to let 256 requests sent
    at once reach the engine, with prompts the prefix cache does not hold and the same prompts sent
    again (all but the last block cached). Calibration `vllm bench serve` runs of 256 prompts of 256
    tokens (32 out) on two seeds, each run twice; the probe's own text and token-id bursts of the
    same shape, each twice. Nothing judges the bench runs (sent at once, they may price the front
    end's cost per streamed token)."""
    warm = [fx(label, f"warm-p{n}", n, 2, 1, 90) for n in (16, 256, 2048)]
    warm += [fx(label, f"warm-d{b}", 64, 8, b) for b in (1, 16, 64, 256)]
    work = []
    for form in ("text", "ids"):
        first = f"fx-{form}-n256-c256-a"
        work += [fx(label, first, 256, 8, 256, 90, text=form == "text"),
                 fx(label, f"fx-{form}-n256-c256-b", 256, 8, 256, 90, same_as=first, text=form == "text")]
    for seed_name in ("x", "y"):
        work += same_seed_calibration(bench(label, f"cal-bench-sat-{seed_name}-cold", 256, 32, 256, 120),
                                      bench(label, f"cal-bench-sat-{seed_name}-cached", 256, 32, 256, 120))
    return plan_document(warm, work)

def cal17_plan(label):
    """FULL_DECODE_ONLY at 256/8192 with every log line stamped: the fixed shapes that price an
    arrival-bound decode run's steps, then calibration Poisson runs of the judged `dec-r16` and
    `dec-r8` shapes on seeds of their own, on one server and host. Decode bursts of 16, 64 and 128
    requests of 128-token prompts, streamed and unstreamed (the decode table); 128- and 256-token
    prompts injected one at a time and two close together beside 16 and 64 standing decodes (the
    step that prefills beside decodes). The stamps give each step's period in the Poisson runs, to
    set beside what the fixed shapes price; nothing judges the bench runs and, sent at a rate, no
    table reads them."""
    warm = [fx(label, f"warm-p{n}", n, 2, 1, 90) for n in (16, 128, 256, 2048)]
    warm += [fx(label, f"warm-d{b}", 64, 8, b) for b in (1, 16, 64, 128, 256)]
    warm += [inject_burst(label, "warm-inject", 16, 96, (128, 256), 0.3, 0.3)]
    work = []
    for b in (16, 64, 128):
        work += [fx(label, f"fx-d{b}-c128-o256", 128, 256, b, 90),
                 fx(label, f"fx-u{b}-c128-o128", 128, 128, b, 90, stream=False),
                 fx(label, f"fx-u{b}-c128-o256", 128, 256, b, 90, stream=False)]
    for b in (16, 64):
        work.append(inject_burst(label, f"fx-inj-b{b}-o400", b, 400,
                                 (128, 256, 128, 256, 128, 256), 0.5, 0.4))
        work.append(inject_burst(label, f"fx-inj2-b{b}-o400", b, 400,
                                 (128, 128, 256, 256), 0.5, 0.02))
    for name, inp, out, n, rate in (("cal-bench-dec-r16-a", 128, 256, 160, 16.0),
                                    ("cal-bench-dec-r16-b", 128, 256, 160, 16.0),
                                    ("cal-bench-dec-r8", 256, 128, 80, 8.0)):
        w = bench(label, name, inp, out, n, 120, rate=rate)
        w["calibration"] = True
        work.append(w)
    return plan_document(warm, work)

def warmups_64_64(label, prompt_lengths):
    """Warm-ups of a server at 64/64 whose plan injects prompts beside 2-32 standing decodes: one
    prompt of each length, decode bursts of 1, 2, 8 and 32, and a burst with injections."""
    warm = [fx(label, f"warm-p{n}", n, 2, 1, 90) for n in prompt_lengths]
    warm += [fx(label, f"warm-d{b}", 64, 8, b) for b in (1, 2, 8, 32)]
    warm.append(inject_burst(label, "warm-inject", 8, 300, (128, 1024), 1.5, 0.5))
    return warm

def cal18_plan(label):
    """FULL_DECODE_ONLY at 64/64 (the seed recipe's limits), every log line stamped: does a 64-token
    step without graphs cost more at low load? Three rounds, seconds apart, of a lone 1,024-token
    prompt (16 chunks beside no decode, the first after an idle engine) and the same prompt with two
    128-token ones injected beside 2 and beside 8 standing decodes (a 56-62-token chunk beside
    them); then calibration runs of the judged `dec-r2`, `dec-c32` and `long-r0p5` shapes on seeds of
    their own, the arrival-bound ones either side of the concurrency-bound one. Nothing judges the
    bench runs and, sent at a rate or a concurrency, no table reads them: their stamps give the
    periods of their steps, to set beside the fixed shapes'."""
    warm = warmups_64_64(label, (16, 128, 256, 1024, 2048))
    work = []
    for rep in "abc":
        work.append(fx(label, f"fx-p1024-{rep}", 1024, 4, 1, 90))
        for b in (2, 8):
            w = inject_burst(label, f"fx-inj-b{b}-o1500-{rep}", b, 1500, (1024, 128, 128))
            # The long prompt first; the short ones once its 17 chunks are done, apart.
            w["inject"] = [dict(i, at_s=at) for i, at in zip(w["inject"], (2.0, 3.8, 4.3))]
            work.append(w)
    for name, inp, out, n, rate, conc in (("cal-bench-dec-r2-a", 128, 128, 32, 2.0, None),
                                          ("cal-bench-dec-c32", 256, 64, 96, None, 32),
                                          ("cal-bench-dec-r2-b", 128, 128, 32, 2.0, None),
                                          ("cal-bench-long-r0p5", 2048, 16, 8, 0.5, None)):
        w = bench(label, name, inp, out, n, 150, rate=rate, conc=conc)
        w["calibration"] = True
        work.append(w)
    return plan_document(warm, work)

def cal19_plan(label):
    """FULL_DECODE_ONLY at 64/64, stamped, beside a CPU-speed sampler: six rounds of a lone
    2,048-token prompt (32 chunks beside no decode) and a 1,024-token one injected beside 2 and
    beside 8 standing decodes, then a calibration concurrency-bound run of the judged `dec-c32`
    shape on a seed of its own: minutes of steps without graphs whose periods the stamps give, to
    set against the sampler's readings at their times. Nothing judges the bench run and no table
    reads it."""
    warm = warmups_64_64(label, (16, 128, 1024, 2048))
    work = []
    for rep in "abcdef":
        work.append(fx(label, f"fx-p2048-{rep}", 2048, 4, 1, 90))
        for b in (2, 8):
            work.append(inject_burst(label, f"fx-inj-b{b}-o1200-{rep}", b, 1200, (1024,), 2.0))
    w = bench(label, "cal-bench-dec-c32", 256, 64, 96, 150, conc=32)
    w["calibration"] = True
    work.append(w)
    return plan_document(warm, work)

def cal20_plan(label):
    """cal19's steps (six rounds of lone and injected prompts without graphs, and the `dec-c32`
    calibration run) with a calibration Poisson run of the judged `dec-r2` shape before the last,
    for proc-sampler.py's readings of where the engine core's thread spent each step: low load is
    where the profile underpriced FULL_DECODE_ONLY's 64/64 servers. Nothing judges the bench runs
    and no table reads them."""
    document = cal19_plan(label)
    w = bench(label, "cal-bench-dec-r2", 128, 128, 32, 150, rate=2.0)
    w["calibration"] = True
    document["workloads"].insert(len(document["workloads"]) - 1, w)
    return document

def cal21_plan(label):
    """FULL_DECODE_ONLY at 64/64 beside proc-sampler.py: does a 64-token step without graphs cost
    more when the engine idles between prompts? Five interleaved rounds of ten 128-token prompts
    0.6 s apart on an idle engine (each prefilled in two chunks, then idle for about 0.4 s), the same
    ten 0.15 s apart (the engine never idles), and a lone 2,048-token prompt (32 chunks back to
    back); then calibration runs of the judged `dec-r2` and `dec-c32` shapes on seeds of their own.
    Nothing judges the bench runs and no table reads them."""
    warm = warmups_64_64(label, (16, 128, 2048))
    work = []
    for rep in "abcde":
        work.append(inject_burst(label, f"fx-sparse-{rep}", 1, 2, (128,) * 10, 0.3, 0.6, standing_len=16))
        work.append(inject_burst(label, f"fx-dense-{rep}", 1, 2, (128,) * 10, 0.3, 0.15, standing_len=16))
        work.append(fx(label, f"fx-p2048-{rep}", 2048, 4, 1, 90))
    for name, inp, out, n, rate, conc in (("cal-bench-dec-r2", 128, 128, 32, 2.0, None),
                                          ("cal-bench-dec-c32", 256, 64, 96, None, 32)):
        w = bench(label, name, inp, out, n, 150, rate=rate, conc=conc)
        w["calibration"] = True
        work.append(w)
    return plan_document(warm, work)

def cal22_plan(label):
    """FULL_DECODE_ONLY at 256/2048 beside proc-sampler.py: 2,048-token prompts injected one at a
    time beside 64, 128 and 240 standing decodes of 256-token prompts (contexts 256-650 while the
    injections run), three rounds, and a calibration run of the judged `dec-sat` shape (256 prompts
    of 256 tokens, 256 out, all at once) on a seed of its own: the step that prefills 2,048 tokens
    beside many decodes, which the table prices from steps beside at most 64. Nothing judges the
    bench run and no table reads it."""
    warm = [fx(label, f"warm-p{n}", n, 2, 1, 90) for n in (16, 256, 2048)]
    warm += [fx(label, f"warm-d{b}", 256, 8, b) for b in (1, 16, 64, 128, 240)]
    warm.append(inject_burst(label, "warm-inject", 64, 200, (2048, 1024), 2.0, 0.5, standing_len=256))
    work = []
    for rep in "abc":
        for b in (64, 128, 240):
            start = 1.0 + b * 256 / 2048 * 0.1  # after the standing prompts' own prefill steps
            work.append(inject_burst(label, f"fx-inj-b{b}-s256-o400-{rep}", b, 400,
                                     (2048, 2048, 2048, 2048), round(start, 1), 0.6,
                                     standing_len=256))
    w = bench(label, "cal-bench-dec-sat", 256, 256, 256, 120)
    w["calibration"] = True
    work.append(w)
    return plan_document(warm, work)

def cal23_plan(label):
    """FULL_DECODE_ONLY at 256/2048: decode bursts of 128-token prompts, 256 out, of 16 and 64
    requests streamed (their gaps are the step) and of 128 and 240 unstreamed in pairs of 128 and 256
    out (the difference of their end times is 128 steps), greedy (temperature 0), at temperature 1,
    at vLLM's default (none sent, as every earlier fixed shape) and at temperature 2, vLLM's highest
    (it refuses more: the run of 2026-12-05 asked for 1000 in its `thot` workloads and all failed).
    Every request keeps its generated text: the distinct tokens each decode step feeds the experts.
    Then calibration bench runs of 128, 192 and 256 streams: the front end's cost per streamed token
    by open streams."""
    return plan_document(*decode_bursts(label, bench_runs=True))

def cal24_plan(label):
    """cal23's decode bursts without its calibration bench runs: the rerun made on 2026-12-05
    (traces/data/vllm/PROVENANCE.md, twenty-third batch)."""
    return plan_document(*decode_bursts(label, bench_runs=False))

def decode_bursts(label, bench_runs):
    temps = (("t0", 0), ("t2", 2))
    warm = [fx(label, "warm-p16", 16, 2, 1, 90)]
    warm += [fx(label, f"warm-d{b}-{tag}", 128, 8, b, temperature=t)
             for b in (1, 16, 64, 128, 240) for tag, t in temps]
    work = []
    for b in (16, 64):
        for tag, t in (("t0", 0), ("t1", 1), ("tdefault", None), ("t2", 2)):
            work.append(fx(label, f"fx-d{b}-{tag}-o256", 128, 256, b, 90, temperature=t, keep_text=True))
    for b in (128, 240):
        for tag, t in temps:
            for out in (128, 256):
                work.append(fx(label, f"fx-d{b}-{tag}-o{out}-ns", 128, out, b, 90, stream=False,
                               temperature=t, keep_text=True))
    # The front end's cost per streamed token by open streams, on one server (docs/fidelity.md,
    # "What is still wrong": measured at 256 streams only).
    for b in (128, 192, 256) if bench_runs else ():
        w = bench(label, f"cal-bench-d{b}-c128-o256", 128, 256, b, 120)
        w["calibration"] = True
        work.append(w)
    return warm, work

def cal25_plan(label):
    """FULL_DECODE_ONLY at 256/2048 on a server started with --enable-return-routed-experts: count
    the experts the dummy model's decode steps and prompts reach, where decode_experts.py infers
    them from step periods (6 / 10.6 / 15.4 / 25.3 / 39.9 at 1 / 16 / 64 / 128 / 256 requests).
    Unstreamed bursts of 128-token prompts, 64 out, greedy and at temperature 2, of 1 to 240
    requests, with their text. The server copies every token's routing to the host each step, so
    its steps price nothing (engine-profile refuses the file): commit it under
    traces/data/vllm/routing/, away from the profile's runs."""
    warm = [fx(label, "warm-p16", 16, 2, 1, 90, stream=False, routed_experts=True)]
    warm += [fx(label, f"warm-d{b}", 128, 8, b, stream=False, routed_experts=True)
             for b in (1, 16, 64, 128, 240)]
    work = []
    for b in (1, 16, 64, 128, 240):
        for tag, t in (("t0", 0), ("t2", 2)):
            work.append(fx(label, f"fx-d{b}-{tag}-o64", 128, 64, b, 90, stream=False,
                           temperature=t, keep_text=True, routed_experts=True))
    return plan_document(warm, work)

def beside_decodes(label, prompts):
    """Three interleaved rounds of bursts of 1 to 64 standing decodes of 256-token prompts, 700
    tokens out, each with `prompts` injected 0.5 s apart once the standing prompts' own prefill
    steps are done (cal26, cal27)."""
    work = []
    for rep in "abc":
        for b in (1, 2, 4, 8, 16, 32, 64):
            start = 0.6 + b * 256 / 2048 * 0.1
            work.append(inject_burst(label, f"fx-inj-b{b}-s256-o700-{rep}", b, 700, prompts,
                                     round(start, 1), 0.5, standing_len=256))
    return work

def cal26_plan(label):
    """FULL_DECODE_ONLY at 256/2048 beside proc-sampler.py: does what a decode adds to a step
    without graphs stop growing past a few decodes? cal17's Poisson steps took 66 ms beside 1-10
    decodes and 81 ms beside 11-30, cal2's injections grew 0.29 ms a decode from 8 to 64, cal22's
    did not grow from 64 to 128, and cal12's and cal4's shrank from 1 to 16 (docs/fidelity.md,
    "What is still wrong"). One server, three interleaved rounds: 1,024- and 256-token prompts
    injected beside 1, 2, 4, 8, 16, 32 and 64 standing decodes of 256-token prompts (each
    injection prefilled in one step beside them, the budget never binding)."""
    warm = [fx(label, f"warm-p{n}", n, 2, 1, 90) for n in (16, 256, 1024)]
    warm += [fx(label, f"warm-d{b}", 256, 8, b) for b in (1, 8, 64)]
    warm.append(inject_burst(label, "warm-inject", 8, 200, (1024, 256), 1.0, 0.5, standing_len=256))
    return plan_document(warm, beside_decodes(label, (1024, 256, 1024, 256)))

def cal27_plan(label):
    """FULL_DECODE_ONLY at 256/2048 beside proc-sampler.py: cal26's design with small prompts. 64- and
    128-token prompts injected beside 1, 2, 4, 8, 16, 32 and 64 standing decodes of 256-token prompts,
    three interleaved rounds, each prefilled in one step: do steps that prefill a few dozen tokens
    grow with the decodes beside them, as the 64/64 servers' pairs say, where cal26's 256- and
    1,024-token ones did not? After each round, a lone 64- and a lone 128-token prompt on the idle
    engine: with the injections beside 1-16 decodes they are the same server's pairs that price a
    step prefilling beside no decode (`engine/idle.rs`). Lone prompts of 64-256 tokens reached their
    first token 1.1-1.4x later than the profile prices on every server that measured them
    (`sim/scripts/lone_prompts.py`), where the ratio has pairs on two servers only."""
    warm = [fx(label, f"warm-p{n}", n, 2, 1, 90) for n in (16, 64, 128, 256)]
    warm += [fx(label, f"warm-d{b}", 256, 8, b) for b in (1, 8, 64)]
    warm.append(inject_burst(label, "warm-inject", 8, 200, (128, 64), 1.0, 0.5, standing_len=256))
    rounds = beside_decodes(label, (128, 64, 128, 64))
    per_round = len(rounds) // 3
    work = []
    for k, rep in enumerate("abc"):
        work += rounds[k * per_round:(k + 1) * per_round]
        work += [fx(label, f"fx-p{n}-{rep}", n, 4, 1, 90) for n in (64, 128)]
    return plan_document(warm, work)

def cal28_plan(label):
    """FULL_DECODE_ONLY at 64/64 (the seed recipe's limits) beside proc-sampler.py: 128-token prompts
    injected beside 1, 2, 4, 8, 16, 32 and 56 standing decodes of 16-token prompts, three
    interleaved rounds. The budget binds: each chunk holds 64 less the decodes, so every counted step
    schedules 64 tokens and only the split between prefill and decode changes (cal18-cal20 measured
    2 and 8 decodes: 0.23-2.83 ms a decode)."""
    warm = warmups_64_64(label, (16, 128, 256))
    warm.append(inject_burst(label, "warm-inject-b56", 56, 400, (128,), 1.6, 1.0, standing_len=16))
    work = []
    for rep in "abc":
        for b in (1, 2, 4, 8, 16, 32, 56):
            # After the standing prompts' own prefill (b x 16 tokens at 64 a step); each injection's
            # chunks of 64 - b tokens take up to 16 steps, so they go 1.5 s apart.
            start = 0.5 + b * 16 / 64 * 0.08
            work.append(inject_burst(label, f"fx-inj-b{b}-s16-o1500-{rep}", b, 1500,
                                     (128, 128, 128, 128), round(start, 1), 1.5, standing_len=16))
    return plan_document(warm, work)

def judged_order_plan(label):
    """FULL_DECODE_ONLY beside proc-sampler.py: the judged 256-token-limit plans' six `vllm bench serve`
    shapes (`dec-r8`, `dec-sat`, `pre-r4`, `pre-sat`, `mix-c64`, `dec-r16`) as calibration runs in the
    judged order, twice (passes `a` and `b`, every run on a seed of its own, so no prompt is a prefix
    hit), after the judged plans' warm-ups and their one chunked long-prompt burst. Does a shape run
    slower when it follows the heavy runs before it (`pre-r4` after `dec-sat`, `dec-r16` after
    `mix-c64`), on its first pass only, or on both, or at neither?"""
    warm = [fx(label, "warm-p16", 16, 4, 1), fx(label, "warm-p512", 512, 4, 1),
            fx(label, "warm-p2048", 2048, 2, 1, 90)]
    warm += [fx(label, f"warm-d{b}", 128, 8, b) for b in (1, 4, 16, 64, 256)]
    warm.append(fx(label, "warm-d64-c2048", 2048, 16, 64, 90))
    shapes = (("dec-r8", 256, 128, 80, 8.0, None), ("dec-sat", 256, 256, 256, None, None),
              ("pre-r4", 2048, 32, 40, 4.0, None), ("pre-sat", 2048, 32, 64, None, None),
              ("mix-c64", 1024, 128, 128, None, 64), ("dec-r16", 128, 256, 160, 16.0, None))
    work = []
    for rep in "ab":
        for name, inp, out, n, rate, conc in shapes:
            w = bench(label, f"cal-bench-{name}-{rep}", inp, out, n, 120, rate=rate, conc=conc)
            w["calibration"] = True
            work.append(w)
    return plan_document(warm, work)

def cal38_plan(label):
    """`vllm bench serve` sending N prompts at once takes the first on its one idle connection and
    opens one for each other before any reaches the server (docs/fidelity.md, "The bench client's
    connections"): does the wait grow with N, as one cost a connection says? Calibration bench runs
    of 64, 128, 256 and 512 short prompts at once and 256 at a concurrency of 128, in two rounds,
    beside the probe's own burst of 256 (its client opens its connections at once), on a
    FULL_DECODE_ONLY server whose step lines are stamped."""
    warm = [fx(label, "warm-p16", 16, 4, 1)]
    warm += [fx(label, f"warm-d{b}", 128, 8, b) for b in (1, 16, 64, 128, 256)]
    work = []
    for rep in "ab":
        work.append(fx(label, f"fx-d256-c128-o16-{rep}", 128, 16, 256, 90))
        for n, conc in ((256, None), (128, None), (512, None), (64, None), (256, 128)):
            name = f"cal-bench-d{n}-c128-o16" + (f"-conc{conc}" if conc else "") + f"-{rep}"
            w = bench(label, name, 128, 16, n, 120, conc=conc)
            w["calibration"] = True
            work.append(w)
    return plan_document(warm, work)

def cal39_plan(label):
    """Eager steps past 2,048 tokens: the eager prefill extra is measured from injections up to 2,036
    tokens and extended beyond along its last slope (docs/fidelity.md, "What is still wrong"). An eager
    server at 256/8192 whose step lines are stamped: prompts of 3,072-8,192 tokens injected beside
    standing bursts of 1, 16 and 64 decodes (each prefilled in one step beside them, which the
    derivation reads as what the prefill adds to the standing gap), two rounds, and lone prompts of
    those lengths on the idle engine (8,000 at most: beside 64 decodes it fits one step). The warm-ups run every length once, so no first use of a
    fused-MoE specialization falls in a record. Each round also runs the uniform decode bursts of 1-256
    requests the eager decode table pools over servers: one more loan's level for it."""
    lengths = (3072, 4096, 6144, 8000)  # 8,000 and 64 decodes fit one 8,192-token step
    warm = [fx(label, f"warm-p{n}", n, 2, 1, 90) for n in (16, 512, 2048) + lengths]
    warm += [fx(label, f"warm-d{b}", 128, 8, b) for b in (1, 4, 16, 64, 256)]
    warm += [inject_burst(label, "warm-inject", 16, 128, lengths, 0.5, 1.0)]
    work = []
    for rep in "ab":
        for b in (1, 16, 64):
            work.append(inject_burst(label, f"fx-inj-b{b}-o128-{rep}", b, 128, lengths, 1.0, 1.2))
        work += [fx(label, f"fx-p{n}-{rep}", n, 4, 1, 90) for n in lengths]
        work += [fx(label, f"fx-d{b}-c128-o64-{rep}", 128, 64, b) for b in (1, 4, 16, 64, 256)]
    return plan_document(warm, work)

def cal40_plan(label):
    """What an eager step costs by its prompts and by its tokens, apart: the eager per-token floor is read
    from full-budget bursts of many prompts (11.6 us a token, 92.6 ms at 8,000 tokens), yet one 8,000-token
    prompt beside a decode stepped at about 55 ms on `cal39` (docs/fidelity.md, "What is still wrong").
    Bursts of N prompts of L tokens sent at once, each prefilled in one step: N x L = 8,192 (1 x 8,192,
    4 x 2,048, 16 x 512, 64 x 128, 256 x 32) and N x L = 2,048 (1 x 2,048, 4 x 512, 16 x 128, 64 x 32),
    four output tokens, two rounds, after a warm-up at every shape; on an eager 256/8192 server whose
    step lines are stamped."""
    shapes = [(1, 8192), (4, 2048), (16, 512), (64, 128), (256, 32), (1, 2048), (4, 512), (16, 128), (64, 32)]
    warm = [fx(label, f"warm-n{n}-p{length}", length, 4, n, 90) for n, length in shapes]
    work = [fx(label, f"fx-n{n}-p{length}-o4-{rep}", length, 4, n, 90) for rep in "ab" for n, length in shapes]
    return plan_document(warm, work)

def cal41_plan(label):
    """`cal40` beside standing decodes: on an H100, `cal40`'s steps of about 8,000 fresh prompt tokens cost
    about a decode step whether 1, 4, 16 or 63 prompts filled them, yet the H200 bursts the eager per-token
    floor is read from (chunked prompts, or 64 fresh ones beside 64-191 decodes) stepped at about 92-96 ms.
    Is it the decodes beside the prefill? N prompts of L tokens sent at once into a standing burst of 64
    eager decodes (N x L = 8,000: 1 x 8,000, 4 x 2,000, 16 x 500, 64 x 125; beside 64 decodes each fits one
    8,192-token step), and into one of 1 decode, two rounds, beside `cal40`'s bare bursts of 8,192 on the
    same server; after a warm-up at every shape."""
    shapes = [(1, 8000), (4, 2000), (16, 500), (64, 125)]
    bare = [(1, 8192), (4, 2048), (16, 512), (64, 128)]
    warm = [fx(label, f"warm-n{n}-p{length}", length, 4, n, 90) for n, length in shapes + bare]
    warm += [fx(label, f"warm-d{b}", 128, 8, b) for b in (1, 64)]
    work = []
    for rep in "ab":
        for b in (64, 1):
            for n, length in shapes:
                w = fx(label, f"fx-inj-b{b}-n{n}-p{length}-{rep}", 128, 64, b, 90)
                w["inject"] = [{"at_s": 1.5, "input_len": length, "output_len": 4}] * n
                work.append(w)
        work += [fx(label, f"fx-n{n}-p{length}-o4-{rep}", length, 4, n, 90) for n, length in bare]
    return plan_document(warm, work)

def cal42_plan(label):
    """An eager step that continues a chunked prompt against one that prefills a whole prompt of the same
    tokens: the eager per-token floor now prices only steps of several prompts or a continued chunk, and no
    eager calibration has measured a continued chunk apart (docs/fidelity.md, "What is still wrong").
    Prompts of 12,000 and 16,000 tokens sent into standing bursts of 64 and of 1 eager decode (the budget
    cuts each at 8,192 less the decodes, and the rest, 3,872-7,999 tokens, continues with that context in
    the next step), beside whole prompts of the continued chunks' lengths sent into the same bursts; two
    rounds, after a warm-up at every length. `cal43` runs the same shapes at the 2,048-token budget: the
    continued chunks then follow a context of 1,984-2,047 tokens where `cal42`'s followed 8,128-8,191 (does
    a continued chunk's cost go with its context, or come once per chunk?)."""
    budget = LIMITS[label][1]
    first = budget - 64  # the chunk the budget cuts beside 64 decodes
    whole = (first // 2 - (first // 2) % 16, first - 144) if budget < 8192 else (3872, 7872)
    long = tuple(first + n for n in whole)
    warm = [fx(label, f"warm-p{n}", n, 2, 1, 90) for n in whole + long]
    warm += [fx(label, f"warm-d{b}", 128, 8, b) for b in (1, 64)]
    work = []
    for rep in "ab":
        for b in (64, 1):
            for n in long + whole:
                work.append(inject_burst(label, f"fx-inj-b{b}-p{n}-{rep}", b, 64, (n,), 1.5, 1.0))
    return plan_document(warm, work)

def cal35_plan(label):
    """An eager server whose steps the label's hook profiles (gpu-probes/scripts/profile-modules.py):
    the warm-ups every eager plan runs, then the hook's shapes unprofiled, once (the loan's time is
    short), so the profiled steps' overhead over the same server's own is on record beside them."""
    warm = [fx(label, "warm-p16", 16, 4, 1), fx(label, "warm-p512", 512, 4, 1),
            fx(label, "warm-p2048", 2048, 2, 1, 90)]
    warm += [fx(label, f"warm-d{b}", 128, 8, b) for b in (1, 4, 16, 64, 256)]
    work = [fx(label, "fx-d16-c128-o8-a", 128, 8, 16), fx(label, "fx-d64-c128-o8-a", 128, 8, 64),
            fx(label, "fx-p64-o4-a", 64, 4, 1),
            fx(label, "fx-p512-o2-a", 512, 2, 1), fx(label, "fx-p2048-o2-a", 2048, 2, 1, 90)]
    return plan_document(warm, work)

def plan(label):
    special = [("cal-", calibration_plan), ("cal2-", cal2_plan), ("cal3-", cal3_plan), ("cal4-", cal4_plan),
               ("cal5-", cal5_plan), ("cal6-", cal6_plan), ("cal7-", cal7_plan),
               ("cal8-", cal8_plan), ("cal9-", cal9_plan),
               ("cal10-", cal10_plan),
               ("cal11-", cal11_plan), ("cal12-", cal12_plan),
               ("cal13-", cal13_plan), ("cal14-", cal14_plan),
               ("cal15-", cal15_plan), ("cal16-", cal16_plan), ("cal17-", cal17_plan),
               ("cal18-", cal18_plan), ("cal19-", cal19_plan),
               ("cal20-", cal20_plan), ("cal21-", cal21_plan),
               ("cal22-", cal22_plan), ("cal23-", cal23_plan), ("cal24-", cal24_plan),
               ("cal25-", cal25_plan), ("cal26-", cal26_plan),
               ("cal27-", cal27_plan), ("cal28-", cal28_plan),
               ("cal29-", judged_order_plan), ("cal30-", judged_order_plan),
               ("cal32-", cal32_plan), ("cal35-", cal35_plan), ("cal38-", cal38_plan),
               ("cal39-", cal39_plan), ("cal40-", cal40_plan),
               ("cal41-", cal41_plan), ("cal42-", cal42_plan),
               ("cal43-", cal42_plan)]
    for prefix, make in special:
        if label.startswith(prefix):
            return make(label)
    if label.endswith("-w2"):
        return w2_plan(label)
    if label.endswith("-w3"):
        return w3_plan(label)
    if label.endswith("-w4"):
        return w4_plan(label)
    seqs, budget = LIMITS[label]
    small = budget <= 64
    warm = [fx(label, "warm-p16", 16, 4, 1), fx(label, "warm-p512", 512, 4, 1),
            fx(label, "warm-p2048", 2048, 2, 1, 90)]
    batches = (1, 4, 16, 64, 256, 512)
    for b in batches:
        if b <= seqs: warm.append(fx(label, f"warm-d{b}", 64, 8, b))
    work = [fx(label, f"fx-d{b}-c128", 128, 32, b) for b in batches if b <= seqs]
    for length in (256, 1024, 2048) + (() if small else (8192,)):
        for rep in "ab":
            work.append(fx(label, f"fx-p{length}-{rep}", length, 4, 1, 90))
    if small:
        work.append(fx(label, "fx-d16-c512", 512, 16, 16, 90))
    else:
        work.append(fx(label, "fx-d64-c2048", 2048, 16, 64, 90))
        # Front end: the same 256 prompts twice; the second burst is all prefix-cache hits, so its
        # first-token spread is the API server's per-request cost, not the engine's prefill.
        work.append(fx(label, "fx-fe-n256-c1024-warm", 1024, 2, 256, 90))
        work.append(fx(label, "fx-fe-n256-c1024", 1024, 2, 256, 90, same_as="fx-fe-n256-c1024-warm"))
    if small:
        work += [bench(label, "e2e-dec-r4", 256, 128, 40, 150, rate=4.0),
                 bench(label, "e2e-dec-sat", 256, 128, 128, 180),
                 bench(label, "e2e-pre-r1", 1024, 32, 16, 150, rate=1.0),
                 bench(label, "e2e-pre-sat", 1024, 32, 16, 150),
                 bench(label, "e2e-mix-c16", 512, 128, 32, 150, conc=16)]
    else:
        work += [bench(label, "e2e-dec-r8", 256, 128, 80, 120, rate=8.0),
                 bench(label, "e2e-dec-sat", 256, 256, 256, 120),
                 bench(label, "e2e-pre-r4", 2048, 32, 40, 120, rate=4.0),
                 bench(label, "e2e-pre-sat", 2048, 32, 64, 120),
                 bench(label, "e2e-mix-c64", 1024, 128, 128, 120, conc=64),
                 bench(label, "e2e-dec-r16", 128, 256, 160, 120, rate=16.0)]
        if seqs >= 512:
            work.append(bench(label, "e2e-dec-sat512", 256, 128, 512, 150))
    return plan_document(warm, work)

here = pathlib.Path(__file__).resolve().parent.parent / "plans"
for label in sys.argv[1:] or LIMITS:
    (here / f"engine-dsv2l-{label}.json").write_text(json.dumps(plan(label), indent=1) + "\n")
    print(f"wrote plans/engine-dsv2l-{label}.json")
