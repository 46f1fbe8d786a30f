#!/usr/bin/env python3
# SPDX-License-Identifier: Apache-2.0
"""Fails where a compiled shader's specialization-constant operation (OpSpecConstantOp) or
constant composite takes an operand that is not a constant (or type) defined before it.

glslang compiles a compound && / || of specialization constants (`A && (B || C)`) into a branch
and an OpPhi inside main, and the constants that use the result at global scope then reference
that phi: invalid SPIR-V. glslc's optimizer refuses such a module, but the tensor-core shaders
(*_khr.comp) are compiled by glslangValidator without SPIRV-Tools, and Debian 12's spirv-val
cannot read their cooperative-matrix capability; on an H100 (2026-12-07) the process died in
NVIDIA's driver creating such a pipeline (bench/experiments/mla-tile-phases.md). The shaders
write one operator per constant instead; this check keeps it so.

Usage: check_spec_constant_ops.py SHADER_DIR   (the build's generated shaders/: every *.spv.inc)
       check_spec_constant_ops.py --self-test  (the check flags a module that references a phi)
"""
import pathlib
import re
import sys

MAGIC = 0x07230203
OP_UNDEF = 1
OP_FUNCTION = 54
OP_CONSTANT_COMPOSITE = 44
OP_SPEC_CONSTANT_COMPOSITE = 51
OP_SPEC_CONSTANT_OP = 52
OP_PHI = 245
# Instructions that define a constant (result type, result id): OpConstantTrue .. OpSpecConstantOp
# (41-52, 47 unused) and OpUndef.
CONSTANT_OPCODES = set(range(41, 53)) | {OP_UNDEF}
# Operations of OpSpecConstantOp whose trailing operands are literals: OpVectorShuffle,
# OpCompositeExtract, OpCompositeInsert, by their id operands' count.
ID_OPERANDS = {79: 2, 81: 1, 82: 2}
# Types (result id first): OpTypeVoid .. OpTypePipe, OpTypeCooperativeMatrixKHR and NV, whose
# lengths (OpCooperativeMatrixLength*) are specialization-constant operations on a type.
TYPE_OPCODES = set(range(19, 39)) | {4456, 5358}


def words_of(inc_text):
    """The module's words from a .spv.inc (glslc's -mfmt=num or glslangValidator's -x)."""
    text = re.sub(r"/\*.*?\*/", "", inc_text, flags=re.S)
    text = re.sub(r"//[^\n]*", "", text)
    return [int(token, 0) for token in re.findall(r"0[xX][0-9a-fA-F]+|\d+", text)]


def instructions(words):
    if len(words) < 5 or words[0] != MAGIC:
        raise ValueError("not a SPIR-V module (magic %s)" % (hex(words[0]) if words else "none"))
    at = 5
    while at < len(words):
        count, opcode = words[at] >> 16, words[at] & 0xFFFF
        if count == 0 or at + count > len(words):
            raise ValueError("truncated instruction at word %d" % at)
        yield opcode, words[at + 1:at + count]
        at += count


def findings(words):
    """(number of constant operations checked, [problem, ...]) of one module."""
    constants = set()  # and types
    checked = 0
    problems = []
    for opcode, operands in instructions(words):
        if opcode == OP_FUNCTION:
            break  # the global section ends at the first function
        if opcode in TYPE_OPCODES:
            constants.add(operands[0])
            continue
        if opcode not in CONSTANT_OPCODES:
            continue
        result = operands[1]
        if opcode == OP_SPEC_CONSTANT_OP:
            # After the result type, the result id and the operation: its operands, less the
            # literal indices of the operations that take some.
            referenced = operands[3:3 + ID_OPERANDS[operands[2]]] if operands[2] in ID_OPERANDS else operands[3:]
        elif opcode in (OP_CONSTANT_COMPOSITE, OP_SPEC_CONSTANT_COMPOSITE):
            referenced = operands[2:]
        else:
            referenced = []
        if opcode in (OP_SPEC_CONSTANT_OP, OP_CONSTANT_COMPOSITE, OP_SPEC_CONSTANT_COMPOSITE):
            checked += 1
            for operand in referenced:
                if operand not in constants:
                    problems.append("constant %%%d (opcode %d) takes %%%d, which is not a constant or type "
                                    "defined before it" % (result, opcode, operand))
        constants.add(result)
    return checked, problems


def self_test():
    """A hand-assembled module of glslang's pattern: %4 = OpSpecConstantOp LogicalNot %9, where
    %9 is an OpPhi in a function, must be flagged; the same with %9 a constant must not."""
    def instruction(opcode, *operands):
        return [(len(operands) + 1) << 16 | opcode, *operands]
    header = [MAGIC, 0x00010500, 0, 16, 0]
    bool_type = instruction(20, 1)                     # %1 = OpTypeBool
    spec_true = instruction(48, 1, 2)                  # %2 = OpSpecConstantTrue %1
    function = (instruction(OP_FUNCTION, 3, 5, 0, 6) + instruction(248, 7) +
                instruction(OP_PHI, 1, 9, 2, 7) + instruction(56))
    bad = header + bool_type + spec_true + instruction(OP_SPEC_CONSTANT_OP, 1, 4, 168, 9) + function
    good = header + bool_type + spec_true + instruction(OP_SPEC_CONSTANT_OP, 1, 4, 168, 2) + function
    bad_checked, bad_problems = findings(bad)
    good_checked, good_problems = findings(good)
    if bad_checked != 1 or len(bad_problems) != 1 or "%9" not in bad_problems[0]:
        print("self-test: the phi operand was not flagged: %s" % bad_problems)
        return 1
    if good_checked != 1 or good_problems:
        print("self-test: a constant operand was flagged: %s" % good_problems)
        return 1
    print("self-test: the phi operand flagged, the constant one not")
    return 0


def main(argv):
    if len(argv) == 2 and argv[1] == "--self-test":
        return self_test()
    if len(argv) != 2:
        print(__doc__)
        return 2
    modules = sorted(pathlib.Path(argv[1]).glob("*.spv.inc"))
    if not modules:
        print("no *.spv.inc in %s: build the library first" % argv[1])
        return 1
    failed = 0
    total_checked = 0
    for path in modules:
        try:
            checked, problems = findings(words_of(path.read_text()))
        except ValueError as error:
            print("%s: %s" % (path.name, error))
            failed += 1
            continue
        total_checked += checked
        for problem in problems:
            print("%s: %s" % (path.name, problem))
        failed += bool(problems)
    if total_checked == 0:
        print("no constant operations in %d modules: the parse is wrong" % len(modules))
        return 1
    print("%d modules, %d constant operations and composites checked, %d modules with problems" %
          (len(modules), total_checked, failed))
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
