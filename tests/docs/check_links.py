#!/usr/bin/env python3
# SPDX-License-Identifier: Apache-2.0
"""Every relative link of the documentation, and every document or script a comment of the code
cites, exists.

Checked:
- Markdown links [text](path), [text](path#anchor) and [text](#anchor) in README.md, docs/*.md,
  bench/*.md, bench/experiments/*.md, tools/vkpaged/README.md and examples/**/README.md
  (outside code blocks and code spans; web links are not followed). The path is relative to the
  document; an anchor must be a heading of the target, by GitHub's slug rules.
- Paths bench/...md, docs/...md, scripts/... and shaders/... in the files of src/, include/,
  shaders/, tools/ and scripts/, relative to the repository root (a #anchor after a .md path is
  checked too; a path with * must match a file).

Run by ctest (tests/CMakeLists.txt, test DocsLinks): check_links.py SOURCE_DIR. The test cases
below check the tree, and that planted broken links fail the check.
"""
import argparse
import glob
import os
import re
import sys
import tempfile
import unittest
import urllib.parse

DOC_GLOBS = ["README.md", "docs/*.md", "bench/*.md", "bench/experiments/*.md", "tools/vkpaged/README.md",
             "examples/**/README.md"]
CODE_DIRS = ["src", "include", "shaders", "tools", "scripts"]
CODE_SUFFIXES = (".cpp", ".hpp", ".h", ".c", ".comp", ".glsl", ".py", ".sh", ".txt", ".cmake")

FENCE = re.compile(r"^\s*(```|~~~)")
CODE_SPAN = re.compile(r"(`+)(?:(?!\1).)+\1")
LINK = re.compile(r"\]\(([^()\s]+)(?:\s+\"[^\"]*\")?\)")
HEADING = re.compile(r"^#{1,6}\s+(.*?)\s*#*\s*$")
# A path a comment cites: not preceded by a path character (so build/shaders/x is not one).
CITED_PATH = re.compile(r"(?<![\w./-])((?:bench|docs)/[\w./-]*?\.md(?:#[\w-]+)?|(?:scripts|shaders)/[\w./*-]+)")


def prose_lines(text):
    """(line number, line) of a Markdown text outside fenced code blocks."""
    in_fence = False
    for number, line in enumerate(text.splitlines(), 1):
        if FENCE.match(line):
            in_fence = not in_fence
            continue
        if not in_fence:
            yield number, line


def github_slug(heading):
    """The anchor GitHub gives a heading: its text as rendered (links' text, no markup),
    lowercased, every character but letters, digits, '_', '-' and spaces dropped, spaces made '-'."""
    text = re.sub(r"\[([^\]]*)\]\([^)]*\)", r"\1", heading)  # [text](url) -> text
    text = re.sub(r"<[^>]+>", "", text)                       # inline HTML tags
    text = "".join(c for c in text.lower() if c.isalnum() or c in "_- ")
    return text.replace(" ", "-")


def anchors(text):
    """The anchors of a Markdown text's headings; a repeated one gets -1, -2, ... as on GitHub."""
    seen = {}
    result = set()
    for _, line in prose_lines(text):
        match = HEADING.match(line)
        if not match:
            continue
        slug = github_slug(match.group(1))
        count = seen.get(slug, 0)
        seen[slug] = count + 1
        result.add(slug if count == 0 else f"{slug}-{count}")
    return result


class Checker:
    def __init__(self, root):
        self.root = os.path.abspath(root)
        self.anchor_cache = {}

    def rel(self, path):
        return os.path.relpath(path, self.root)

    def anchors_of(self, path):
        if path not in self.anchor_cache:
            with open(path, encoding="utf-8") as f:
                self.anchor_cache[path] = anchors(f.read())
        return self.anchor_cache[path]

    def target_problem(self, target, base_dir):
        """What is wrong with a path[#anchor] resolved from base_dir; None when it exists."""
        path, _, anchor = target.partition("#")
        path = urllib.parse.unquote(path)
        if path.startswith("/"):  # GitHub: relative to the repository root
            resolved = os.path.join(self.root, path.lstrip("/"))
        else:
            resolved = os.path.normpath(os.path.join(base_dir, path))
        if "*" in path:
            return None if glob.glob(resolved) else "matches no file"
        if not os.path.exists(resolved):
            return f"{self.rel(resolved)} does not exist"
        if anchor:
            if not resolved.endswith(".md"):
                return None if re.fullmatch(r"L\d+(-L\d+)?", anchor) else f"anchor #{anchor} into a file that is not Markdown"
            if anchor not in self.anchors_of(resolved):
                return f"no heading of {self.rel(resolved)} has the anchor #{anchor}"
        return None

    def doc_problems(self, doc):
        problems = []
        with open(doc, encoding="utf-8") as f:
            text = f.read()
        for number, line in prose_lines(text):
            for match in LINK.finditer(CODE_SPAN.sub("", line)):
                target = match.group(1)
                if re.match(r"[a-z][a-z0-9+.-]*:", target):  # https:, mailto:, ...
                    continue
                problem = self.target_problem(target if not target.startswith("#") else
                                              os.path.basename(doc) + target, os.path.dirname(doc))
                if problem:
                    problems.append(f"{self.rel(doc)}:{number}: ({target}): {problem}")
        return problems

    def code_problems(self, source):
        problems = []
        with open(source, encoding="utf-8", errors="replace") as f:
            for number, line in enumerate(f, 1):
                for match in CITED_PATH.finditer(line):
                    target = match.group(1).rstrip(".")
                    problem = self.target_problem(target, self.root)
                    if problem:
                        problems.append(f"{self.rel(source)}:{number}: {target}: {problem}")
        return problems

    def docs(self):
        found = set()
        for pattern in DOC_GLOBS:
            found.update(glob.glob(os.path.join(self.root, pattern), recursive=True))
        return sorted(found)

    def sources(self):
        found = []
        for directory in CODE_DIRS:
            for dirpath, _, names in os.walk(os.path.join(self.root, directory)):
                found += [os.path.join(dirpath, n) for n in names if n.endswith(CODE_SUFFIXES)]
        return sorted(found)

    def problems(self):
        result = []
        for doc in self.docs():
            result += self.doc_problems(doc)
        for source in self.sources():
            result += self.code_problems(source)
        return result


