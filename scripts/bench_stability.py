#!/usr/bin/env python3
# SPDX-License-Identifier: Apache-2.0
"""Runs `vkpaged bench` several times, with each case's buffers allocated anew (--no-arena) and
in one arena allocated once (--arena), and prints a compact comparison: is a run disturbed
(bench/experiments/disturbed-runs.md, performance-targets.md target 7), and does it depend on
where the buffers were allocated, on the clocks, or on neither.

    python3 scripts/bench_stability.py build/tools/vkpaged/vkpaged --out DIR -- \\
        --suite dtypes --flush-caches --warm-start --repeat 4

Every run is its own process (the order of --runs, by default per-case, arena, arena, per-case,
so that neither mode is always first after the machine starts). Each run's output and JSON go
to DIR (default $OUT, else a new temporary folder). Where nvidia-smi exists, the GPU's clocks,
power and clock-event reasons are sampled every 100 ms during each run and summarised per round.

    python3 scripts/bench_stability.py --compare DIR/*.json

compares runs already made (their JSON only).
"""
import argparse
import datetime
import json
import os
import subprocess
import sys
import tempfile
import time

SMI_FIELDS = ["timestamp", "clocks.sm", "clocks.mem", "power.draw", "temperature.gpu"]
SMI_REASONS = ["clocks_event_reasons.active", "clocks_throttle_reasons.active"]


def smi_query():
    """The nvidia-smi query this driver accepts, or None without nvidia-smi."""
    for reasons in SMI_REASONS:
        try:
            r = subprocess.run(["nvidia-smi", "--query-gpu=" + ",".join(SMI_FIELDS + [reasons]),
                                "--format=csv,noheader,nounits", "-i", "0"],
                               capture_output=True, text=True, timeout=20)
        except (OSError, subprocess.TimeoutExpired):
            return None
        if r.returncode == 0:
            return ",".join(SMI_FIELDS + [reasons])
    return None


def parse_smi(path):
    samples = []
    with open(path) as f:
        for line in f:
            parts = [p.strip() for p in line.split(",")]
            if len(parts) != len(SMI_FIELDS) + 1:
                continue
            try:
                t = datetime.datetime.strptime(parts[0], "%Y/%m/%d %H:%M:%S.%f").timestamp()
                samples.append((t, float(parts[1]), float(parts[2]), float(parts[3]), float(parts[4]), parts[5]))
            except ValueError:
                continue
    return samples


def smi_summary(samples, t0, t1):
    inside = [s for s in samples if t0 <= s[0] <= t1]
    if not inside:
        return "no clock samples"
    sm = sorted(s[1] for s in inside)
    mem = sorted(s[2] for s in inside)
    reasons = sorted({s[5] for s in inside})
    return (f"sm {sm[len(sm) // 2]:.0f} MHz ({sm[0]:.0f}-{sm[-1]:.0f}), mem {mem[0]:.0f}-{mem[-1]:.0f} MHz, "
            f"power max {max(s[3] for s in inside):.0f} W, temp max {max(s[4] for s in inside):.0f} C, "
            f"reasons {' '.join(reasons)}")


def run_bench(vkpaged, bench_args, mode, json_path, text_path, query):
    """Runs one bench process; returns (exit code, [(host time, line)], clock samples)."""
    smi = None
    smi_path = text_path + ".smi.csv"
    if query:
        smi = subprocess.Popen(["nvidia-smi", "--query-gpu=" + query, "--format=csv,noheader,nounits", "-i", "0",
                                "-lms", "100"], stdout=open(smi_path, "w"), stderr=subprocess.DEVNULL)
    cmd = [vkpaged, "bench", *bench_args, "--arena" if mode == "arena" else "--no-arena", "--json", json_path]
    lines = []
    with open(text_path, "w") as out:
        out.write("$ " + " ".join(cmd) + "\n")
        p = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
        for line in p.stdout:
            lines.append((time.time(), line.rstrip("\n")))
            out.write(line)
        code = p.wait()
    samples = []
    if smi:
        smi.terminate()
        smi.wait()
        samples = parse_smi(smi_path)
    return code, lines, samples


def round_windows(lines):
    """(round, start time, end time) from the bench's output: a round ends with its last suite's
    read-bandwidth line."""
    windows, start, rnd = [], lines[0][0] if lines else 0, 1
    for t, line in lines:
        if line.startswith("round ") and " of " in line:
            rnd = int(line.split()[1])
            start = t
        elif line.startswith("read bandwidth after the suite"):
            windows.append((rnd, start, t))
            start = t
    return windows


def describe(d):
    return "arena" if d.get("arena") else "per-case"


