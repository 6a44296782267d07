#!/usr/bin/env python3
"""Instruction counts of a kernel's mainloops, from `cuobjdump --dump-sass` text.

Usage: loom compile -c EXPR --cubin F.cubin; cuobjdump --dump-sass F.cubin > F.sass;
       scripts/sass-loops.py F.sass
A loop is a backward branch and the instructions from its target to it. The consumer
k-loop is the innermost loop holding HGMMA, the producer's the innermost holding UTMALDG.
The consumer's tile transition is the persistent tile loop (the innermost loop around the
k-loop) less the k-loop: the epilogue, the next tile's setup and the zeroing, all of which
run while the warpgroup's tensor pipe idles (BAR = named barriers, CS2R = zeroings).
"all" counts every instruction of the loop body once; "path" leaves out the blocks that
a forward branch inside the loop skips (the one-thread release arrivals), i.e. what most
warps issue per iteration. The opcode histogram is over "all".
"""
import collections
import re
import sys

LINE = re.compile(r"/\*([0-9a-f]{4,})\*/\s+(.*?)\s*;")


def parse(path):
    instrs = []
    for line in open(path):
        m = LINE.search(line)
        if m:
            instrs.append((int(m.group(1), 16), m.group(2)))
    return instrs


def opcode(text):
    t = re.sub(r"^@!?U?P\w+\s+", "", text)
    return t.split()[0]


def branch_target(text):
    m = re.search(r"\bBRA(?:\.\w+)*\s+(?:`\()?0x([0-9a-f]+)", text)
    return int(m.group(1), 16) if m else None


def loops(instrs):
    out = []
    for addr, text in instrs:
        if opcode(text).startswith("BRA"):
            tgt = branch_target(text)
            if tgt is not None and tgt < addr and ".U.ANY" not in text:
                out.append((tgt, addr))
    return out


def body(instrs, lo, hi):
    return [(a, t) for a, t in instrs if lo <= a <= hi]


def innermost(instrs, ls, op):
    hits = [(lo, hi) for lo, hi in ls if any(opcode(t).startswith(op) for _, t in body(instrs, lo, hi))]
    return min(hits, key=lambda x: x[1] - x[0]) if hits else None


def path_count(instrs, lo, hi):
    skipped = set()
    for a, t in body(instrs, lo, hi):
        tgt = branch_target(t) if opcode(t).startswith("BRA") else None
        if tgt is not None and a < tgt <= hi and t.startswith("@") and ".U.ANY" not in t:
            skipped.update(x for x, _ in body(instrs, a + 1, tgt - 1))
    return len([a for a, _ in body(instrs, lo, hi) if a not in skipped])


def report(name, instrs, loop, unit_op):
    if loop is None:
        print(f"{name}: no loop with {unit_op}")
        return
    b = body(instrs, *loop)
    hist = collections.Counter(opcode(t).split(".")[0] for _, t in b)
    units = sum(1 for _, t in b if opcode(t).startswith(unit_op))
    print(f"{name} loop {loop[0]:#x}..{loop[1]:#x}: all {len(b)}, path {path_count(instrs, *loop)}, "
          f"{unit_op} {units} ({len(b) / max(units, 1):.1f} per {unit_op})")
    print("   " + ", ".join(f"{k} {v}" for k, v in hist.most_common()))


def report_transition(instrs, ls, kloop):
    outer = [(lo, hi) for lo, hi in ls if lo <= kloop[0] and kloop[1] <= hi and (lo, hi) != kloop]
    if not outer:
        print("transition: no tile loop around the consumer loop (not persistent)")
        return
    lo, hi = min(outer, key=lambda x: x[1] - x[0])
    b = [(a, t) for a, t in body(instrs, lo, hi) if not kloop[0] <= a <= kloop[1]]
    hist = collections.Counter(opcode(t).split(".")[0] for _, t in b)
    path = path_count(instrs, lo, hi) - path_count(instrs, *kloop)
    print(f"transition (tile loop {lo:#x}..{hi:#x} less the consumer loop): all {len(b)}, "
          f"path {path}, BAR {hist['BAR']}, CS2R {hist['CS2R']}, HGMMA {hist['HGMMA']}")
    print("   " + ", ".join(f"{k} {v}" for k, v in hist.most_common()))


def main():
    instrs = parse(sys.argv[1])
    ls = loops(instrs)
    kloop = innermost(instrs, ls, "HGMMA")
    report("consumer", instrs, kloop, "HGMMA")
    if kloop:
        report_transition(instrs, ls, kloop)
    report("producer", instrs, innermost(instrs, ls, "UTMALDG"), "UTMALDG")
    total = collections.Counter(opcode(t).split(".")[0] for _, t in instrs)
    print(f"kernel: {len(instrs)} instructions, HGMMA {total['HGMMA']}, "
          f"local memory {total['LDL'] + total['STL']} (LDL/STL)")


if __name__ == "__main__":
    main()
