#!/usr/bin/env python3
# SPDX-License-Identifier: Apache-2.0
"""Summarises the matrix decode kernel's timelines that `vkpaged bench --timeline DIR` writes
(DecodeOptions::timeline; one DIR/<case>.bin per matrix-kernel case):

    vkpaged bench --suite standard --timeline /tmp/tl
    python3 scripts/decode_timeline.py /tmp/tl/*.bin

A file holds one record of 14 32-bit words per subgroup (vkpaged::decode_timeline in
include/vkpaged/decode.hpp): SM, workgroup, subgroup, units of 32 tokens done, then five
64-bit nanosecond stamps of a device-wide clock: start, query staged, first unit done, last unit
done, end. Per case this prints how long each phase took (median, 10th and 90th percentiles over
the subgroups that had units), when subgroups started and ended, how the subgroup slots (the most
resident at once) were used over the run (unit loops, starting or merging, empty), how evenly the
SMs were filled (the most subgroups each held at once: min, median, max over SMs), and how many
subgroups were resident and how many inside their unit loop in 24 equal steps: dips in the
second row are time the memory system was not being asked for keys and values.
"""
import argparse
import os
import sys

import numpy as np

WORDS = 14
SM, WORKGROUP, SUBGROUP, UNITS, STAMPS = 0, 1, 2, 3, 4
START, STAGED, FIRST_UNIT, LOOP_DONE, END = range(5)


def load(path):
    words = np.fromfile(path, dtype=np.uint32)
    records = words[: len(words) // WORDS * WORDS].reshape(-1, WORDS)
    stamps = np.stack([records[:, STAMPS + 2 * i].astype(np.uint64) |
                       (records[:, STAMPS + 2 * i + 1].astype(np.uint64) << np.uint64(32))
                       for i in range(5)], axis=1)
    written = stamps[:, END] != 0
    records, stamps = records[written], stamps[written].astype(np.int64)
    if len(stamps):
        stamps -= stamps[:, START].min()
    return records, stamps


def spread(values):
    if len(values) == 0:
        return "-"
    p10, p50, p90 = np.percentile(values, [10, 50, 90]) / 1e3
    return f"{p50:.2f} us (p10 {p10:.2f}, p90 {p90:.2f})"


def summarise(path, steps):
    records, stamps = load(path)
    name = os.path.basename(path).removesuffix(".bin")
    if len(records) == 0:
        print(f"== {name}: no records")
        return
    units = records[:, UNITS].astype(np.int64)
    busy = units > 0
    span = stamps[:, END].max()
    print(f"== {name}: {len(records)} subgroups ({busy.sum()} with units) in "
          f"{len(np.unique(records[:, WORKGROUP]))} workgroups on {len(np.unique(records[:, SM]))} SMs, "
          f"first start to last end {span / 1e3:.1f} us")
    s, u = stamps[busy], units[busy]
    later = u > 1
    print(f"   start:                  {spread(s[:, START])}, last {s[:, START].max() / 1e3:.1f} us")
    print(f"   query staged after:     {spread(s[:, STAGED] - s[:, START])}")
    print(f"   first unit:             {spread(s[:, FIRST_UNIT] - s[:, STAGED])}")
    print(f"   each later unit:        {spread((s[later, LOOP_DONE] - s[later, FIRST_UNIT]) / (u[later] - 1))}"
          f"  ({np.median(u):.0f} units per subgroup, at most {u.max()})")
    print(f"   merge and output:       {spread(s[:, END] - s[:, LOOP_DONE])}")
    print(f"   lifetime:               {spread(s[:, END] - s[:, START])}")
    # Subgroup-time: how much of what the resident subgroups could have spent streaming went
    # to their unit loops, and how many subgroup slots (the most resident at once) stood empty.
    def resident_at(t):
        return int(((stamps[:, START] <= t) & (stamps[:, END] > t)).sum())

    slots = max(resident_at(t) for t in np.unique(stamps[:, START]))
    resident_time = float((stamps[:, END] - stamps[:, START]).sum())
    loop_time = float((s[:, LOOP_DONE] - s[:, STAGED]).sum())
    print(f"   of {slots} slots x {span / 1e3:.1f} us: {100 * loop_time / (slots * span):.1f} % in unit loops, "
          f"{100 * (resident_time - loop_time) / (slots * span):.1f} % starting or merging, "
          f"{100 * (1 - resident_time / (slots * span)):.1f} % empty")
    # How evenly the SMs were filled: the most subgroups each SM held at once.
    per_sm = []
    for sm in np.unique(records[:, SM]):
        mine = stamps[records[:, SM] == sm]
        per_sm.append(max(int(((mine[:, START] <= t) & (mine[:, END] > t)).sum()) for t in mine[:, START]))
    print(f"   most resident per SM:   min {min(per_sm)}, median {int(np.median(per_sm))}, max {max(per_sm)} "
          f"({len(per_sm)} SMs)")
    edges = np.linspace(0, span, steps + 1)
    mids = (edges[:-1] + edges[1:]) / 2
    resident = [resident_at(t) for t in mids]
    streaming = [int(((s[:, STAGED] <= t) & (s[:, LOOP_DONE] > t)).sum()) for t in mids]
    print(f"   resident, per {span / steps / 1e3:.1f} us: " + " ".join(map(str, resident)))
    print(f"   in the unit loop:        " + " ".join(map(str, streaming)))


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("files", nargs="+", help="timeline files from vkpaged bench --timeline")
    parser.add_argument("--steps", type=int, default=24, help="time steps of the occupancy rows")
    args = parser.parse_args()
    for path in sorted(args.files):
        summarise(path, args.steps)
    return 0


if __name__ == "__main__":
    sys.exit(main())
