#!/usr/bin/env python3
# Writes an int32 .npy of N token ids (i * 7919 mod VOCAB), for `dsv4 logits` on a synthetic model; no numpy needed.
# Usage: write_tokens.py OUT N VOCAB
import struct
import sys

out, n, vocab = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
header = "{'descr': '<i4', 'fortran_order': False, 'shape': (%d,), }" % n
header += " " * ((64 - (10 + len(header) + 1) % 64) % 64) + "\n"
with open(out, "wb") as f:
    f.write(b"\x93NUMPY\x01\x00" + struct.pack("<H", len(header)) + header.encode())
    f.write(struct.pack("<%di" % n, *[(i * 7919) % vocab for i in range(n)]))
