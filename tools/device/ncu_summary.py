#!/usr/bin/env python3
# Summarises an `ncu --csv --page details` report (tools/device/gpu_tests.sh ncudecode): one line a kernel name with its
# launches, mean duration (us), DRAM and memory throughput (% of peak), registers, grid, block, achieved / theoretical
# occupancy and cycles per issued instruction, largest total time first. Usage: ncu_summary.py REPORT.csv
import collections
import csv
import sys

DURATION_TO_US = {"ns": 1e-3, "nsecond": 1e-3, "us": 1.0, "usecond": 1.0, "ms": 1e3, "msecond": 1e3}
COLUMNS = [  # (metric, header, decimals)
    ("Duration", "us", 1),
    ("DRAM Throughput", "dram%", 1),
    ("Memory Throughput", "mem%", 1),
    ("Registers Per Thread", "regs", 0),
    ("Grid Size", "grid", 0),
    ("Block Size", "blk", 0),
    ("Achieved Occupancy", "occ", 1),
    ("Theoretical Occupancy", "tocc", 0),
    ("Warp Cycles Per Issued Instruction", "cpi", 1),
]


def launches(path):
    """Metric values by launch (ID, kernel name); durations in us, throughputs in % only."""
    lines = (line for line in open(path) if line.startswith('"'))  # ncu's own messages are not CSV
    by_launch = collections.OrderedDict()
    for row in csv.DictReader(lines):
        name, unit = row["Metric Name"], row["Metric Unit"]
        try:
            value = float(row["Metric Value"].replace(",", ""))
        except ValueError:
            continue
        if name == "Duration":
            value *= DURATION_TO_US.get(unit, 1.0)
        if name == "Memory Throughput" and unit != "%":  # the same name in bytes/s in another section
            continue
        by_launch.setdefault((row["ID"], row["Kernel Name"]), {})[name] = value
    return by_launch


def short_name(kernel):
    """The kernel's name and template arguments, without namespaces (`--kernel-name-base function` leaves a cut
    `unnamed>::` of the anonymous namespace) or parameters."""
    name = kernel.split("(")[0].removeprefix("void ")
    for prefix in ("dsv4::cuda::", "<unnamed>::", "unnamed>::"):
        name = name.replace(prefix, "")
    return name[:44]


def main(path):
    by_kernel = collections.OrderedDict()
    for (_, kernel), metrics in launches(path).items():
        by_kernel.setdefault(short_name(kernel), []).append(metrics)
    rows = []
    for name, runs in by_kernel.items():
        means = [sum(m.get(metric, 0.0) for m in runs) / len(runs) for metric, _, _ in COLUMNS]
        rows.append((means[0] * len(runs), name, len(runs), means))
    print(f"{'kernel':44} {'n':>3} " + " ".join(f"{header:>6}" for _, header, _ in COLUMNS) + "  tot_us")
    for total, name, count, means in sorted(rows, reverse=True):
        cells = " ".join(f"{value:6.{decimals}f}" for value, (_, _, decimals) in zip(means, COLUMNS))
        print(f"{name:44} {count:3d} {cells}  {total:7.1f}")


if __name__ == "__main__":
    main(sys.argv[1])
