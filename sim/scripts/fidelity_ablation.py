#!/usr/bin/env python3
"""Ablation of the simulator's fidelity mechanisms (docs/fidelity.md, "What each mechanism contributes").

Re-implements, for one Attention and one FFN rank only, the layer sweep `afd-sim replay-pipeline` runs
(sim/src/pipeline.rs, sim/src/pricing.rs, sim/src/model/cost.rs), with each mechanism a switch, and prints the
median and worst |error| and the worst gain difference as the mechanisms are added in order, then with each one
left out of the final model. With every switch on it reproduces replay-pipeline's predictions (it prints the
largest difference); the simulator itself has no switches. Reads the committed files only; standard library only.

    python3 sim/scripts/fidelity_ablation.py [--root REPO] [--replay REPLAY.json]

`--replay` takes `afd-sim replay-pipeline RESULTS --json` output to compare against.
"""

import argparse
import json
import math
import os
import statistics as st

ROWS = 2048 * 2  # bytes per row of hidden states (DeepSeek-V2-Lite, bf16)


def load(root, path):
    with open(os.path.join(root, path)) as f:
        return json.load(f)


def log1(x):
    return math.log(max(x, 1.0))


def interp(points, x):
    """Piecewise-linear in log space, clamped (sim/src/model/cost/interp.rs)."""
    points = sorted(points)
    lx = log1(x)
    xs = [log1(p[0]) for p in points]
    if lx <= xs[0]:
        return points[0][1]
    if lx >= xs[-1]:
        return points[-1][1]
    for i in range(1, len(xs)):
        if lx <= xs[i]:
            t = (lx - xs[i - 1]) / (xs[i] - xs[i - 1])
            return points[i - 1][1] + t * (points[i][1] - points[i - 1][1])


class Profile:
    def __init__(self, profiles):
        self.tables = []
        for profile in profiles:  # the first profile wins a table both have
            for t in profile["tables"]:
                if not any(u["op"] == t["op"] and u["variant"] == t["variant"] for u in self.tables):
                    self.tables.append(t)

    def table(self, op, **variant):
        for t in self.tables:
            if t["op"] == op and all(t["variant"].get(k) == v for k, v in variant.items()):
                return t
        raise KeyError(op)

    def curve(self, op, key=lambda p: p["stats"]["median_us"], **variant):
        pts = [(p["at"][0], key(p)) for p in self.table(op, **variant)["points"]]
        return lambda x: interp(pts, x)

    def grid(self, op):
        t = self.table(op)
        xs = sorted({p["at"][0] for p in t["points"]})
        ys = sorted({p["at"][1] for p in t["points"]})
        v = {(p["at"][0], p["at"][1]): p["stats"]["median_us"] for p in t["points"]}
        return lambda x, y: interp([(a, interp([(b, v[(a, b)]) for b in ys], y)) for a in xs], x)

    def host(self, op, **variant):
        return st.median(p["derived"]["host_us"] for p in self.table(op, **variant)["points"])

    def eager_gap(self):
        """Theil-Sen slope of eager_us - median_us over kernels, device-bound points."""
        pts = []
        for t in self.tables:
            for p in t["points"]:
                d = p["derived"]
                if all(k in d for k in ("eager_us", "host_us", "kernels")) and d["host_us"] < p["stats"]["median_us"]:
                    pts.append((d["kernels"], d["eager_us"] - p["stats"]["median_us"]))
        slopes = [(b[1] - a[1]) / (b[0] - a[0]) for i, a in enumerate(pts) for b in pts[i + 1:] if a[0] != b[0]]
        return max(0.0, st.median(slopes))


