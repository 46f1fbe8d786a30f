# SPDX-License-Identifier: Apache-2.0
"""The type stubs declare what the extension has, no more and no less: every public function and
class of vkpaged._core, and every public member of each class, with the keyword names the
functions take."""
import ast
import inspect
import os
import re

import vkpaged
from vkpaged import _core

STUB = os.path.join(os.path.dirname(vkpaged.__file__), "_core.pyi")
ALIASES = {"DType", "FloatDType", "KvLayout", "RotaryStyle", "SplitMode", "DecodeKernel", "AttentionKernel",
           "DecodeOrder", "DecodeMerge", "Admission", "KvCacheKind", "MlaCacheForm", "HostArray", "Pairs"}


def stub_tree():
    with open(STUB) as f:
        return ast.parse(f.read())


def public(names):
    return {n for n in names if not n.startswith("_")}


def runtime_parameters(function):
    """Parameter names from pybind11's signature line(s) in the docstring."""
    names = set()
    for line in (function.__doc__ or "").splitlines():
        match = re.match(r"^(?:\d+\. )?\w+\((.*)\) ->", line)
        if match:
            names |= {p.split(":")[0].strip() for p in match.group(1).split(",") if p.strip() not in ("*", "")}
    return names - {"self"}


def test_every_module_member_is_declared_and_nothing_else():
    tree = stub_tree()
    declared = set()
    for node in tree.body:
        if isinstance(node, (ast.FunctionDef, ast.ClassDef)):
            declared.add(node.name)
        elif isinstance(node, (ast.Assign, ast.AnnAssign)):
            target = node.targets[0] if isinstance(node, ast.Assign) else node.target
            declared.add(target.id)
    assert public(dir(_core)) == public(declared - ALIASES)
    assert set(vkpaged.__all__) - {"Error", "ErrorCode", "DeviceError", "InternalError", "InvalidArgumentError",
                                   "IoError", "OutOfMemoryError", "UnsupportedError"} == public(dir(_core)) - {
                                       "error_code_name"}


def test_every_class_member_is_declared_and_functions_take_the_declared_keywords():
    for node in stub_tree().body:
        if isinstance(node, ast.ClassDef):
            cls = getattr(_core, node.name)
            declared = {n.name for n in node.body if isinstance(n, ast.FunctionDef)}
            declared |= {n.target.id for n in node.body if isinstance(n, ast.AnnAssign)}
            runtime = {n for n in public(dir(cls)) if not inspect.isclass(getattr(cls, n))}
            runtime -= public(dir(object))
            missing = runtime - declared
            assert not missing, f"{node.name}: not in the stub: {missing}"
            extra = public(declared) - runtime
            assert not extra, f"{node.name}: not in the extension: {extra}"
            for method in node.body:
                properties = {d.id for d in getattr(method, "decorator_list", []) if isinstance(d, ast.Name)}
                if isinstance(method, ast.FunctionDef) and "property" not in properties and (
                        method.name == "__init__" or not method.name.startswith("_")):
                    args = method.args
                    declared = {a.arg for a in args.args + args.kwonlyargs} - {"self"}
                    runtime = runtime_parameters(getattr(cls, method.name))
                    assert declared == runtime, f"{node.name}.{method.name}: {declared} != {runtime}"
        elif isinstance(node, ast.FunctionDef):
            args = node.args
            declared = {a.arg for a in args.args + args.kwonlyargs}
            assert declared == runtime_parameters(getattr(_core, node.name)), node.name
