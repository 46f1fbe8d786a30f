#!/usr/bin/env python3
# SPDX-License-Identifier: Apache-2.0
"""Writes the seed corpus of each fuzz target under fuzz/corpus/<target>/ (committed: these
are inputs, not build outputs). Deterministic: rerunning it rewrites the same files.

fuzz_npy gets small .npy files NumPy would write (every dtype the reader takes, versions
1.0/2.0/3.0, empty and scalar arrays) and a few that are almost right. The other targets read
their bytes through FuzzedDataProvider, which takes structure from the end of the input and
data from the front, so their seeds are short byte strings: all zeros (the smallest choices),
all ones (the largest) and a few pseudo-random ones that libFuzzer mutates from.
"""
import pathlib
import random
import struct

ROOT = pathlib.Path(__file__).resolve().parent / "corpus"


def npy(descr, shape, data=b"", version=(1, 0), fortran=False, pad=True):
    shape_text = "(" + ", ".join(str(d) for d in shape) + ("," if len(shape) == 1 else "") + ")"
    header = "{'descr': '%s', 'fortran_order': %s, 'shape': %s, }" % (descr, fortran, shape_text)
    length_bytes = 2 if version[0] == 1 else 4
    if pad:
        total = 6 + 2 + length_bytes + len(header) + 1
        header += " " * ((64 - total % 64) % 64)
    header += "\n"
    length = struct.pack("<H" if length_bytes == 2 else "<I", len(header))
    return b"\x93NUMPY" + bytes(version) + length + header.encode("latin1") + data


def write(target, name, data):
    d = ROOT / target
    d.mkdir(parents=True, exist_ok=True)
    (d / name).write_bytes(data)


def main():
    write("fuzz_npy", "f4_2x3", npy("<f4", (2, 3), struct.pack("<6f", 0, 1, -2, 3.5, float("inf"), -0.0)))
    write("fuzz_npy", "f2_4", npy("<f2", (4,), struct.pack("<4H", 0x3C00, 0x7BFF, 0x8001, 0x7E00)))
    write("fuzz_npy", "u2_bf16_2", npy("<u2", (2,), struct.pack("<2H", 0x3F80, 0xFF80)))
    write("fuzz_npy", "u1_fp8_3", npy("|u1", (3,), bytes([0x00, 0x7E, 0xFF])))
    write("fuzz_npy", "i4_2x2_v2", npy("<i4", (2, 2), struct.pack("<4i", 0, -1, 2**31 - 1, 7), version=(2, 0)))
    write("fuzz_npy", "u4_1_v3", npy("<u4", (1,), struct.pack("<I", 2**32 - 1), version=(3, 0)))
    write("fuzz_npy", "i8_rank5", npy("<i8", (1, 1, 1, 1, 2), struct.pack("<2q", -5, 2**40)))
    write("fuzz_npy", "f4_empty", npy("<f4", (0, 3)))
    write("fuzz_npy", "f4_scalar", npy("<f4", (), struct.pack("<f", 1.0)))
    write("fuzz_npy", "fortran", npy("<f4", (1,), struct.pack("<f", 1.0), fortran=True))
    write("fuzz_npy", "big_endian", npy(">f4", (1,), struct.pack(">f", 1.0)))
    write("fuzz_npy", "truncated", npy("<f4", (4,), struct.pack("<2f", 1.0, 2.0)))
    write("fuzz_npy", "unpadded", npy("<i4", (1,), struct.pack("<i", 3), pad=False))

    rng = random.Random(20240601)
    for target in ("fuzz_decode_args", "fuzz_cache_args", "fuzz_block_manager", "fuzz_kv_cache_plan", "fuzz_page_tables"):
        write(target, "zeros", bytes(64))
        write(target, "ones", b"\xff" * 64)
        for i, size in enumerate((24, 48, 96, 200, 400)):
            write(target, "random%d" % i, bytes(rng.randrange(256) for _ in range(size)))


if __name__ == "__main__":
    main()
