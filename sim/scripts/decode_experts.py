#!/usr/bin/env python3
"""How many routed experts a real vLLM graph decode step of the dummy-weight model reads, from the
committed measurements alone: the engine profile's uniform decode periods (real vLLM 0.26.0, one
H200, `--load-format dummy`) against the H200 calibration profile's component tables (afd-probe's
own kernels: routed experts by active experts and tokens per expert, and the parts of a layer that do
not depend on routing).

A decode step of B requests routes 6 x B picks over 64 experts per MoE layer. Drawn uniformly they
leave almost no expert idle from B = 16 on, and a step must then read nearly every expert's weights
(26 layers x 64 experts x 17.3 MB = 28.8 GB) however fast its kernels are. The script prints, per
batch:
- the measured period;
- what uniform routing's routed experts alone take (the expected active experts, priced by the
  `moe.routed_experts` table; the HBM floor is those bytes at the datasheet's 4.8 TB/s);
- the active experts the measured period leaves room for: the period less what does not depend on
  routing (the batch-1 period less its six experts' share, plus how the other components grow with
  the batch), spread over the 26 MoE layers and inverted through the table;
- the distinct tokens that would activate that many experts if each drew its six at random;
- the step a model whose router spreads its picks evenly would take: the same routing-independent
  part with even routing's experts, and at least the measured period.

The inference is an upper bound, and it was checked: vLLM's own routing (`cal25`,
traces/data/vllm/routing/, `decode_tokens.py`) put every token of a layer on the same six experts at
every batch, so the implied experts past batch 1 are the rest of the step's growth, not experts.
The last column is the rule the engine model used before that count; it now prices a trained
model's step as the measured one with those six experts swapped (sim/src/model/engine/trained.rs).

usage: decode_experts.py [--engine FILE] [--calibration FILE] [--model FILE] [--json]
Exit 2 on a missing or malformed file.
"""
import argparse, json, math, sys

from stamped_steps import fail, read_json

HBM_BYTES_PER_S = 4.8e12  # H200 datasheet (traces/data/hardware/datasheets.json has no H200 entry: the
# simulator's H200 is priced by its measured profile); a floor only, the tables price the rest.
GRAPH_MODES = ("full-decode-only", "full-and-piecewise")


def table(profile, op, routing=None):
    for t in profile.get("tables", []):
        if t.get("op") == op and (routing is None or t.get("variant", {}).get("routing") == routing):
            return t
    fail(f"the calibration profile has no {op} table")


def curve(profile, op):
    """A one-axis table as sorted (x, median µs)."""
    return sorted((p["at"][0], p["stats"]["median_us"]) for p in table(profile, op)["points"])


def at(points, x):
    """Piecewise linear in log x, clamped at the ends."""
    if x <= points[0][0]:
        return points[0][1]
    for (x0, y0), (x1, y1) in zip(points, points[1:]):
        if x <= x1:
            f = (math.log(x) - math.log(x0)) / (math.log(x1) - math.log(x0))
            return y0 + f * (y1 - y0)
    return points[-1][1]


class Routed:
    """`moe.routed_experts`: µs of one MoE layer's routed experts by (active experts, tokens each)."""

    def __init__(self, profile):
        grid = {}
        for p in table(profile, "moe.routed_experts")["points"]:
            active, per_expert = p["at"]
            grid.setdefault(active, []).append((per_expert, p["stats"]["median_us"]))
        self.rows = sorted((a, sorted(c)) for a, c in grid.items())

    def us(self, active, picks):
        """Active experts (fractional: linear between the table's rows) sharing `picks` tokens."""
        rows = self.rows
        active = min(max(active, rows[0][0]), rows[-1][0])
        for (a0, c0), (a1, c1) in zip(rows, rows[1:]):
            if active <= a1:
                f = (active - a0) / (a1 - a0)
                return (1 - f) * at(c0, max(picks / active, 1)) + f * at(c1, max(picks / active, 1))
        return at(rows[-1][1], max(picks / active, 1))

    def active_for(self, us, picks):
        """The active experts whose routed time is `us` (bisection; the time grows with them)."""
        lo, hi = float(self.rows[0][0]), float(self.rows[-1][0])
        if us <= self.us(lo, picks):
            return lo
        if us >= self.us(hi, picks):
            return hi
        for _ in range(60):
            mid = (lo + hi) / 2
            lo, hi = (mid, hi) if self.us(mid, picks) < us else (lo, mid)
        return (lo + hi) / 2


