#!/usr/bin/env python3
"""TTFT of a long prompt served from the host KV tier (issue 19): prompt A cold, then other prompts (--evict-tokens in
all, default as many as A, in prompts of at most --filler-tokens, default one prompt) which evict A's blocks from the
device into the host tier, then A again. Short fillers evict in a fraction of the time one long prompt takes (prefill
slows with context: a cold 380K prompt averaged 945 tok/s against 4,300 at 8K), so that the whole measurement fits one
device command. Each request is a non-streamed completion of one token (its latency is the TTFT). Prints a table and
writes JSON. Standard library only (the device machine).

  tier_ttft.py --port P --tokens N [--evict-tokens M] [--filler-tokens F] [--vocab V] [--json out.json]
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
            out[name] = float(value)  # labelled samples (tier bytes by direction, hits by tier) kept apart
    return out


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--port", type=int, required=True)
    ap.add_argument("--tokens", type=int, required=True)
    ap.add_argument("--evict-tokens", type=int, default=0, help="tokens of the evicting prompts (0: as many as A)")
    ap.add_argument("--filler-tokens", type=int, default=0, help="longest evicting prompt (0: one prompt)")
    ap.add_argument("--vocab", type=int, default=100000)
    ap.add_argument("--timeout", type=float, default=1800)  # a cold 380K prefill took 402 s on flash-160
    ap.add_argument("--json", default="")
    a = ap.parse_args()
    base = f"http://127.0.0.1:{a.port}"
    if a.tokens < 1 or a.evict_tokens < 0 or a.filler_tokens < 0:
        ap.error("--tokens must be positive, --evict-tokens and --filler-tokens at least 0")
    rng = random.Random(1)
    evict = a.evict_tokens or a.tokens
    filler = a.filler_tokens or evict
    prompts = {"A": [rng.randrange(1000, a.vocab) for _ in range(a.tokens)]}
    steps = [("cold", "A")]
    for i, begin in enumerate(range(0, evict, filler)):
        name = f"B{i}"
        prompts[name] = [rng.randrange(1000, a.vocab) for _ in range(min(filler, evict - begin))]
        steps.append(("evict", name))
    steps.append(("host hit", "A"))
    results = []
    for step, name in steps:
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
