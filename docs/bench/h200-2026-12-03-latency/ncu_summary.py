import csv, sys, collections
rows = list(csv.DictReader(l for l in open(sys.argv[1]) if l.startswith('"')))
k = collections.OrderedDict()
scale = {"ns": 1e-3, "nsecond": 1e-3, "us": 1.0, "usecond": 1.0, "ms": 1e3, "msecond": 1e3}
for r in rows:
    m = k.setdefault((r["ID"], r["Kernel Name"]), {})
    name, unit, v = r["Metric Name"], r["Metric Unit"], r["Metric Value"].replace(",", "")
    try: v = float(v)
    except ValueError: continue
    if name == "Duration": v *= scale.get(unit, 1.0)
    if name == "Memory Throughput" and unit != "%": continue
    m[name] = v
agg = collections.OrderedDict()
for (i, name), m in k.items():
    short = name.split("(")[0].replace("dsv4::cuda::", "").replace("<unnamed>::", "")[:44]
    agg.setdefault(short, []).append(m)
cols = [("Duration", "us", 1), ("DRAM Throughput", "dram%", 1), ("Memory Throughput", "mem%", 1),
        ("Registers Per Thread", "regs", 0), ("Grid Size", "grid", 0), ("Block Size", "blk", 0),
        ("Achieved Occupancy", "occ", 1), ("Theoretical Occupancy", "tocc", 0), ("Warp Cycles Per Issued Instruction", "cpi", 1)]
print(f"{'kernel':44} {'n':>3} " + " ".join(f"{c[1]:>6}" for c in cols) + "  tot_us")
tot = []
for name, ms in agg.items():
    vals = [sum(m.get(c[0], 0) for m in ms) / len(ms) for c in cols]
    tot.append((vals[0] * len(ms), name, len(ms), vals))
for t, name, n, vals in sorted(tot, reverse=True):
    print(f"{name:44} {n:3d} " + " ".join(f"{v:6.{c[2]}f}" for v, c in zip(vals, cols)) + f"  {t:7.1f}")
