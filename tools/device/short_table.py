#!/usr/bin/env python3
"""The short table a device call prints last: tok/s per decode batch and prefill length of every offline JSON under
a folder, and the routed-expert and sampler rows of every kernel-bench JSON. Usage: short_table.py OUT_DIR"""
import glob
import json
import os
import sys


def main():
    for f in sorted(glob.glob(os.path.join(sys.argv[1], "*.json"))):
        try:
            with open(f) as fh:
                j = json.load(fh)
        except (OSError, ValueError):
            continue
        if not isinstance(j, dict):
            continue
        name = os.path.basename(f)[:-5]
        for r in j.get("decode", []):
            print(f"{name:16s} decode B={r.get('batch')} tok/s={r.get('tok_per_s', 0):.1f} "
                  f"step={r.get('step_ms', 0):.2f}")
        for r in j.get("prefill", []):
            print(f"{name:16s} prefill {r.get('prompt')} tok/s={r.get('tok_per_s', 0):.0f}")
        for r in j.get("rows", []):
            if "experts" in r.get("op", "") or "sample" in r.get("op", ""):
                print(f"{name:16s} {r['path']:22s} n={r['m']:4d} us={r['us']:9.1f} "
                      f"copy={100 * r['copy_fraction']:.1f}%")


if __name__ == "__main__":
    main()