SOURCE_DIR = None


def write(root, path, text):
    full = os.path.join(root, path)
    os.makedirs(os.path.dirname(full), exist_ok=True)
    with open(full, "w", encoding="utf-8") as f:
        f.write(text)


class TheTree(unittest.TestCase):
    maxDiff = None

    def test_every_link_and_cited_path_exists(self):
        checker = Checker(SOURCE_DIR)
        self.assertGreater(len(checker.docs()), 20, "the documents were not found")
        self.assertGreater(len(checker.sources()), 100, "the sources were not found")
        self.assertEqual(checker.problems(), [])


class PlantedDefects(unittest.TestCase):
    """A small tree with one good target of each kind; each test plants one broken link."""

    def setUp(self):
        self.dir = tempfile.TemporaryDirectory()
        self.root = self.dir.name
        write(self.root, "docs/guide.md", "# Guide\n\n## The `KvCache`, step by step\n\n## Notes\n\n## Notes\n")
        write(self.root, "bench/RESULTS.md", "# Results\n\nSee [the guide](../docs/guide.md#notes-1).\n")
        write(self.root, "scripts/run.sh", "#!/bin/sh\n")
        write(self.root, "src/a.cpp", "// Measured: bench/RESULTS.md#results; scripts/run.sh does it.\n")
        write(self.root, "README.md", "[guide](docs/guide.md#the-kvcache-step-by-step) [web](https://example.com/x.md)\n"
                                      "```sh\n[not a link](nowhere.md)\n```\n`[code](nowhere.md)`\n")
        self.assertEqual(Checker(self.root).problems(), [], "the good tree must pass")

    def tearDown(self):
        self.dir.cleanup()

    def problems_with(self, path, text):
        write(self.root, path, text)
        return Checker(self.root).problems()

    def test_a_missing_file_fails(self):
        self.assertEqual(self.problems_with("docs/api.md", "Read [the guide](guid.md).\n"),
                         ["docs/api.md:1: (guid.md): docs/guid.md does not exist"])

    def test_a_missing_anchor_fails(self):
        self.assertEqual(self.problems_with("bench/experiments/x.md", "[n](../../docs/guide.md#notes-2)\n"),
                         ["bench/experiments/x.md:1: (../../docs/guide.md#notes-2): "
                          "no heading of docs/guide.md has the anchor #notes-2"])

    def test_a_missing_anchor_in_the_same_file_fails(self):
        self.assertEqual(self.problems_with("docs/other.md", "# Other\n\n[up](#other) [down](#othr)\n"),
                         ["docs/other.md:3: (#othr): no heading of docs/other.md has the anchor #othr"])

    def test_a_missing_document_cited_in_code_fails(self):
        self.assertEqual(self.problems_with("include/b.hpp", "// (bench/experiments/gone.md, docs/guide.md)\n"),
                         ["include/b.hpp:1: bench/experiments/gone.md: bench/experiments/gone.md does not exist"])

    def test_a_missing_anchor_cited_in_code_fails(self):
        self.assertEqual(self.problems_with("src/c.cpp", "// docs/guide.md#note.\n"),
                         ["src/c.cpp:1: docs/guide.md#note: no heading of docs/guide.md has the anchor #note"])

    def test_a_missing_script_or_shader_cited_in_code_fails(self):
        self.assertEqual(self.problems_with("tools/d.cpp", "// scripts/runs.sh, shaders/*.comp\n"),
                         ["tools/d.cpp:1: scripts/runs.sh: scripts/runs.sh does not exist",
                          "tools/d.cpp:1: shaders/*.comp: matches no file"])


class Slugs(unittest.TestCase):
    def test_github_slug_rules(self):
        self.assertEqual(github_slug("mha32's partitions and kernels"), "mha32s-partitions-and-kernels")
        self.assertEqual(github_slug("Landed: counters of their own, small merges only"),
                         "landed-counters-of-their-own-small-merges-only")
        self.assertEqual(github_slug("The `KvCache` and [its pools](x.md)"), "the-kvcache-and-its-pools")
        self.assertEqual(github_slug("16 subgroups per workgroup"), "16-subgroups-per-workgroup")
        self.assertEqual(github_slug("2026-12-03: values with keys, call 5"), "2026-12-03-values-with-keys-call-5")
        self.assertEqual(github_slug("snake_case and -- dashes"), "snake_case-and----dashes")


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("source_dir", help="the repository's root")
    args, rest = parser.parse_known_args()
    SOURCE_DIR = args.source_dir
    unittest.main(argv=[sys.argv[0]] + rest)