def model(profile):
    m = dict(
        proj=profile.curve("attention.proj"),
        mla=profile.grid("attention.mla_decode"),
        router=profile.curve("moe.router"),
        dispatch=profile.curve("moe.dispatch"),
        routed=profile.grid("moe.routed_experts"),
        shared=profile.curve("moe.shared_experts"),
        dense=profile.curve("mlp.dense"),
        composition=profile.curve(
            "moe.layer", key=lambda p: p["stats"]["median_us"] - p["derived"]["parts_sum_us"], routing="uniform"),
        one_way_graph=profile.curve("p2p.one_way", graph="true"),
        one_way_eager=profile.curve("p2p.one_way", graph="false"),
        ping_pong=profile.curve("p2p.ping_pong", graph="true"),
        launch_eager=profile.curve("launch.eager"),
        launch_graph=profile.curve("launch.graph"),
        gap=profile.eager_gap(),
    )
    handoff = sorted(
        (t["points"][0]["derived"]["work_us"], [(p["at"][0], p["stats"]["median_us"]) for p in t["points"]])
        for t in profile.tables
        if t["op"] == "p2p.handoff" and t["variant"].get("graph") == "true")
    m["handoff"] = handoff
    g = profile.table("launch.graph")["points"]
    g = sorted((p["at"][0], p["stats"]["median_us"]) for p in g)
    m["graph_gap"] = (g[-1][1] - g[0][1]) / (g[-1][0] - g[0][0])
    m["host_p2p"] = profile.host("p2p.one_way", graph="false")
    m["host_attention"] = profile.host("attention.proj") + profile.host("attention.mla_decode")
    m["host_ffn"] = sum(profile.host(op) for op in ("moe.router", "moe.dispatch", "moe.routed_experts", "moe.shared_experts"))
    mean = lambda op, **v: st.mean(p["derived"]["host_us"] for p in profile.table(op, **v)["points"])
    m["old_host_p2p"] = mean("p2p.one_way", graph="false")
    m["old_host_attention"] = mean("attention.proj")
    m["old_host_ffn"] = mean("moe.routed_experts")
    return m


def handoff_leg(m, b, wait_work):
    ws = [w for w, _ in m["handoff"]]
    vals = [interp(c, b) for _, c in m["handoff"]]
    if wait_work <= ws[0]:
        return vals[0]
    if wait_work >= ws[-1]:
        return vals[-1]
    for i in range(1, len(ws)):
        if wait_work <= ws[i]:
            t = (wait_work - ws[i - 1]) / (ws[i] - ws[i - 1])
            return vals[i - 1] + t * (vals[i] - vals[i - 1])


def predict(m, rec, o):
    ub = rec["ubatch_tokens"]
    stages = len(ub)
    graph = rec["graph"]
    eager = not graph
    ctx = rec["context"]
    routing = {(r["layer"], r["ubatch"]): (r["active_experts"], r["max_tokens_per_expert"]) for r in rec["routing"]}
    gap = m["gap"] if eager and o["eager_gap"] else 0.0
    double = m["graph_gap"] if o["double_gaps"] else 0.0
    if o["legs"] == "oneway":
        curve = m["one_way_graph"] if graph else m["one_way_eager"]
        leg0 = curve
    elif o["legs"] == "pingpong":
        leg0 = m["ping_pong"]
    else:
        leg0 = lambda b: handoff_leg(m, b, 0.0)
    extra = (lambda b, w: handoff_leg(m, b, w) - handoff_leg(m, b, 0.0)) if o["legs"] == "handoff" else (lambda b, w: 0.0)
    busy = m["one_way_graph"] if o["nccl_busy"] else None
    attention = [m["proj"](r) + m["mla"](r, ctx) + 10 * gap + 12 * double for r in ub]

    def ffn(layer, s):
        r = ub[s]
        if layer < 1:
            return m["dense"](r) + 3 * gap + 4 * double
        a, t = routing[(layer, s)]
        v = m["router"](r) + m["routed"](a, t) + m["shared"](r) + 10 * gap + 12 * double
        if o["moe_compose"]:
            v += m["dispatch"](r) + m["composition"](r)
        return v

    if o["host_new"]:
        hp, ha, hf = m["host_p2p"], m["host_attention"], m["host_ffn"]
        ffn_loop = 2 * m["launch_eager"](2)
        control = leg0(8) + leg0(135 + 68 * (stages - 1))
    else:
        hp, ha, hf = m["old_host_p2p"], m["old_host_attention"], m["old_host_ffn"]
        ffn_loop = 30.0
        control = m["one_way_eager"](8) + m["one_way_eager"](135 + 68 * (stages - 1))
    launch = m["launch_graph"](1)

    def start(host, stream, issue):
        if eager:
            host += issue
        return host, max(stream, host)

    def compute(host, stream, issue, kernels, duration):
        if not eager or not o["stream_issue"]:
            host, begin = start(host, stream, issue)
            return host, begin + duration
        first = host + issue / kernels
        host += issue
        begin = max(stream, first)
        return host, max(begin + duration, host + duration / kernels)

    def recv(host, stream, arrival, b):
        host, begin = start(host, stream, hp)
        held = busy(b) if busy else 0.0
        waited = max(0.0, arrival - begin)
        return host, max(begin + held, arrival + extra(b, max(0.0, waited - leg0(b))))

    def send(host, stream, b):
        host, begin = start(host, stream, hp)
        held = busy(b) if busy else leg0(b)
        return host, begin + held, begin + leg0(b)

    a_host = 2 * hp
    a_stream = a_host + control
    f_stream = 0.0
    f_host = a_stream + ffn_loop + (launch if graph else 0.0)
    if graph:
        a_host += launch
    to_ffn = [0.0, 0.0]
    to_att = [0.0, 0.0]
    for layer in range(rec["layers"]):
        for s in range(stages):
            b = ub[s] * ROWS
            if stages == 2 and layer > 0:
                a_host, a_stream = recv(a_host, a_stream, to_att[s], b)
            a_host, a_stream = compute(a_host, a_stream, ha, 10, attention[s])
            a_host, a_stream, to_ffn[s] = send(a_host, a_stream, b)
            f_host, f_stream = recv(f_host, f_stream, to_ffn[s], b)
            f_host, f_stream = compute(f_host, f_stream, hf, 10, ffn(layer, s))
            f_host, f_stream, to_att[s] = send(f_host, f_stream, b)
            if stages == 1:
                a_host, a_stream = recv(a_host, a_stream, to_att[0], b)
    if stages == 2:
        for s in range(2):
            a_host, a_stream = recv(a_host, a_stream, to_att[s], ub[s] * ROWS)
    return a_stream


