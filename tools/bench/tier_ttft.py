#!/usr/bin/env python3
"""TTFT of a long prompt served from the host KV tier (issue 19): prompt A cold, then prompt B (as long, other tokens)
which evicts A's blocks from the device into the host tier, then A again. Each request is a non-streamed completion of
one token (its latency is the TTFT). Prints a table and writes JSON. Standard library only (the device machine).

  tier_ttft.py --port P --tokens N [--vocab V] [--json out.json]
"""
import argparse
import json
import random
import time
import urllib.request


def post(url, body, timeout):
    req = urllib.request.Request(url, json.dumps(body).encode(), {"Content-Type": "application/json"})
    with urllib.request.urlopen(req, timeout=timeout) as r:
        return json.load(r)


def metrics(base):
    with urllib.request.urlopen(base + "/metrics", timeout=30) as r:
        text = r.read().decode()
    out = {}
    for line in text.splitlines():
        if line.startswith(("dsv4:kv_", "dsv4:tier", "vllm:prefix_cache")) and " " in line:
            name, value = line.rsplit(" ", 1)
            out[name.split("{")[0]] = float(value)
    return out


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--port", type=int, required=True)
    ap.add_argument("--tokens", type=int, required=True)
    ap.add_argument("--vocab", type=int, default=100000)
    ap.add_argument("--timeout", type=float, default=1800)  # a cold 380K prefill took 402 s on flash-160
    ap.add_argument("--json", default="")
    a = ap.parse_args()
    base = f"http://127.0.0.1:{a.port}"
    rng = random.Random(1)
    prompts = {name: [rng.randrange(1000, a.vocab) for _ in range(a.tokens)] for name in ("A", "B")}
    results = []
    for step, name in (("cold", "A"), ("evict", "B"), ("host hit", "A")):
        t0 = time.time()
        resp = post(base + "/v1/completions",
                    {"prompt": prompts[name], "max_tokens": 1, "temperature": 0}, a.timeout)
        seconds = time.time() - t0
        usage = resp.get("usage", {})
        cached = usage.get("prompt_tokens_details", {}).get("cached_tokens", 0)
        results.append({"step": step, "prompt": name, "tokens": usage.get("prompt_tokens"), "cached_tokens": cached,
                        "seconds": seconds, "metrics": metrics(base)})
        print(f"{step:9s} prompt {name}: {usage.get('prompt_tokens')} tokens, {cached} cached, {seconds:.3f} s",
              flush=True)
    for k, v in sorted(results[-1]["metrics"].items()):
        print(f"  {k} {v:g}")
    if a.json:
        with open(a.json, "w") as f:
            json.dump(results, f, indent=2)


if __name__ == "__main__":
    main()
