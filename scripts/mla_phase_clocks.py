#!/usr/bin/env python3
# SPDX-License-Identifier: Apache-2.0
"""Where the MLA tensor-core kernel's time goes, from the phase-clocks diagnostic build.

scripts/mla-diagnostic-builds.sh builds `phase-clocks` (scripts/mla-phase-clocks.patch): each
workgroup's invocation 0 sums the SM cycles (its subgroup's clock) of each phase of its key tiles,
a phase being the stretch from one of the tile's barriers to the next, and writes them, its SM, its
warp and its start and end on the device's clock (ns) in place of row 0 of its head group's output.
`VKPAGED_DIAG_DUMP=DIR vkpaged bench --suite mla --case C --split single` then writes each case's
output to DIR/<case>-single.bin (bf16 [requests, heads, 512]); this reads every such file in DIR:

  scripts/mla_phase_clocks.py DIR

For each case: the workgroups, the SMs they ran on and the most that ran on one SM at one time
(several at once: the SM holds them together), their span and durations, the SM clock they saw
(cycles over nanoseconds), and the cycles per key tile of each phase (the barriers' waits
included: a phase ends when the tile's slowest subgroup reaches its barrier) and per workgroup.
Since 471b255 the softmax's rows exchange their maxima by subgroup shuffles, no barrier between
"max" and "p": "max" is then invocation 0's own logits and exchange, and "p" from there to the
barrier after P (the slowest subgroup's wait falls in "p").
Exit status 2 when DIR holds no dump.
"""
import glob
import os
import re
import struct
import sys

MAGIC = 0x50484153  # "PHAS"
RECORD_WORDS = 17
ROW_BYTES = 512 * 2  # one output row: Dv 512 bf16
GROUP = 16  # heads per workgroup (the matrix kernel's rows: 1 token x 16 heads)
PHASES = ["setup", "load", "store", "scores", "max", "p", "values", "epilogue"]
TILE_PHASES = range(1, 7)


def records(path, requests, heads):
    data = open(path, "rb").read()
    found, missing = [], 0
    for r in range(requests):
        for g in range(0, heads, GROUP):
            offset = (r * heads + g) * ROW_BYTES
            if offset + 4 * RECORD_WORDS > len(data):
                missing += 1
                continue
            w = struct.unpack_from(f"<{RECORD_WORDS}I", data, offset)
            if w[0] != MAGIC:
                missing += 1
                continue
            found.append({"sm": w[1], "t0": w[2] | (w[3] << 32), "t1": w[4] | (w[5] << 32), "tiles": w[6],
                          "cycles": w[7], "phases": w[8:16], "warp": w[16]})
    return found, missing


def most_at_once(intervals):
    events = sorted([(a, 1) for a, _ in intervals] + [(b, -1) for _, b in intervals], key=lambda e: (e[0], e[1]))
    running = most = 0
    for _, step in events:
        running += step
        most = max(most, running)
    return most


def main():
    if len(sys.argv) != 2:
        print("usage: mla_phase_clocks.py DIR", file=sys.stderr)
        return 2
    paths = sorted(glob.glob(os.path.join(sys.argv[1], "*-single.bin")))
    if not paths:
        print(f"mla_phase_clocks: no <case>-single.bin in {sys.argv[1]}", file=sys.stderr)
        return 2
    for path in paths:
        name = os.path.basename(path)[: -len(".bin")]
        m = re.match(r"(?:q-)?r(\d+)-\d+k-h(\d+)-", name)
        if not m:
            print(f"{name}: not an mla case's name")
            continue
        recs, missing = records(path, int(m.group(1)), int(m.group(2)))
        if missing:
            print(f"{name}: {missing} workgroups without a record")
        if not recs:
            continue
        by_sm = {}
        for x in recs:
            by_sm.setdefault(x["sm"], []).append((x["t0"], x["t1"]))
        durations = sorted(x["t1"] - x["t0"] for x in recs)
        span = max(x["t1"] for x in recs) - min(x["t0"] for x in recs)
        ns = sum(durations)
        cycles = sum(x["cycles"] for x in recs)
        tiles = sum(x["tiles"] for x in recs)
        print(f"{name}: {len(recs)} workgroups on {len(by_sm)} SMs, at most "
              f"{max(most_at_once(v) for v in by_sm.values())} at once on one; span {span / 1e3:.1f} us, a workgroup "
              f"{durations[0] / 1e3:.1f}-{durations[-1] / 1e3:.1f} us (median {durations[len(durations) // 2] / 1e3:.1f}); "
              f"{tiles / len(recs):.1f} key tiles each; SM clock {cycles / ns if ns else 0.0:.3f} GHz")
        per_tile = [sum(x["phases"][i] for x in recs) / tiles if tiles else 0.0 for i in range(len(PHASES))]
        tile_total = sum(per_tile[i] for i in TILE_PHASES)
        print("  cycles per key tile: " + ", ".join(
            f"{PHASES[i]} {per_tile[i]:.0f} ({100 * per_tile[i] / tile_total if tile_total else 0:.0f}%)" for i in TILE_PHASES)
            + f"; all {tile_total:.0f}")
        once = [sum(x["phases"][i] for x in recs) / len(recs) for i in (0, 7)]
        print(f"  cycles per workgroup: setup {once[0]:.0f}, epilogue {once[1]:.0f}, all {cycles / len(recs):.0f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
