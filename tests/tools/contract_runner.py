# SPDX-License-Identifier: Apache-2.0
"""What the two contract checks share (contract_check.py: decode; contract_check_multi_query.py:
multi-query attention and MLA): their common options, running `vkpaged attend` on a good case,
the verdict on its output and on a refused bad input, and the loop that runs each case in a folder
of its own, counts it and prints the summary line."""
import os
import shutil
import subprocess
import sys
import tempfile

import numpy as np

from contract_math import TOLERANCE, stored_values

# A good case that the kernel forced by --kernel refuses (the CLI says why): counted apart.
NOT_TAKEN = "not taken by the forced kernel"


def add_common_arguments(parser, count, count_help, bad):
    """The options both checks take: the CLI, how many good (`count`) and bad (`bad`) cases, the
    seed, the device and kernel passed on, and --verbose."""
    parser.add_argument("cli", help="path to the vkpaged binary")
    parser.add_argument("--count", type=int, default=count, help=f"{count_help} (default {count})")
    parser.add_argument("--seed", type=int, default=1, help="random seed (default 1)")
    parser.add_argument("--device", default="", help="passed to --device (default: the CLI's default)")
    parser.add_argument("--bad", type=int, default=bad, help="bad-input cases (default: one of each kind)")
    parser.add_argument("--kernel", default="", help="passed to --kernel (default: the CLI's choice); cases the forced kernel refuses are counted apart")
    parser.add_argument("--verbose", action="store_true", help="print every case")


def passed_flags(args):
    """The CLI flags --device and --kernel pass on."""
    return (["--device", args.device] if args.device else []) + (["--kernel", args.kernel] if args.kernel else [])


def attend_problem(command, flags):
    """Runs a good case's `vkpaged attend` command: None when it succeeded (exit 0, nothing on
    stderr), NOT_TAKEN when the kernel forced by --kernel (in `flags`) refuses the case, else what
    went wrong."""
    run = subprocess.run(command, capture_output=True, text=True, timeout=300)
    if run.returncode == 1 and "--kernel" in flags and run.stderr.startswith("vkpaged: --kernel:"):
        return NOT_TAKEN
    if run.returncode != 0:
        return f"exit {run.returncode}: {run.stderr.strip()}"
    if run.stderr:
        return f"exit 0 but stderr not empty: {run.stderr.strip()[:300]}"
    return None


def output_problems(got, want, dtype, got_lse=None, want_lse=None):
    """What is wrong with the CLI's output `got` (as np.load reads it: f32, f16, or bf16 as uint16
    bits) against the contract's float64 `want` [T, H, Dv]: its type and shape, a non-finite entry,
    an error past the dtype's tolerance; with `got_lse` [T, H], the log-sum-exp: f32, -inf exactly
    where `want_lse` is, elsewhere within 1e-3 plus that tolerance. None when nothing is."""
    descr = {"f32": "<f4", "f16": "<f2", "bf16": "<u2"}[dtype]
    if got.dtype.str != descr or got.shape != want.shape:
        return f"output {got.dtype.str} {got.shape}, expected {descr} {want.shape}"
    if got_lse is not None and (got_lse.dtype.str != "<f4" or got_lse.shape != want.shape[:2]):
        return f"lse {got_lse.dtype.str} {got_lse.shape}, expected <f4 {want.shape[:2]}"
    values = stored_values(got, dtype)
    if not np.all(np.isfinite(values)):
        return "non-finite output"
    tol = TOLERANCE[dtype]
    err = float(np.abs(values - want).max()) if want.size else 0.0
    if err > tol:
        return f"max |output error| {err:.3e} > {tol:.0e}"
    if got_lse is None:
        return None
    empty = np.isinf(want_lse)
    if not np.array_equal(np.isinf(got_lse) & (got_lse < 0), empty):
        return "LSE is -inf where the range is not empty, or the other way"
    lse_err = float(np.abs(got_lse[~empty] - want_lse[~empty]).max()) if (~empty).any() else 0.0
    return None if lse_err <= 1e-3 + tol else f"max |LSE error| {lse_err:.3e}"


def refusal_problems(run, must, outputs):
    """What is wrong with the CLI's answer `run` (subprocess.run) to a bad input: it must fail
    (not crash), say why in one 'vkpaged: ' line naming `must`, and leave none of `outputs`."""
    problems = []
    if run.returncode == 0 or run.returncode >= 128 or run.returncode < 0:
        problems.append(f"exit {run.returncode}")
    if run.stderr.count("\n") != 1 or not run.stderr.startswith("vkpaged: "):
        problems.append(f"stderr is not one 'vkpaged: ' line: {run.stderr!r}")
    if must not in run.stderr:
        problems.append(f"stderr does not name {must}: {run.stderr.strip()}")
    if any(os.path.exists(path) for path in outputs):
        problems.append("an output file was left behind")
    return "; ".join(problems) or None


def run_cases(name, makers, args, forced):
    """Runs the cases in order: each maker, called when its case's turn comes (the cases draw from
    one random generator), returns (label, check), and check(directory) returns None (passed),
    NOT_TAKEN or the problem. `forced`: how many of the cases a forced kernel (args.kernel) may
    refuse; if it refuses all of them the check fails too. Returns the exit status."""
    passed = failed = not_taken = 0
    work = tempfile.mkdtemp(prefix=f"vkpaged_{name}_")
    try:
        for n, make in enumerate(makers):
            directory = os.path.join(work, str(n))
            os.makedirs(directory)
            label, check = make()
            problem = check(directory)
            shutil.rmtree(directory)
            if problem is NOT_TAKEN:
                not_taken += 1
                if args.verbose:
                    print(f"--kernel {args.kernel} refuses case {n}: {label}")
            elif problem is None:
                passed += 1
                if args.verbose:
                    print(f"ok   case {n}: {label}")
            else:
                failed += 1
                print(f"FAIL case {n} (seed {args.seed}): {label}: {problem}")
            sys.stdout.flush()
    finally:
        shutil.rmtree(work, ignore_errors=True)
    print(f"{name}: {passed} passed, {failed} failed" + (f", {not_taken} refused by --kernel {args.kernel}" if not_taken else ""))
    if args.kernel and forced and not_taken == forced:
        print(f"--kernel {args.kernel} took none of the {forced} cases")
        return 1
    return 1 if failed else 0
