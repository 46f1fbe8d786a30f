# SPDX-License-Identifier: Apache-2.0
"""What the two contract checks share (contract_check.py: decode; contract_check_multi_query.py:
multi-query attention and MLA): the verdict on a refused bad input, and the loop that runs each
case in a folder of its own, counts it and prints the summary line."""
import os
import shutil
import sys
import tempfile

# A good case that the kernel forced by --kernel refuses (the CLI says why): counted apart.
NOT_TAKEN = "not taken by the forced kernel"


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
