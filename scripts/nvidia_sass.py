#!/usr/bin/env python3
# SPDX-License-Identifier: Apache-2.0
"""Disassembles the machine code (SASS) of the compute pipelines that NVIDIA's Vulkan driver
wrote to its shader disk cache, so that kernel work can read what the compiler made of a shader.

    mkdir -p /tmp/glc
    __GL_SHADER_DISK_CACHE=1 __GL_SHADER_DISK_CACHE_PATH=/tmp/glc \\
    __GL_SHADER_DISK_CACHE_SKIP_CLEANUP=1 vkpaged bench --suite standard   # compiles the pipelines
    python3 scripts/nvidia_sass.py /tmp/glc out/sass [--nvdisasm PATH] [--arch SM90] [--loops N]

Writes one `pipelineNN.sass` per compiled pipeline and prints a line per pipeline (code bytes,
instructions, and counts of a few instructions worth watching); with --loops N, also each loop
(a branch back to an earlier address) with its N most frequent instructions. A pipeline's code size equals
the "Binary Size" that VKPAGED_PIPELINE_STATS=1 prints for it, which tells them apart.

Needs `nvdisasm` (CUDA toolkit, or the copy that Triton ships in
triton/backends/nvidia/bin) and the `zstd` command. The cache layout is the driver's own and
undocumented; what this reads was observed with driver 580.159.04: a cache file holds zstd
frames; a frame that decompresses to an "NVDANVVMNVuc" blob holds one pipeline's code, whose
size is the 32-bit word at byte 0x4c and which starts 8 bytes past the offset in the next word.
"""
import argparse
import glob
import os
import re
import shutil
import struct
import subprocess
import sys

ZSTD_MAGIC = b"\x28\xb5\x2f\xfd"
BLOB_MAGIC = b"NVDANVVMNVuc"
EXIT = b"\x4d\x79\x00\x00\x00\x00\x00\x00"  # the low half of an EXIT instruction
ADDRESS = re.compile(r"\s+/\*([0-9a-f]{4,})\*/")  # how an instruction line of nvdisasm starts
PREDICATE = r"(?:@!?U?P\w+\s+)?"                  # an optional guard such as @!P0
WATCHED = ["HMMA", "LDG", "LDS", "STS", "LDL", "STL", "MOVM", "SHFL", "MUFU", "BAR", "ISETP", "IMAD.MOV"]  # LDL/STL: spills


def find_nvdisasm(given):
    candidates = [given] if given else []
    candidates += [shutil.which("nvdisasm"), "/usr/local/cuda/bin/nvdisasm"]
    try:
        import triton  # noqa: F401  (only for where its bundled tools are)
        candidates.append(os.path.join(os.path.dirname(triton.__file__), "backends/nvidia/bin/nvdisasm"))
    except ImportError:
        pass
    for c in candidates:
        if c and os.path.isfile(c):
            return c
    sys.exit("nvdisasm not found: pass --nvdisasm PATH")


def zstd_frames(data):
    """The decompressed frames of a cache file (each cut at the next frame's magic)."""
    starts = [m.start() for m in re.finditer(re.escape(ZSTD_MAGIC), data)]
    for i, start in enumerate(starts):
        end = starts[i + 1] if i + 1 < len(starts) else len(data)
        out = subprocess.run(["zstd", "-d", "-c", "-q"], input=data[start:end], capture_output=True).stdout
        if out:
            yield out


def disassemble(nvdisasm, arch, code, workdir):
    path = os.path.join(workdir, "code.bin")
    with open(path, "wb") as f:
        f.write(code)
    r = subprocess.run([nvdisasm, "-b", arch, path], capture_output=True, text=True)
    return r.stdout, r.stderr.strip()


