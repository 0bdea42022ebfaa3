#!/usr/bin/env python3
"""Checks a way of deriving the engine profile without the judged runs: every calibration server's
calibration `vllm bench serve` runs, predicted by a profile derived from every other run file.

A derivation rule (how a table groups its points, which steps a ratio prices) is chosen by what it
predicts here, never by the judged runs: each fold leaves one whole server out, so the server's
own fixed shapes cannot price its own bench runs, and its host's phase is new to the profile as a
judged server's is.

With --judged the folds are the judged servers instead, each one's judged runs priced by a profile
derived without its file: what to expect of runs on a server whose fixed shapes the profile never
saw (the committed profile holds every judged server's fixed shapes). It reports; it chooses no
rule.

With --lease-gap HOURS a fold leaves out, with the server, every server started in the same lease of
the machine: servers whose start times (the provenance's `date_utc`) follow each other within HOURS
are one lease (one host, one phase of its cores), a stricter check than one server at a time.

usage: calibration_loso.py [--sim BIN] [--data DIR] [--gpu NAME] [--judged] [--lease-gap HOURS] [--json] [--keep DIR]
  --sim BIN   the afd-sim binary (default: target/release/afd-sim)
  --gpu NAME  only the run files measured on this GPU, as their provenance names it (default: NVIDIA H200;
              traces/data/vllm/h100/ holds H100 servers, which no H200 profile may mix in)
  --data DIR  the run files, searched below DIR: `afd-probe vllm`'s run.json, *.json.xz, *.json.gz
              (default: traces/data/vllm)
  --judged    leave out each server with judged bench runs and price those runs instead
  --lease-gap HOURS
              leave out each server's whole lease (servers started within HOURS of the one before)
  --json      one JSON object: every record's errors and the summary
  --keep DIR  keep each fold's profile and comparison there (default: a temporary folder, removed)
Prints, per calibration bench run, the error of output throughput, mean TPOT and mean TTFT, then the
median, mean and count within 25 % of their magnitudes. Exit 2 on bad arguments or a failed fold.
"""
import argparse, datetime, json, lzma, pathlib, statistics, subprocess, sys, tempfile

from concurrent.futures import ThreadPoolExecutor

from stamped_steps import opener

METRICS = ("output_throughput", "mean_tpot_ms", "mean_ttft_ms")


def fail(message):
    print(f"calibration_loso.py: {message}", file=sys.stderr)
    sys.exit(2)


def read_run(path):
    """An `afd-vllm-run` file (plain, xz or gzipped JSON), or None for any other file."""
    try:
        with opener(path)(path, "rt") as text:
            run = json.load(text)
    except (OSError, EOFError, lzma.LZMAError, ValueError, UnicodeDecodeError):
        return None
    return run if isinstance(run, dict) and run.get("format") == "afd-vllm-run" else None


def run_files(folder, judged=False, gpu="NVIDIA H200"):
    """Every run file under `folder` (`afd-probe vllm`'s `run.json`, the committed `*.json.xz`, or `*.json.gz`) whose
    server priced its steps (not one that returned routed experts), each
    with whether it holds a calibration bench run, or with `judged` a judged one (such a server is a
    fold), and when its server started (the provenance's `date_utc`, None if absent)."""
    out = []
    for path in sorted(folder.rglob("*.json*")):
        if not path.name.endswith((".json", ".json.xz", ".json.gz")):
            continue
        run = read_run(path)
        gpus = (run or {}).get("provenance", {}).get("gpus") or [""]
        if run is not None and not gpus[0].startswith(gpu + ","):
            continue
        # A server that returned each token's routed experts copied them to the host every step:
        # engine-profile refuses its file (it counts experts, it prices no step; routing/).
        if run is not None and "--enable-return-routed-experts" not in run.get("serve_args", []):
            fold = any(bool(r["workload"].get("calibration")) != judged
                       and r["workload"]["kind"] == "bench-serve"
                       for r in run["records"])
            out.append((path, fold, started(run)))
    return out


def started(run):
    """A run's server start (`provenance.date_utc`, ISO 8601), or None."""
    try:
        return datetime.datetime.fromisoformat(run["provenance"]["date_utc"].replace("Z", "+00:00"))
    except (KeyError, TypeError, AttributeError, ValueError):
        return None


def leases(found, gap_hours):
    """Each run file's lease: the set of files whose servers started within `gap_hours` of the one
    before, in start order (without a gap, every file is its own)."""
    if gap_hours is None:
        return {path: {path} for path, _, _ in found}
    for path, _, start in found:
        if start is None:
            fail(f"--lease-gap: {path} records no provenance date_utc to place it in a lease")
    ordered = sorted(found, key=lambda f: f[2])
    groups, last = [], None
    for path, _, start in ordered:
        if last is None or (start - last).total_seconds() > gap_hours * 3600:
            groups.append(set())
        groups[-1].add(path)
        last = start
    return {path: group for group in groups for path in group}


