#!/usr/bin/env python3
# SPDX-License-Identifier: Apache-2.0
"""Places each case of `vkpaged bench --json` runs among nvidia-smi's clock samples and says
which cases were timed below the SM clock the card boosts to (bench/experiments/disturbed-runs.md:
an idle NVIDIA GPU lowers its SM clock, and a case timed at 345 MHz takes 4-5 times its time).

    nvidia-smi --query-gpu=timestamp,clocks.sm --format=csv,noheader,nounits -lms 50 > clocks.csv &
    vkpaged bench --suite mla --flush-caches --warm-start --json run.json; kill %1
    python3 scripts/bench_clocks.py clocks.csv run.json

Each case's `wall_clock_s` (every suite's JSON) gives when its timed repetitions ran;
the samples from 50 ms before their start to their end are its clocks (nvidia-smi reads with some
delay). A line per case: its median, the SM clock's least and greatest sample there, and a flag:
`LOW` where every sample is below 90 % of the highest clock in the file, `rising` where only
some are. The timestamps are read as local time: run it where the samples were taken, or with
TZ set as there. Exit status 0, or 2 for unreadable input; `--fail-on-low` makes a LOW case exit 1.
Columns after the timestamp and the SM clock are ignored, so the query may ask for more.
"""
import argparse
import datetime
import json
import sys

LEAD_S = 0.05    # samples this long before the timed repetitions still count (nvidia-smi's delay)
LOW_SHARE = 0.9  # below this share of the file's highest SM clock a sample is low


def read_samples(path):
    """(unix seconds, SM clock MHz) for every line of an nvidia-smi csv that has both."""
    samples = []
    with open(path) as f:
        for line in f:
            parts = [p.strip() for p in line.split(",")]
            if len(parts) < 2:
                continue
            try:
                t = datetime.datetime.strptime(parts[0], "%Y/%m/%d %H:%M:%S.%f").timestamp()
                samples.append((t, float(parts[1].split()[0])))
            except (ValueError, IndexError):
                continue
    samples.sort()
    return samples


def case_clocks(samples, wall):
    """The SM clocks sampled while the case's timed repetitions ran; the nearest sample where
    none fell inside (a case shorter than the sampling interval)."""
    start, end = wall["timed"] - LEAD_S, wall["end"]
    inside = [mhz for t, mhz in samples if start <= t <= end]
    if inside or not samples:
        return inside
    middle = 0.5 * (wall["timed"] + wall["end"])
    return [min(samples, key=lambda s: abs(s[0] - middle))[1]]


def place(samples, runs):
    """One line per timed case of each run, and the number of cases timed wholly at a low clock."""
    boost = max((mhz for _, mhz in samples), default=0.0)
    lines, low = [], 0
    for name, run in runs:
        for case in run.get("cases", []):
            wall = case.get("wall_clock_s")
            if case.get("skipped") or not wall or not case.get("median_us"):
                continue
            clocks = case_clocks(samples, wall)
            if not clocks:
                flag, span = "no samples", "-"
            else:
                lo, hi = min(clocks), max(clocks)
                span = f"{lo:.0f}" if lo == hi else f"{lo:.0f}-{hi:.0f}"
                flag = "LOW" if hi < LOW_SHARE * boost else "rising" if lo < LOW_SHARE * boost else ""
                low += flag == "LOW"
            label = case.get("name", "?")
            if "round" in case:
                label += f" (round {case['round']})"
            lines.append(f"{name}  {label:34s} {case['median_us']:10.1f} us  SM {span:>9s} MHz  {flag}".rstrip())
    return boost, lines, low


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("clocks", help="nvidia-smi csv: timestamp, SM clock (MHz), anything after")
    ap.add_argument("runs", nargs="+", help="vkpaged bench --json files")
    ap.add_argument("--fail-on-low", action="store_true", help="exit 1 where a case was timed wholly at a low clock")
    args = ap.parse_args()
    try:
        samples = read_samples(args.clocks)
        runs = [(path, json.load(open(path))) for path in args.runs]
    except (OSError, ValueError) as e:
        print(f"bench_clocks: {e}", file=sys.stderr)
        return 2
    if not samples:
        print(f"bench_clocks: no clock samples in {args.clocks}", file=sys.stderr)
        return 2
    boost, lines, low = place(samples, runs)
    print(f"bench_clocks: {len(samples)} samples, highest SM clock {boost:.0f} MHz; "
          f"{len(lines)} cases, {low} timed wholly below {LOW_SHARE * boost:.0f} MHz")
    print("\n".join(lines))
    return 1 if args.fail_on_low and low else 0


if __name__ == "__main__":
    sys.exit(main())
