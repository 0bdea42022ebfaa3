#!/usr/bin/env python3
"""Where a plain vLLM eager step's host time goes, module by module, from a torch profiler trace.

An AFD pair splits each decoder layer between two servers: the Attention server runs the layer's
norms and attention (`AFDDeepseekV2DecoderLayer.forward`, the plugin's
`model_executor/models/deepseek_v2.py:488-508`), the FFN server its MLP or MoE block
(`compute_ffn_output`, `:529-574`), and the scheduler, input preparation, embedding, final norm and
LM head stay with the Attention server. `afd-sim` prices each role's issue of a step without
graphs as its part of the plain step of the same shape (docs/fidelity.md, "AFD roles at vLLM's host
pace"); this reads the part each role's modules take of a real eager step.

Input: a chrome trace vLLM's torch profiler wrote (`--profiler-config` with `"profiler": "torch"`
and `torch_profiler_with_stack` on, its default, between `POST /start_profile` and
`/stop_profile`; gzipped or plain JSON). vLLM's worker wraps every `execute_model` in a
`record_function` named `execute_context_N(T)_generation_M(G)` (`vllm/v1/worker/gpu_worker.py`
`annotate_profile`); the profiler's Python tracer writes each module call as a `python_function`
event named `nn.Module: CLASS_ID`. Per step (annotation), on the annotation's thread, the modules
nested in the step are laid out by containment; each direct child of a decoder layer
(`*DecoderLayer`) counts for its role by class (norms and attention: Attention; MLP and MoE: FFN).

Output, per step: the annotation, its host time (µs), the decoder layers' total, each role's
total within the layers, what lies outside the layers (scheduler-side work inside
`execute_model`, embedding, final norm, LM head), and every class's total among the layers'
children; then the median over steps of each role's share of the layers. `--json` writes the
same as one JSON object. The Python tracer adds its own cost per Python call, so the absolute
times are the profiled server's, not a plain server's; the shares are what the model reads.

usage: module_shares.py TRACE.json[.gz] [--json]
       module_shares.py --self-test
Exit 2 on an unreadable trace, or one with no annotated step or no decoder layer in it.
"""
import json
import re
import statistics
import sys

from stamped_steps import fail, read_json

ATTENTION_CLASSES = ("RMSNorm", "LayerNorm")
FFN_CLASSES = ("DeepseekV2MoE", "DeepseekV2MLP", "FusedMoE", "SharedFusedMoE")
STEP = re.compile(r"^execute_context_(\d+)\((\d+)\)_generation_(\d+)\((\d+)\)")
MODULE = re.compile(r"^nn\.Module: (.+?)(?:_\d+)?$")


def role_of(cls):
    """The AFD role a decoder layer's child module runs in, by its class."""
    if cls in FFN_CLASSES or cls.endswith("MoE") or cls.endswith("MLP"):
        return "ffn"
    if cls in ATTENTION_CLASSES or "Attention" in cls or cls.endswith("Norm"):
        return "attention"
    return "other"


def load(path):
    trace = read_json(path)
    events = trace.get("traceEvents") if isinstance(trace, dict) else trace
    if not isinstance(events, list):
        fail(f"{path}: no traceEvents list")
    return events


def complete(events):
    """Complete events (`ph` X) with a start, a duration, a thread and a name."""
    out = []
    for e in events:
        if not isinstance(e, dict) or e.get("ph") != "X":
            continue
        try:
            ts, dur = float(e["ts"]), float(e.get("dur", 0.0))
        except (KeyError, TypeError, ValueError):
            continue
        out.append((ts, dur, (e.get("pid"), e.get("tid")), str(e.get("name", "")), e.get("cat", "")))
    return out


def nest(modules):
    """Each module event's parent index by containment, events sorted by start (longest first)."""
    modules.sort(key=lambda m: (m[0], -m[1]))
    parent, stack = [], []
    for i, (ts, dur, _) in enumerate(modules):
        while stack and modules[stack[-1]][0] + modules[stack[-1]][1] < ts + dur - 1e-3:
            stack.pop()
        parent.append(stack[-1] if stack else None)
        stack.append(i)
    return parent


def step_summary(name, ts, dur, modules):
    """One step's totals from the module events `(ts, dur, class)` within it."""
    parent = nest(modules)
    layers = 0.0
    roles = {"attention": 0.0, "ffn": 0.0, "other": 0.0}
    classes = {}
    layer_count = 0
    for i, (_, mdur, cls) in enumerate(modules):
        if cls.endswith("DecoderLayer"):
            up = parent[i]
            # Only outermost decoder layers (a layer never holds another).
            if up is None or not modules[up][2].endswith("DecoderLayer"):
                layers += mdur
                layer_count += 1
            continue
        up = parent[i]
        if up is not None and modules[up][2].endswith("DecoderLayer"):
            roles[role_of(cls)] += mdur
            classes[cls] = classes.get(cls, 0.0) + mdur
    found = STEP.match(name)
    ctx_req, ctx_tok, gen_req, gen_tok = (int(g) for g in found.groups())
    return {
        "annotation": name,
        "prefill_requests": ctx_req,
        "prefill_tokens": ctx_tok,
        "decode_requests": gen_req,
        "host_us": round(dur, 1),
        "decoder_layers": layer_count,
        "layers_us": round(layers, 1),
        "attention_us": round(roles["attention"], 1),
        "ffn_us": round(roles["ffn"], 1),
        "other_in_layers_us": round(roles["other"], 1),
        "outside_layers_us": round(dur - layers, 1),
        "classes_us": {k: round(v, 1) for k, v in sorted(classes.items())},
    }


