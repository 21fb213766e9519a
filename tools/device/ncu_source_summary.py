#!/usr/bin/env python3
# Summarises an `ncu --section SourceCounters --page source --print-source sass --csv` report (tools/device/
# gpu_tests.sh ncusource): for each profiled launch, the warp instructions executed, the opcode mix (share of the
# instructions and of the stall samples), and the runs of consecutive SASS lines executed equally often that hold at
# least 2% of the instructions: a run executed once a warp is prologue or epilogue, a run executed once a loop
# iteration is the loop body (its length is the instructions an iteration costs). Usage: ncu_source_summary.py REPORT
import collections
import csv
import sys


def launches(path):
    """The per-launch tables of the report: header row, then one row per SASS line."""
    tables, current = [], None
    with open(path, newline="") as f:
        for line in f:
            if line.startswith('"Kernel Name"'):
                current = []
                tables.append((line.split(",", 1)[1].strip().rstrip(",").strip('"'), current))
            elif current is not None:
                current.append(line)
    return [(name, list(csv.reader(rows))) for name, rows in tables]


def opcode(source):
    words = source.strip().split()
    if not words:
        return ""
    word = words[1] if words[0].startswith("@") and len(words) > 1 else words[0]
    return word.split(".")[0]


def summarise(name, table):
    header, rows = table[0], [r for r in table[1:] if r]
    executed, stalls, source = (header.index(c) for c in
                                ("Instructions Executed", "Warp Stall Sampling (All Samples)", "Source"))
    counts = [(int(r[executed] or 0), int(r[stalls] or 0), r[source]) for r in rows if len(r) > source]
    total = sum(c for c, _, _ in counts) or 1
    samples = sum(s for _, s, _ in counts) or 1
    print(f"== {name}: {total} warp instructions, {samples} stall samples")
    by_op, stall_op = collections.Counter(), collections.Counter()
    for c, s, src in counts:
        by_op[opcode(src)] += c
        stall_op[opcode(src)] += s
    print("  " + ", ".join(f"{op} {100 * c / total:.1f}% ({100 * stall_op[op] / samples:.0f}% stalls)"
                           for op, c in by_op.most_common(14)))
    runs = []  # [count a line, lines, stall samples]
    for c, s, _ in counts:
        if runs and runs[-1][0] == c:
            runs[-1][1] += 1
            runs[-1][2] += s
        else:
            runs.append([c, 1, s])
    for c, n, s in runs:
        if c * n >= 0.02 * total:
            print(f"  run of {n:4d} lines executed {c:8d} times: {100 * c * n / total:5.1f}% of the instructions, "
                  f"{100 * s / samples:5.1f}% of the stalls")


def main():
    if len(sys.argv) != 2:
        sys.exit("usage: ncu_source_summary.py REPORT.csv")
    for name, table in launches(sys.argv[1]):
        summarise(name, table)


if __name__ == "__main__":
    main()