def stem(path):
    """A file name for `path`'s outputs in the work folder."""
    return str(path.relative_to(path.anchor)).replace("/", "_").removesuffix(".gz").removesuffix(".xz")


def fold(sim, files, servers, work, judged=False, left_out=None):
    """Derives one profile without `left_out` (the servers' lease; without one, the one server) and
    compares each of `servers`' calibration runs (`judged`: its judged runs) against it: every
    server's records."""
    profile = work / f"profile-{stem(servers[0])}.json"
    left_out = left_out or set(servers)
    others = [str(f) for f in files if f not in left_out]
    done = subprocess.run([sim, "engine-profile", *others, "--out", str(profile)],
                          capture_output=True, text=True)
    if done.returncode != 0:
        fail(f"engine-profile without {servers[0].name}: {done.stderr.strip()}")
    which = [] if judged else ["--calibration"]
    out = {}
    for server in servers:
        done = subprocess.run([sim, "compare", str(server), *which, "--engine", str(profile),
                               "--json"], capture_output=True, text=True)
        if done.returncode != 0:
            fail(f"compare {server.name}: {done.stderr.strip()}")
        (work / f"compare-{stem(server)}.json").write_text(done.stdout)
        out[server] = json.loads(done.stdout)
    return out


def main():
    parser = argparse.ArgumentParser(add_help=True, description=__doc__.split("\n\n")[0])
    parser.add_argument("--sim", default="target/release/afd-sim")
    parser.add_argument("--data", default="traces/data/vllm")
    parser.add_argument("--gpu", default="NVIDIA H200")
    parser.add_argument("--judged", action="store_true")
    parser.add_argument("--lease-gap", type=float, metavar="HOURS")
    parser.add_argument("--json", action="store_true")
    parser.add_argument("--keep")
    args = parser.parse_args()
    if args.lease_gap is not None and not args.lease_gap > 0:
        fail(f"--lease-gap {args.lease_gap}: give a positive number of hours")
    if not pathlib.Path(args.sim).is_file():
        fail(f"--sim {args.sim}: no such binary (cargo build --release -p afd-sim-cli)")
    found = run_files(pathlib.Path(args.data), args.judged, args.gpu)
    files = [f for f, _, _ in found]
    servers = [f for f, calibration, _ in found if calibration]
    lease = leases(found, args.lease_gap)
    if not servers:
        kind = "judged" if args.judged else "calibration"
        fail(f"--data {args.data}: no afd-vllm-run file with a {kind} bench run")
    with tempfile.TemporaryDirectory() as scratch:
        work = pathlib.Path(args.keep or scratch)
        work.mkdir(parents=True, exist_ok=True)
        # One profile per lease left out (a server is its own lease without --lease-gap).
        by_lease = {}
        for server in servers:
            by_lease.setdefault(frozenset(lease[server]), []).append(server)
        with ThreadPoolExecutor() as pool:
            done = pool.map(lambda g: fold(args.sim, files, g[1], work, args.judged, g[0]),
                            by_lease.items())
            records = {server: r for out in done for server, r in out.items()}
        folds = [records[server] for server in servers]
    rows = []
    for records in folds:
        for r in records:
            errors = {m["metric"]: m["error"] for m in r["metrics"] if m["metric"] in METRICS}
            rows.append({"server": r["server"], "workload": r["workload"], "errors": errors})
    magnitudes = [abs(e) for row in rows for e in row["errors"].values()]
    summary = {
        "folds": len(servers),
        "leases": len({frozenset(g) for g in lease.values()}),
        "values": len(magnitudes),
        "median_abs_error": statistics.median(magnitudes) if magnitudes else None,
        "mean_abs_error": statistics.mean(magnitudes) if magnitudes else None,
        "within_25_percent": sum(m <= 0.25 for m in magnitudes),
    }
    if args.json:
        print(json.dumps({"records": rows, "summary": summary}, indent=1))
        return
    print(f"{'server':32} {'workload':26} {'out tok/s':>10} {'TPOT':>8} {'TTFT':>8}")
    for row in rows:
        e = row["errors"]
        print(f"{row['server']:32} {row['workload']:26} " + " ".join(
            f"{e[k] * 100:+7.1f}%" for k in METRICS))
    if magnitudes:
        alone = "one at a time" if args.lease_gap is None else (
            f"each with its lease ({summary['leases']} leases, {args.lease_gap:g} h apart)")
        print(f"\n{summary['folds']} servers left out {alone}, {summary['values']} values: "
              f"median {summary['median_abs_error'] * 100:.1f} %, mean {summary['mean_abs_error'] * 100:.1f} %, "
              f"{summary['within_25_percent']} within 25 %")


if __name__ == "__main__":
    main()