def summary(m, records, o):
    pred = {}
    for rec in records:
        pred[(rec["tokens"], rec["context"], rec["dbo"], rec["graph"])] = (predict(m, rec, o), rec["step_us"]["median_us"])
    errors = [abs(p - q) / q * 100 for p, q in pred.values()]
    gains = []
    for (t, c, dbo, graph), (p, q) in pred.items():
        if not dbo:
            p2, q2 = pred[(t, c, True, graph)]
            gains.append(abs(p / p2 - q / q2) * 100)
        if not graph:
            p2, q2 = pred[(t, c, dbo, True)]
            gains.append(abs(p / p2 - q / q2) * 100)
    return st.median(errors), max(errors), max(gains), pred


STEPS = [
    ("the model before (forward scope)", {}),
    ("M1 calibrated prices hold their own launch gaps", dict(double_gaps=False)),
    ("M2 MoE = router + dispatch + routed + shared + composition", dict(moe_compose=True)),
    ("M3 transfers as dependent legs (ping-pong, graph)", dict(legs="pingpong")),
    ("M4 eager device gap per compute kernel", dict(eager_gap=True)),
    ("M5 NCCL kernels hold their streams", dict(nccl_busy=True)),
    ("M6 hand-offs between compute kernels (p2p.handoff)", dict(legs="handoff")),
    ("M7 measured host issue and control handling", dict(host_new=True)),
    ("M8 eager operations run as their kernels are issued", dict(stream_issue=True)),
]
BEFORE = dict(double_gaps=True, moe_compose=False, legs="oneway", eager_gap=False, nccl_busy=False,
              host_new=False, stream_issue=False)


def main():
    here = os.path.dirname(os.path.abspath(__file__))
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--root", default=os.path.join(here, "..", ".."))
    parser.add_argument("--replay", help="afd-sim replay-pipeline --json output to compare with")
    args = parser.parse_args()
    profile = Profile([load(args.root, "traces/data/calibration/h200x2-deepseek-v2-lite.json"),
                       load(args.root, "traces/data/calibration/h200x2-handoff.json")])
    records = load(args.root, "traces/data/pipeline/h200x2-deepseek-v2-lite.json")["records"]
    m = model(profile)
    print("eager gap d = %.2f µs per kernel" % m["gap"])
    o = dict(BEFORE)
    for name, change in STEPS:
        o.update(change)
        med, worst, gain, _ = summary(m, records, o)
        print("%-60s median %5.2f %%  worst %5.2f %%  gain %4.1f pp" % (name, med, worst, gain))
    final = dict(o)
    for name, change in STEPS[1:]:
        out = dict(final)
        out.update({k: BEFORE[k] for k in change})
        if name.startswith("M6"):
            out["legs"] = "pingpong"
        med, worst, gain, _ = summary(m, records, out)
        print("without %-52s median %5.2f %%  worst %5.2f %%  gain %4.1f pp" % (name.split(" ", 1)[0], med, worst, gain))
    if args.replay:
        with open(args.replay) as f:
            replay = json.load(f)
        _, _, _, pred = summary(m, records, final)
        diff = max(abs(pred[(c["tokens"], c["context"], c["dbo"], c["graph"])][0] - c["predicted_us"])
                   for c in replay["configurations"])
        print("largest difference from replay-pipeline: %.2f µs" % diff)


if __name__ == "__main__":
    main()
