#!/usr/bin/env python3
# SPDX-License-Identifier: Apache-2.0
"""The C++ blocks of README.md and docs/*.md compile against include/.

Each ```cpp block follows, on the line just before its fence, one of these markers (HTML
comments: GitHub does not show them):

  <!-- compile -->               the block is a whole translation unit, compiled as it stands
  <!-- compile in: SIGNATURE --> the block's #include lines, then the rest of it as the body of
                                 SIGNATURE, e.g. <!-- compile in: void step(VkCommandBuffer cmd) -->
                                 for a block that uses a `cmd` it does not declare
  <!-- snippet: NAME -->         docs/integration.md only: the block is region NAME of
                                 tests/docs/test_integration.cpp, which compiles it (and
                                 IntegrationDoc.SnippetsAreThisFilesCode checks that it is)
  <!-- fragment -->              not meant to compile (say why in the text around it)

A block without a marker fails, so that none is left out unnoticed. Each block to compile goes
to the C++ compiler with -std=c++20 -fsyntax-only and the include directories given; its errors
name the document's lines.

Run by ctest (tests/CMakeLists.txt, test DocsCppBlocks):
  check_cpp_blocks.py SOURCE_DIR --cxx COMPILER -I DIR [-I DIR ...]
The test cases below check the documents, and that planted defects fail the check.
"""
import argparse
import glob
import os
import re
import subprocess
import sys
import tempfile
import unittest

DOC_GLOBS = ["README.md", "docs/*.md"]
CPP_FENCE = re.compile(r"^```(cpp|c\+\+|cxx)\s*$")
MARKER = re.compile(r"^<!--\s*(compile in:|compile|snippet:|fragment)\s*(.*?)\s*-->\s*$")
SNIPPET_DOC = "docs/integration.md"


def cpp_blocks(text):
    """(marker line, line number of the block's first code line, code) of each ```cpp block."""
    lines = text.splitlines()
    blocks = []
    i = 0
    while i < len(lines):
        if CPP_FENCE.match(lines[i]):
            end = i + 1
            while end < len(lines) and not lines[end].startswith("```"):
                end += 1
            marker = lines[i - 1] if i > 0 else ""
            blocks.append((marker, i + 2, "\n".join(lines[i + 1:end]) + "\n"))
            i = end
        i += 1
    return blocks


def translation_unit(kind, signature, doc_name, first_line, code):
    """The source to compile for a block; #line directives make errors name the document."""
    if kind == "compile":
        return f'#line {first_line} "{doc_name}"\n{code}'
    # compile in: the #include lines first, the rest (line for line) as the function's body.
    lines = code.splitlines()
    includes = [line for line in lines if line.lstrip().startswith("#include")]
    body = ["" if line.lstrip().startswith("#include") else line for line in lines]
    return "\n".join(includes) + f"\n{signature} {{\n#line {first_line} \"{doc_name}\"\n" + "\n".join(body) + "\n}\n"


def compile_problem(source, root, cxx, include_dirs):
    """The compiler's errors for a source; None when it compiles. It runs in the repository's
    root, so that it quotes the document's lines that #line names."""
    with tempfile.TemporaryDirectory() as tmp:
        path = os.path.join(tmp, "block.cpp")
        with open(path, "w", encoding="utf-8") as f:
            f.write(source)
        command = [cxx, "-std=c++20", "-fsyntax-only"] + [f"-I{d}" for d in include_dirs] + [path]
        result = subprocess.run(command, capture_output=True, text=True, cwd=root)
    if result.returncode == 0:
        return None
    return "does not compile:\n" + result.stderr.strip()


def doc_problems(root, doc, cxx, include_dirs):
    """(problems, blocks compiled) of a document's C++ blocks: one entry per problem (a line, or
    the compiler's output), none when all is well."""
    name = os.path.relpath(doc, root)
    with open(doc, encoding="utf-8") as f:
        text = f.read()
    problems = []
    compiled = 0
    for marker_line, first_line, code in cpp_blocks(text):
        where = f"{name}:{first_line - 1}"
        marker = MARKER.match(marker_line)
        if not marker:
            problems.append(f"{where}: a ```cpp block without a marker on the line before it "
                            "(<!-- compile -->, <!-- compile in: SIGNATURE -->, <!-- fragment -->)")
            continue
        kind, argument = marker.group(1).rstrip(":"), marker.group(2)
        if kind == "fragment":
            continue
        if kind == "snippet":
            if name != SNIPPET_DOC:
                problems.append(f"{where}: <!-- snippet: --> blocks are compiled only in {SNIPPET_DOC}")
            continue
        if kind == "compile" and argument:
            problems.append(f"{where}: unknown marker '{marker_line}'")
            continue
        if kind == "compile in" and not argument:
            problems.append(f"{where}: <!-- compile in: --> names no function signature")
            continue
        compiled += 1
        problem = compile_problem(translation_unit(kind, argument, name, first_line, code), root, cxx, include_dirs)
        if problem:
            problems.append(f"{where}: the block {problem}")
    return problems, compiled