def blob_code(nvdisasm, arch, blob, workdir):
    """The code of a blob: its size and offset from the header (the offset word plus 8 with
    driver 580), else the first place where an instruction stream decodes cleanly."""
    size, offset = struct.unpack_from("<II", blob, 0x4C)

    def decodes(start):
        text, err = disassemble(nvdisasm, arch, blob[start:start + 160], workdir)
        return not err and re.search(r"\b(S2R|S2UR|MOV|IMAD|ULDC)\b", text)

    if offset + 8 + size <= len(blob) and decodes(offset + 8):
        return blob[offset + 8:offset + 8 + size]
    exit_at = blob.find(EXIT)
    for start in range(8, min(8192, len(blob)), 16):
        if (exit_at < 0 or (exit_at - start) % 16 == 0) and decodes(start):
            return blob[start:start + size]
    return None


def loops(lines):
    """(first, last) line indices of each loop: a branch back to an earlier address."""
    address = {}
    for i, line in enumerate(lines):
        m = ADDRESS.match(line)
        if m:
            address[int(m.group(1), 16)] = i
    found = []
    for i, line in enumerate(lines):
        m = re.match(ADDRESS.pattern + r"\s+" + PREDICATE + r"BRA\s+(?:`\()?0x([0-9a-f]+)", line)
        if m and int(m.group(2), 16) < int(m.group(1), 16) and int(m.group(2), 16) in address:
            found.append((address[int(m.group(2), 16)], i))
    return found


def opcode_histogram(lines, top):
    counts = {}
    for line in lines:
        body = line.split("*/", 1)[-1].strip()
        body = re.sub("^" + PREDICATE, "", body)
        op = body.split(" ", 1)[0].rstrip(";")
        if op:
            counts[op] = counts.get(op, 0) + 1
    return ", ".join(f"{op} {n}" for op, n in sorted(counts.items(), key=lambda kv: -kv[1])[:top])


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("cache_dir", help="the __GL_SHADER_DISK_CACHE_PATH the driver wrote to")
    ap.add_argument("out_dir", help="where the .sass files go")
    ap.add_argument("--nvdisasm", help="path of nvdisasm")
    ap.add_argument("--arch", default="SM90", help="nvdisasm -b architecture (SM90 for an H100/H200)")
    ap.add_argument("--loops", type=int, default=0, metavar="N",
                    help="also print each loop's size and its N most frequent instructions")
    args = ap.parse_args()
    nvdisasm = find_nvdisasm(args.nvdisasm)
    if not shutil.which("zstd"):
        sys.exit("the zstd command is needed (apt install zstd)")
    os.makedirs(args.out_dir, exist_ok=True)

    count = 0
    for cache_file in sorted(glob.glob(os.path.join(args.cache_dir, "**", "*.bin"), recursive=True)):
        with open(cache_file, "rb") as f:
            data = f.read()
        for blob in zstd_frames(data):
            if not blob.startswith(BLOB_MAGIC):
                continue
            code = blob_code(nvdisasm, args.arch, blob, args.out_dir)
            if code is None:
                continue
            text, err = disassemble(nvdisasm, args.arch, code, args.out_dir)
            lines = [line for line in text.splitlines() if ADDRESS.match(line)]
            name = os.path.join(args.out_dir, f"pipeline{count:02d}.sass")
            with open(name, "w") as f:
                f.write("\n".join(lines) + "\n")
            counts = ", ".join(f"{w} {sum(w in line for line in lines)}" for w in WATCHED)
            print(f"{name}: {len(code)} bytes, {len(lines)} instructions; {counts}" + (f" ({err})" if err else ""))
            for first, last in loops(lines) if args.loops else []:
                body = lines[first:last + 1]
                print(f"  loop at line {first + 1}: {len(body)} instructions; {opcode_histogram(body, args.loops)}")
            count += 1
    scratch = os.path.join(args.out_dir, "code.bin")
    if os.path.exists(scratch):
        os.remove(scratch)
    if count == 0:
        sys.exit(f"no pipeline code found under {args.cache_dir}")


if __name__ == "__main__":
    main()
