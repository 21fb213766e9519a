#!/usr/bin/env python3
"""Writes the seed corpus of fuzz_safetensors_header (tests/fuzz/corpus/safetensors_header/): a few valid files
and a few near-misses. Re-run after changing it; the outputs are committed."""
import json, os, struct

out = os.path.join(os.path.dirname(os.path.abspath(__file__)), "corpus", "safetensors_header")
os.makedirs(out, exist_ok=True)

def image(header, data=b"", pad=True):
    h = header if isinstance(header, bytes) else json.dumps(header).encode()
    if pad:
        h += b" " * ((8 - len(h) % 8) % 8)
    return struct.pack("<Q", len(h)) + h + data

def entry(dtype, shape, begin, end):
    return {"dtype": dtype, "shape": shape, "data_offsets": [begin, end]}

seeds = {
    "valid_empty": image({}),
    "valid_metadata_only": image({"__metadata__": {"format": "pt"}}),
    "valid_two": image({"__metadata__": {"format": "pt"}, "a.weight": entry("BF16", [2, 2], 0, 8),
                        "a.scale": entry("F8_E8M0", [1, 1], 8, 9)}, bytes(range(9))),
    "valid_all_dtypes": image({f"t{i}": entry(d, [2], 16 * i, 16 * i + 2 * s)
                               for i, (d, s) in enumerate([("F32", 4), ("F16", 2), ("BF16", 2), ("I64", 8),
                                                           ("I32", 4), ("I8", 1), ("U8", 1), ("F8_E4M3", 1),
                                                           ("F8_E5M2", 1), ("F8_E8M0", 1)])}, bytes(160)),
    "valid_scalar_gap_empty": image({"s": entry("F32", [], 4, 8), "e": entry("I8", [0, 3], 8, 8)}, bytes(12)),
    "bad_overlap": image({"x": entry("U8", [8], 0, 8), "y": entry("U8", [8], 4, 12)}, bytes(12)),
    "bad_truncated": image({"x": entry("F32", [4], 0, 16)}, bytes(10)),
    "bad_dtype": image({"x": entry("F8_E4M3FN", [1], 0, 1)}, bytes(1)),
    "bad_size": image({"x": entry("BF16", [3], 0, 5)}, bytes(6)),
    "bad_json": image(b'{"x": {"dtype": "U8", "shape": [1], "data_offsets": [0, 1]', bytes(1)),
    "bad_length": struct.pack("<Q", 1 << 40) + b"{}",
}
for name, data in seeds.items():
    with open(os.path.join(out, name), "wb") as f:
        f.write(data)
print(f"wrote {len(seeds)} seeds to {out}")
