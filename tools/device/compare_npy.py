#!/usr/bin/env python3
# Compares two float32 .npy files (e.g. `dsv4 logits` of two binaries or settings): identical bits, or how many values
# differ and by how much at most (absolute, and relative to the largest magnitude). Usage: compare_npy.py A B
import struct
import sys


def body(path):
    data = open(path, "rb").read()
    header = struct.unpack("<H", data[8:10])[0]
    return data[10 + header :]


a, b = body(sys.argv[1]), body(sys.argv[2])
name = f"{sys.argv[1]} vs {sys.argv[2]}"
if a == b:
    print(f"{name}: identical bits ({len(a) // 4} values)")
    sys.exit(0)
if len(a) != len(b):
    print(f"{name}: sizes differ ({len(a) // 4} vs {len(b) // 4} values)")
    sys.exit(1)
try:
    import numpy as np

    x, y = np.frombuffer(a, dtype="<f4"), np.frombuffer(b, dtype="<f4")
    differ = int(np.count_nonzero(x.view("<u4") != y.view("<u4")))
    diff, scale = float(np.max(np.abs(x - y))), float(np.max(np.abs(x)))
except ImportError:
    x, y = struct.unpack("<%df" % (len(a) // 4), a), struct.unpack("<%df" % (len(b) // 4), b)
    differ = sum(1 for i in range(0, len(a), 4) if a[i : i + 4] != b[i : i + 4])
    diff, scale = max(abs(p - q) for p, q in zip(x, y)), max(abs(p) for p in x)
relative = diff / scale if scale else 0.0
print(f"{name}: {differ} of {len(a) // 4} values differ, max |diff| {diff:.3e} ({relative:.2e} of the largest)")