def expected_active(experts, top_k, draws):
    """Experts hit by `draws` tokens each picking top_k distinct experts uniformly."""
    return experts * (1 - (1 - top_k / experts) ** draws)


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--engine", default="traces/data/engine/h200-dsv2l-vllm-engine.json")
    ap.add_argument("--calibration", default="traces/data/calibration/h200x2-deepseek-v2-lite.json")
    ap.add_argument("--model", default="traces/data/models/deepseek-v2-lite/config.json")
    ap.add_argument("--json", action="store_true")
    args = ap.parse_args()
    engine, cal, cfg = read_json(args.engine), read_json(args.calibration), read_json(args.model)
    try:
        experts, top_k = cfg["n_routed_experts"], cfg["num_experts_per_tok"]
        moe_layers = cfg["num_hidden_layers"] - cfg["first_k_dense_replace"]
        expert_bytes = 3 * cfg["hidden_size"] * cfg["moe_intermediate_size"] * 2  # bf16
    except KeyError as e:
        fail(f"{args.model}: no {e}")
    routed = Routed(cal)
    # What grows with the batch besides the routed experts, per step (our kernels' medians).
    per_moe_layer = [curve(cal, op) for op in ("moe.router", "moe.shared_experts", "moe.dispatch")]
    proj, dense = curve(cal, "attention.proj"), curve(cal, "mlp.dense")

    def rest_us(b):
        moe = sum(at(c, b) for c in per_moe_layer) * moe_layers
        return moe + at(proj, b) * cfg["num_hidden_layers"] + at(dense, b) * cfg["first_k_dense_replace"]

    out = []
    for mode in engine.get("modes", []):
        if mode.get("mode") not in GRAPH_MODES:
            continue
        periods = dict(mode["decode_period_ns"])
        if 1 not in periods:
            fail(f"{args.engine}: {mode['mode']} has no batch-1 decode period")
        # Batch 1 reads its token's six experts: the rest of that step does not depend on routing.
        fixed_us = periods[1] / 1e3 - moe_layers * routed.us(top_k, top_k) - rest_us(1)
        for b, ns in sorted(periods.items()):
            picks = top_k * b
            uniform = expected_active(experts, top_k, b)
            uniform_us = moe_layers * routed.us(uniform, picks)
            floor_us = uniform * expert_bytes * moe_layers / HBM_BYTES_PER_S * 1e6
            room_us = ns / 1e3 - fixed_us - rest_us(b)
            active = routed.active_for(room_us / moe_layers, picks)
            share = 1 - active / experts
            # None where the period leaves room for every expert (more than any token count explains).
            tokens = math.log(share) / math.log(1 - top_k / experts) if share > 0 else None
            even_ms = max(ns / 1e3, fixed_us + rest_us(b) + uniform_us) / 1e3
            out.append({"mode": mode["mode"], "batch": b, "period_ms": ns / 1e6,
                        "uniform_active": uniform, "uniform_routed_ms": uniform_us / 1e3,
                        "uniform_hbm_floor_ms": floor_us / 1e3, "implied_active": active,
                        "implied_distinct_tokens": tokens, "even_routing_step_ms": even_ms})
    if not out:
        fail(f"{args.engine}: no graph mode with decode periods")
    if args.json:
        json.dump(out, sys.stdout, indent=1)
        print()
        return
    fmt = lambda v: "all" if v is None else f"{v:.1f}"
    print("mode                batch  period  uniform: active  routed  HBM floor   implied: active  tokens"
          "  even-routing step")
    for r in out:
        print(f"{r['mode']:<18} {r['batch']:>6} {r['period_ms']:>6.2f} ms {r['uniform_active']:>15.1f}"
              f" {r['uniform_routed_ms']:>5.2f} ms {r['uniform_hbm_floor_ms']:>6.2f} ms"
              f" {r['implied_active']:>16.1f} {fmt(r['implied_distinct_tokens']):>7}"
              f" {r['even_routing_step_ms']:>15.2f} ms")


if __name__ == "__main__":
    main()