def compare(runs):
    """runs: [(label, json dict)]; prints the comparison."""
    print("\n== runs (read bandwidth at the start; after each suite run, the change from the start) ==")
    for label, d in runs:
        start = d["read_bandwidth_bytes_per_second"]
        changes = " ".join(f"{100 * s['read_change']:+.1f}%" for s in d["suite_runs"])
        bad_suites = sum(s["disturbed"] for s in d["suite_runs"])
        rounds = d["case_rounds"]
        bad_cases = sum(c["disturbed"] for c in rounds)
        spread = max((c["spread"] for c in rounds), default=0.0)
        print(f"{label:<16} {describe(d):<8} rounds {d['rounds']}  read {start / 1e9:7.1f} GB/s  after: {changes}  "
              f"disturbed suite runs {bad_suites}/{len(d['suite_runs'])}, cases differing {bad_cases}/{len(rounds)}, "
              f"max spread {100 * spread:.1f}%")
    names = []
    for _, d in runs:
        for c in d["case_rounds"]:
            if c["name"] not in names:
                names.append(c["name"])
    print("\n== each case: median us per round (spread) | pools' read per round, % of the run's start read ==")
    for name in names:
        print(name)
        for label, d in runs:
            start = d["read_bandwidth_bytes_per_second"]
            for c in d["case_rounds"]:
                if c["name"] != name:
                    continue
                times = " ".join(f"{x:.1f}" for x in c["median_us"])
                pools = " ".join(f"{100 * x / start:.0f}" for x in c["pool_read_bytes_per_second"]) if start else "-"
                flag = "  DISTURBED" if c["disturbed"] else ""
                print(f"  {label:<16} {describe(d):<8} {times} ({100 * c['spread']:.1f}%) | pools {pools}{flag}")
    for mode in ("per-case", "arena"):
        of_mode = [d for _, d in runs if describe(d) == mode]
        if of_mode:
            bad = sum(d["disturbed"] for d in of_mode)
            print(f"summary: {mode}: {bad} of {len(of_mode)} runs disturbed")


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter,
                                 usage="%(prog)s VKPAGED [--runs ...] [--out DIR] [--no-smi] -- BENCH OPTIONS | "
                                       "%(prog)s --compare JSON...")
    ap.add_argument("vkpaged", nargs="?", help="the vkpaged binary")
    ap.add_argument("--runs", default="per-case,arena,arena,per-case", help="the modes, one process each, in order")
    ap.add_argument("--out", default=os.environ.get("OUT"), help="folder for each run's output and JSON (default $OUT)")
    ap.add_argument("--no-smi", action="store_true", help="do not sample nvidia-smi")
    ap.add_argument("--compare", nargs="+", metavar="JSON", help="compare these runs' JSON instead of running")
    argv = sys.argv[1:]
    cut = argv.index("--") if "--" in argv else len(argv)
    a = ap.parse_args(argv[:cut])
    bench_args = argv[cut + 1:]
    if a.compare:
        compare([(os.path.basename(p), json.load(open(p))) for p in a.compare])
        return 0
    if not a.vkpaged:
        ap.error("give the vkpaged binary, or --compare")
    if any(x in ("--arena", "--no-arena", "--json") for x in bench_args):
        ap.error("--arena, --no-arena and --json are the script's to set")
    modes = a.runs.split(",")
    if any(m not in ("per-case", "arena") for m in modes):
        ap.error(f"--runs: {a.runs} is not a list of per-case and arena")
    out = a.out or tempfile.mkdtemp(prefix="bench_stability_")
    os.makedirs(out, exist_ok=True)
    query = None if a.no_smi else smi_query()
    print(f"bench_stability: {len(modes)} runs of vkpaged bench {' '.join(bench_args)}; output in {out}; "
          f"clocks {'sampled' if query else 'not sampled'}")
    runs, failed = [], 0
    for i, mode in enumerate(modes, 1):
        stem = os.path.join(out, f"run{i}-{mode}")
        t0 = time.time()
        code, lines, samples = run_bench(a.vkpaged, bench_args, mode, stem + ".json", stem + ".txt", query)
        flags = [line for _, line in lines if line.startswith("disturbed:")]
        print(f"run {i} ({mode}): exit {code}, {time.time() - t0:.0f} s, {len(flags)} disturbed lines")
        for line in flags[:6]:
            print("  " + line)
        if len(flags) > 6:
            print(f"  ... {len(flags) - 6} more in {stem}.txt")
        if query:
            for rnd, w0, w1 in round_windows(lines):
                print(f"  round {rnd}: {smi_summary(samples, w0, w1)}")
        if code != 0 or not os.path.exists(stem + ".json"):
            failed += 1
            print("  " + "\n  ".join(line for _, line in lines[-5:]))
            continue
        runs.append((f"run{i}", json.load(open(stem + ".json"))))
    if runs:
        compare(runs)
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