def summarize(events):
    done = complete(events)
    steps = [e for e in done if STEP.match(e[3])]
    if not steps:
        fail("no `execute_context_..._generation_...` annotation: was the trace taken by vLLM's worker profiler?")
    by_thread = {}
    for ts, dur, thread, name, cat in done:
        found = MODULE.match(name)
        if found and cat in ("python_function", ""):
            by_thread.setdefault(thread, []).append((ts, dur, found.group(1)))
    for mods in by_thread.values():
        mods.sort()
    out = []
    for ts, dur, thread, name, _ in sorted(steps):
        mods = [m for m in by_thread.get(thread, []) if m[0] >= ts and m[0] + m[1] <= ts + dur + 1e-3]
        out.append(step_summary(name, ts, dur, mods))
    with_layers = [s for s in out if s["layers_us"] > 0]
    if not with_layers:
        fail("no decoder layer inside any step: was torch_profiler_with_stack on?")
    share = lambda key: statistics.median(s[key] / s["layers_us"] for s in with_layers)
    return {
        "steps": out,
        "median_attention_share_of_layers": round(share("attention_us"), 4),
        "median_ffn_share_of_layers": round(share("ffn_us"), 4),
        "median_outside_layers_share_of_step": round(
            statistics.median(s["outside_layers_us"] / s["host_us"] for s in with_layers if s["host_us"] > 0), 4),
    }


def synthetic():
    """A two-step trace: layers of 30 µs attention, 20 µs MoE, 2 × 5 µs norms; a step's host 200 µs."""
    def event(cat, name, ts, dur, tid=7):
        return {"ph": "X", "cat": cat, "name": name, "ts": ts, "dur": dur, "pid": 1, "tid": tid}

    events = []
    for ts in (1000.0, 2000.0):
        events.append(event("user_annotation", "execute_context_0(0)_generation_4(4)", ts, 200.0))
        events.append(event("python_function", "nn.Module: DeepseekV2Model_0", ts + 20, 150.0))
        for layer in range(2):
            t = ts + 30 + 65 * layer
            for name, start, dur in ((f"DeepseekV2DecoderLayer_{layer}", 0, 62.0), ("RMSNorm_0", 1, 5.0),
                                     ("DeepseekV2MLAAttention_0", 7, 30.0), ("Linear_3", 8, 10.0),
                                     ("RMSNorm_1", 38, 5.0), ("DeepseekV2MoE_0", 41, 20.0)):
                events.append(event("python_function", f"nn.Module: {name}", t + start, dur))
        # Another thread's module inside the same span counts for nothing.
        events.append(event("python_function", "nn.Module: DeepseekV2MoE_9", ts + 40, 50.0, tid=8))
    events.append({"ph": "i", "name": "marker", "ts": 5.0})
    return events


def self_test():
    s = summarize(synthetic())
    first = s["steps"][0]
    assert first["decoder_layers"] == 2, first
    assert first["attention_us"] == 2 * (30 + 5 + 5), first
    assert first["ffn_us"] == 2 * 20, first
    assert first["layers_us"] == 124, first
    assert first["outside_layers_us"] == 76, first
    assert first["classes_us"] == {"DeepseekV2MLAAttention": 60, "DeepseekV2MoE": 40, "RMSNorm": 20}, first
    assert abs(s["median_attention_share_of_layers"] - 80 / 124) < 1e-4, s
    print("module_shares.py: self-test passed")


def main():
    args = sys.argv[1:]
    if args == ["--self-test"]:
        self_test()
        return
    as_json = "--json" in args
    paths = [a for a in args if a != "--json"]
    if len(paths) != 1 or paths[0].startswith("-"):
        fail("usage: module_shares.py TRACE.json[.gz] [--json] | --self-test")
    s = summarize(load(paths[0]))
    if as_json:
        print(json.dumps(s, indent=1))
        return
    print(f"{'step':<48} {'host ms':>8} {'layers':>7} {'attn %':>7} {'ffn %':>6} {'outside %':>9}")
    for st in s["steps"]:
        layers = st["layers_us"] or float("nan")
        print(f"{st['annotation'][:48]:<48} {st['host_us'] / 1000:8.2f} {st['decoder_layers']:7d} "
              f"{100 * st['attention_us'] / layers:7.1f} {100 * st['ffn_us'] / layers:6.1f} "
              f"{100 * st['outside_layers_us'] / st['host_us']:9.1f}")
    print(f"median shares of the layers: attention {s['median_attention_share_of_layers']:.3f}, "
          f"FFN {s['median_ffn_share_of_layers']:.3f}; outside the layers "
          f"{s['median_outside_layers_share_of_step']:.3f} of a step")


if __name__ == "__main__":
    main()
