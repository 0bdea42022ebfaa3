"""Which steps of a vLLM server first ran a fused-MoE Triton kernel specialization, and what they cost.

usage: python3 sim/scripts/jit_first_use.py RUN.json.xz...

vLLM 0.26 runs DeepSeek-V2-Lite's routed experts through `fused_moe_kernel`, a Triton kernel JIT-compiled
in the server process the first time it meets a new specialization, and warns once per kernel name
("Triton kernel JIT compilation during inference", vllm/utils/jit_monitor.py; every one with
`--jit-monitor-verbose`). The specialization is the tile config vLLM picks for the step's M tokens
(`get_default_config`: no tuned file exists for E=64, N=1408 on H100 or H200, and the server log says so)
and which of the kernel's integer arguments are divisible by 16 (Triton's specialization): EM, the padded
length of the sorted token ids, and num_tokens, M times top-k. Start-up compiles the profile run
(M = max-num-batched-tokens), the sampler warm-up (M = min(max-num-seqs, max-num-batched-tokens)) and,
with graphs, every capture size; a step replayed from a graph compiles nothing; a piecewise step runs
at its capture size. Every other step that meets a new key compiles two kernels (the gate-up and the down
GEMM) before it runs.

For each run file (its server log beside it, `NAME.server.log.xz`) the script walks every engine step
the log holds, start-up and warm-ups included, and prints each first use: the record it fell in, its M,
and, where the log is stamped, the step's period (the gap between the two lines before its own; under
asynchronous scheduling a step's line is written once the next one is issued). Stalls over 400 ms on a
running engine that no first use explains are listed after them: on the stamped servers they fall in the
warm-up that first prefills a prompt in chunks, where vLLM compiles MLA's `mask_empty_context_kernel`
(the verbose monitor names it; the step line does not say whether a chunk continues a prompt).
"""
import os
import re
import statistics
import sys

from stamped_steps import fail, read_run, read_text, usage

TOP_K, EXPERTS = 6, 64
STEP = re.compile(r"Iteration\((\d+)\): (\d+) context requests, (\d+) context tokens, "
                  r"(\d+) generation requests, (\d+) generation tokens")
STAMP = re.compile(r"\) (\d{10}\.\d+) ")
CAPTURES = re.compile(r"cudagraph_capture_sizes': \[([\d, ]+)\]")


def config(m):
    """vLLM 0.26 `get_default_config` for bf16: (BLOCK_SIZE_M, BLOCK_SIZE_N, BLOCK_SIZE_K, GROUP_SIZE_M,
    num_warps, num_stages)."""
    block_m = 16 if m <= 32 else 32 if m <= 96 else 64 if m <= 512 else 128
    return (block_m, 64 if m <= 64 else 128, 128 if m <= 64 else 64,
            16 if m // EXPERTS > 128 else 1, 4 if m <= 128 else 8, 4 if m <= 32 else 3)


def key(m):
    """The specialization `fused_moe_kernel` compiles for a step of `m` tokens (fused_moe.py
    `invoke_fused_moe_triton_kernel`, moe_align_block_size.py)."""
    cfg = config(m)
    block_m, num_tokens = cfg[0], m * TOP_K
    naive = num_tokens * 4 <= EXPERTS
    if naive:
        em = num_tokens * block_m
    else:
        em = num_tokens + EXPERTS * (block_m - 1)
        if num_tokens < EXPERTS:
            em = min(num_tokens * block_m, em)
        if m < block_m:
            em = min(em, num_tokens * block_m)
    return cfg, naive, em % 16 == 0, num_tokens % 16 == 0


def first_uses(run_path):
    """(mode, [(iteration, record, m, period_ms or None)], [(iteration, period_ms)] unexplained)."""
    run = read_run(run_path)
    words = run["serve_args"]
    text = " ".join(words)
    mode = ("FULL_DECODE_ONLY" if "FULL_DECODE_ONLY" in text else
            "eager" if "--enforce-eager" in text else "FULL_AND_PIECEWISE")

    def flag(name, default):
        return int(words[words.index(name) + 1]) if name in words else default

    budget, seqs = flag("--max-num-batched-tokens", 8192), flag("--max-num-seqs", 1024)
    log_path = re.sub(r"\.json(\.xz|\.gz)?$", ".server.log.xz", run_path)
    if not os.path.exists(log_path):
        fail(f"{run_path}: no server log beside it ({log_path})")
    log = read_text(log_path)
    found = CAPTURES.search(log)
    captures = [int(x) for x in found.group(1).split(",")] if found and mode != "eager" else []
    largest = max(captures, default=0)
    compiled = {key(budget), key(min(seqs, budget))} | {key(c) for c in captures}
    record_of = {}
    for record in run["records"]:
        for s in record.get("steps") or []:
            record_of[s["iteration"]] = record["workload"]["name"]
    steps = []
    for line in log.splitlines():
        m = STEP.search(line)
        if m:
            stamp = STAMP.search(line[:m.start()])
            steps.append((*map(int, m.groups()), float(stamp.group(1)) if stamp else None))
    at = {s[0]: i for i, s in enumerate(steps)}

    def period_ms(i):
        if i < 2 or steps[i - 1][5] is None or steps[i - 2][5] is None:
            return None
        # Consecutive lines of a running engine (an idle spell before a step is no period).
        if steps[i - 2][0] != steps[i][0] - 2 or steps[i - 1][3] + steps[i - 2][3] == 0:
            return None
        return (steps[i - 1][5] - steps[i - 2][5]) * 1e3

    uses, firsts = [], set()
    for i, (it, ctx_req, ctx_tok, gen_req, gen_tok, _) in enumerate(steps):
        m = ctx_tok + gen_tok
        if mode == "eager":
            graphless = True
        elif mode == "FULL_DECODE_ONLY":
            graphless = ctx_req > 0 or m > largest
        else:
            graphless = True
            if m <= largest:
                m = min(c for c in captures if c >= m)
        k = key(m)
        if graphless and k not in compiled:
            compiled.add(k)
            firsts.add(it)
            uses.append((it, record_of.get(it, "warm-up"), m, period_ms(i)))
    stalls = []
    for i, s in enumerate(steps):
        p = period_ms(i)
        if p and p > 400 and steps[i - 1][3] > 0 and s[3] > 0 and s[0] not in firsts:
            stalls.append((s[0], p))
    return mode, uses, stalls


def main():
    args = sys.argv[1:]
    if not args or any(a.startswith("-") for a in args):
        usage(__doc__)
    periods = []
    for path in args:
        mode, uses, stalls = first_uses(path)
        name = os.path.basename(path).split(".json")[0]
        print(f"{name} ({mode}): {len(uses)} first uses")
        for it, record, m, p in uses:
            shown = f"{p:7.0f} ms" if p is not None else "       --"
            print(f"  iteration {it:6d}  {record:28s} M {m:5d}  key {key(m)}  period {shown}")
            if p is not None:
                periods.append(p)
        for it, p in stalls:
            print(f"  iteration {it:6d}  stall of {p:.0f} ms that no first use explains")
    if periods:
        print(f"first-use step periods: median {statistics.median(periods):.0f} ms over {len(periods)} "
              f"(range {min(periods):.0f}-{max(periods):.0f})")


if __name__ == "__main__":
    main()
