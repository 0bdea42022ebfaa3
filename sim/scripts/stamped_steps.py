"""Shared by the scripts that read stamped `afd-probe vllm` runs (probe f27393d on, every server log
line stamped to the microsecond) and the other `sim/scripts` that read run files and profiles: the
error exit, reading a compressed file (xz or gzip), a JSON file (plain or compressed) and a run file, a correlation,
and the periods of a record's steps (those that prefilled, or any kind a caller picks).

A step's period is the stamp of the step before it less the stamp of the one before that: under
asynchronous scheduling vLLM writes a step's line once the next step is issued. Steps that only
decode, and steps whose period lies outside 20-300 ms (an idle spell before them), are left out.
"""
import gzip
import json
import lzma
import os
import statistics
import sys

SHORTEST_S, LONGEST_S = 0.02, 0.3


def fail(message):
    """The script's name and `message` on stderr, exit 2 (bad input)."""
    print(f"{os.path.basename(sys.argv[0])}: {message}", file=sys.stderr)
    sys.exit(2)


def opener(path):
    """`open` for a plain file, or the decoder its name's suffix (`.xz`, `.gz`) says it needs."""
    name = str(path)
    return lzma.open if name.endswith(".xz") else gzip.open if name.endswith(".gz") else open


def read_text(path):
    """A compressed text file (`.xz` or `.gz`, as the committed logs are stored)."""
    try:
        with opener(path)(path, "rt") as f:
            return f.read()
    except (OSError, EOFError, lzma.LZMAError, UnicodeDecodeError) as e:
        fail(f"{path}: {e}")


def read_json(path):
    """A JSON file, compressed when its name ends in .xz or .gz; exit 2 naming the file when it
    cannot be read."""
    try:
        with opener(path)(path, "rt") as f:
            return json.load(f)
    except (OSError, EOFError, lzma.LZMAError, ValueError, UnicodeDecodeError) as e:
        fail(f"{path}: {e}")


def read_run(path):
    """An `afd-probe vllm` run file (format afd-vllm-run); exit 2 on any other."""
    run = read_json(path)
    if not isinstance(run, dict) or run.get("format") != "afd-vllm-run":
        fail(f"{path}: not an `afd-probe vllm` run file (format afd-vllm-run)")
    return run


def machine(run):
    """The GPU a run file's provenance says it ran on (the device tool's words), H200 where it names none
    (the first batches, all on H200s)."""
    notes = (run.get("provenance") or {}).get("notes") or {}
    return notes.get("gpu_machine", "H200")


def correlation(xs, ys):
    """Pearson's r; nan when either side is constant."""
    mx, my = statistics.fmean(xs), statistics.fmean(ys)
    sxy = sum((x - mx) * (y - my) for x, y in zip(xs, ys))
    sxx = sum((x - mx) ** 2 for x in xs)
    syy = sum((y - my) ** 2 for y in ys)
    return sxy / (sxx * syy) ** 0.5 if sxx and syy else float("nan")


def step_periods(steps, keep):
    """(k, t0, t1) for every step k of a record's `steps` that `keep(step)` accepts, its period t1 − t0
    seconds (the stamps of the two steps before it; none after an idle spell)."""
    out = []
    for k in range(2, len(steps)):
        t0, t1 = steps[k - 2]["logged_s"], steps[k - 1]["logged_s"]
        if keep(steps[k]) and SHORTEST_S <= t1 - t0 <= LONGEST_S:
            out.append((k, t0, t1))
    return out


def prefill_periods(steps):
    """(k, t0, t1) for every step k of a record's `steps` that prefilled, its period t1 − t0 seconds."""
    return step_periods(steps, lambda s: s["ctx_requests"])


def usage(doc):
    """The script's usage on stderr, exit 2 (a wrong command line)."""
    print(doc, file=sys.stderr)
    sys.exit(2)


def take_option(args, flag, convert, meaning):
    """Removes `flag VALUE` from `args` and returns `convert(VALUE)`, None when `flag` is absent;
    exit 2 naming `meaning` when its value is missing or `convert` refuses it."""
    if flag not in args:
        return None
    i = args.index(flag)
    try:
        value = convert(args[i + 1])
    except (IndexError, ValueError):
        fail(f"{flag} takes {meaning}")
    del args[i:i + 2]
    return value