ARGS = None


class TheDocuments(unittest.TestCase):
    maxDiff = None

    def test_every_cpp_block_is_marked_and_compiles(self):
        docs = sorted(set(d for pattern in DOC_GLOBS for d in glob.glob(os.path.join(ARGS.source_dir, pattern))))
        self.assertGreater(len(docs), 5, "the documents were not found")
        problems, compiled = [], 0
        for doc in docs:
            p, c = doc_problems(ARGS.source_dir, doc, ARGS.cxx, ARGS.include_dirs)
            problems += p
            compiled += c
        self.assertEqual("\n".join(problems), "")
        self.assertGreaterEqual(compiled, 1, "README.md's C++ example is compiled")


class PlantedDefects(unittest.TestCase):
    """Documents with one block each: a good one passes, each planted defect fails."""

    GOOD_BODY = ("#include <vkpaged/decode.hpp>\n\n"
                 "vkpaged::DecodeShape shape;\n"
                 "auto plan = vkpaged::DecodePlan::create(ctx, shape);\n")

    def problems(self, text, name="README.md"):
        with tempfile.TemporaryDirectory() as root:
            doc = os.path.join(root, name)
            os.makedirs(os.path.dirname(doc), exist_ok=True)
            with open(doc, "w", encoding="utf-8") as f:
                f.write(text)
            return doc_problems(root, doc, ARGS.cxx, ARGS.include_dirs)

    def test_good_blocks_compile(self):
        text = ("# Title\n\n<!-- compile in: void example(vkpaged::Context& ctx) -->\n```cpp\n" + self.GOOD_BODY +
                "```\n\n<!-- compile -->\n```cpp\n#include <vkpaged/dtype.hpp>\nint main() {}\n```\n"
                "<!-- fragment -->\n```cpp\nnot C++ at all\n```\n")
        self.assertEqual(self.problems(text), ([], 2))

    def test_a_block_that_does_not_compile_fails(self):
        # README.md's example as it was: DecodeOptions has no softcap (DecodeParams has).
        text = ("# Title\n\n<!-- compile in: void example(vkpaged::Context& ctx) -->\n```cpp\n" +
                self.GOOD_BODY.replace("(ctx, shape)", "(ctx, shape, {.softcap = 0.0f})") + "```\n")
        problems, compiled = self.problems(text)
        self.assertEqual(compiled, 1)
        self.assertEqual(len(problems), 1, problems)
        self.assertTrue(problems[0].startswith("README.md:4: the block does not compile:"), problems[0])
        self.assertIn("README.md:8:", problems[0], "the error names the document's line")
        self.assertIn("{.softcap = 0.0f}", problems[0], "the compiler quotes the document's line")

    def test_a_block_without_a_marker_fails(self):
        problems, compiled = self.problems("# Title\n\n```cpp\nint x;\n```\n")
        self.assertEqual(compiled, 0)
        self.assertEqual(len(problems), 1, problems)
        self.assertIn("README.md:3: a ```cpp block without a marker", problems[0])

    def test_a_snippet_outside_integration_md_fails(self):
        problems, _ = self.problems("<!-- snippet: model -->\n```cpp\nint x;\n```\n", name="docs/api.md")
        self.assertEqual(problems, [f"docs/api.md:2: <!-- snippet: --> blocks are compiled only in {SNIPPET_DOC}"])
        self.assertEqual(self.problems("<!-- snippet: model -->\n```cpp\nint x;\n```\n", name=SNIPPET_DOC), ([], 0))


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("source_dir", help="the repository's root")
    parser.add_argument("--cxx", required=True, help="the C++ compiler")
    parser.add_argument("-I", dest="include_dirs", action="append", default=[], help="an include directory")
    ARGS, rest = parser.parse_known_args()
    ARGS.include_dirs = [os.path.abspath(d) for d in ARGS.include_dirs]
    unittest.main(argv=[sys.argv[0]] + rest)
