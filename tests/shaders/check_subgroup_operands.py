#!/usr/bin/env python3
# SPDX-License-Identifier: Apache-2.0
"""Fails where a shader puts a subgroup operation that reads other lanes (a shuffle, broadcast,
reduction, scan or ballot) in the right operand of || or &&, or in a branch of ?:. GLSL evaluates
those operands only on the lanes that need them, so the operation runs on some lanes, and what it
reads from a lane that skipped it is undefined (the matrix decode kernel lost its poisoned heads'
NaN LSE so on an H100, 2026-12-05).
Votes (subgroupAny, subgroupAll, subgroupAllEqual) are not flagged: the shaders use them after
conditions every lane of the subgroup shares.

Usage: check_subgroup_operands.py SOURCE_DIR   (checks SOURCE_DIR/shaders/**/*.comp, *.glsl, *.h)
"""
import pathlib
import re
import sys

LANE_READING = re.compile(
    r"\bsubgroup(Shuffle\w*|Broadcast\w*|Add|Mul|Min|Max|And|Or|Xor|Inclusive\w+|Exclusive\w+|"
    r"Clustered\w+|Quad\w+|Ballot\w*)\s*\(")
CONDITIONAL = re.compile(r"\|\||&&|\?")


def strip_comments(text):
    text = re.sub(r"/\*.*?\*/", lambda m: "\n" * m.group(0).count("\n"), text, flags=re.S)
    return re.sub(r"//[^\n]*", "", text)


def findings(text):
    """(line, statement) of each statement with a lane-reading operation after ||, && or ?."""
    text = strip_comments(text)
    out = []
    start = 0
    for match in re.finditer(r"[;{}]", text):
        statement = text[start:match.start()]
        first = CONDITIONAL.search(statement)
        if first is not None and LANE_READING.search(statement, first.end()):
            line = text.count("\n", 0, start + first.start()) + 1
            out.append((line, " ".join(statement.split())))
        start = match.end()
    return out


def main():
    # The check itself: the pattern that was wrong, and the form that replaced it.
    assert findings("poisoned = poisoned || subgroupShuffleXor(poisoned, x);"), "the check misses the known case"
    assert not findings("const bool other = subgroupShuffleXor(poisoned, x);\npoisoned = poisoned || other;")
    root = pathlib.Path(sys.argv[1])
    files = sorted(p for ext in ("*.comp", "*.glsl", "*.h") for p in (root / "shaders").rglob(ext))
    if not files:
        print(f"check_subgroup_operands: no shaders under {root / 'shaders'}")
        return 1
    bad = 0
    for path in files:
        for line, statement in findings(path.read_text()):
            print(f"{path.relative_to(root)}:{line}: a lane-reading subgroup operation after ||, && or ?: {statement}")
            bad += 1
    print(f"check_subgroup_operands: {len(files)} shader files, {bad} finding(s)")
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
