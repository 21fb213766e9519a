#!/usr/bin/env python3
"""SVG plot of a `dsv4 bench serve` concurrency sweep: aggregate output tok/s and per-stream tok/s (1000 / median
TPOT) against concurrency, from the --json files of one sweep. Standard library only.
    tools/bench/plot_serve_sweep.py OUT.svg TITLE serve_c1.json serve_c2.json ...
"""
import json
import math
import sys


def load(paths):
    points = []
    for path in paths:
        with open(path) as f:
            for level in json.load(f)["levels"]:
                points.append((level["concurrency"], level["output_throughput"], 1000.0 / level["tpot"]["median_ms"]))
    return sorted(points)


def svg(points, title):
    width, height, left, right, top, bottom = 640, 400, 70, 20, 40, 60
    xs = [math.log2(c) for c, _, _ in points]
    y_max = max(max(a, s) for _, a, s in points) * 1.15
    x_of = lambda x: left + (x - min(xs)) / max(1e-9, max(xs) - min(xs)) * (width - left - right)
    y_of = lambda y: height - bottom - y / y_max * (height - top - bottom)
    out = [f'<svg xmlns="http://www.w3.org/2000/svg" width="{width}" height="{height}" font-family="sans-serif" '
           f'font-size="12">', f'<rect width="{width}" height="{height}" fill="white"/>',
           f'<text x="{width / 2}" y="22" text-anchor="middle" font-size="14">{title}</text>',
           f'<line x1="{left}" y1="{height - bottom}" x2="{width - right}" y2="{height - bottom}" stroke="black"/>',
           f'<line x1="{left}" y1="{top}" x2="{left}" y2="{height - bottom}" stroke="black"/>',
           f'<text x="{width / 2}" y="{height - 20}" text-anchor="middle">concurrency (log scale)</text>',
           f'<text x="18" y="{height / 2}" text-anchor="middle" transform="rotate(-90 18 {height / 2})">'
           'output tokens/s</text>']
    for i in range(6):
        y = y_max * i / 5
        out.append(f'<text x="{left - 6}" y="{y_of(y) + 4}" text-anchor="end">{y:.0f}</text>')
        out.append(f'<line x1="{left}" y1="{y_of(y)}" x2="{width - right}" y2="{y_of(y)}" stroke="#ddd"/>')
    for (c, _, _), x in zip(points, xs):
        out.append(f'<text x="{x_of(x)}" y="{height - bottom + 16}" text-anchor="middle">{c}</text>')
    for index, (name, colour) in ((1, ("aggregate", "#1f77b4")), (2, ("per stream (1000 / median TPOT)", "#d62728"))):
        path = " ".join(f"{x_of(x):.1f},{y_of(p[index]):.1f}" for p, x in zip(points, xs))
        out.append(f'<polyline points="{path}" fill="none" stroke="{colour}" stroke-width="2"/>')
        for p, x in zip(points, xs):
            out.append(f'<circle cx="{x_of(x):.1f}" cy="{y_of(p[index]):.1f}" r="3" fill="{colour}"/>')
        out.append(f'<text x="{left + 10}" y="{top + 14 * index}" fill="{colour}">{name}</text>')
    out.append("</svg>")
    return "\n".join(out) + "\n"


if __name__ == "__main__":
    with open(sys.argv[1], "w") as f:
        f.write(svg(load(sys.argv[3:]), sys.argv[2]))
