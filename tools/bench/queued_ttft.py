#!/usr/bin/env python3
"""TTFT of a short request queued behind a long cold prefill (issue: a short request arriving behind a huge prompt
must still get its first token quickly; the scheduler's long-prefill cap is what makes that true).

Sends a LONG_TOKENS-token completion (token ids, max_tokens 1, streamed) to a running `dsv4 serve`, waits until the
server reports it running, then sends a short request and times both first tokens. Standard library only (the
device machine has no extra packages).
"""
import argparse
import json
import threading
import time
import urllib.request


def post(port, path, body, timeout=3600):
    req = urllib.request.Request(f"http://127.0.0.1:{port}{path}", data=json.dumps(body).encode(),
                                 headers={"Content-Type": "application/json"})
    return urllib.request.urlopen(req, timeout=timeout)


def streamed_ttft(port, body, result, key):
    start = time.monotonic()
    with post(port, "/v1/completions", body) as response:
        for raw in response:
            line = raw.decode().strip()
            if not line.startswith("data:") or line == "data: [DONE]":
                continue
            chunk = json.loads(line[5:])
            if chunk.get("choices"):
                result[key] = time.monotonic() - start
                break
        for _ in response:  # drain the rest of the stream
            pass


def running_requests(port):
    with urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=10) as response:
        for line in response.read().decode().splitlines():
            if line.startswith("vllm:num_requests_running") or line.startswith("dsv4:num_requests_running"):
                return float(line.split()[-1])
    return 0.0


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--port", type=int, required=True)
    parser.add_argument("--long-tokens", type=int, default=52000)
    parser.add_argument("--json")
    args = parser.parse_args()

    with urllib.request.urlopen(f"http://127.0.0.1:{args.port}/v1/models", timeout=10) as response:
        model = json.loads(response.read())["data"][0]["id"]
    with post(args.port, "/tokenize", {"model": model, "prompt": "the quick brown fox jumps over the lazy dog " * 64,
                                       "add_special_tokens": False}) as response:
        pool = json.loads(response.read())["tokens"]
    long_prompt = [pool[i % len(pool)] for i in range(args.long_tokens)]
    result = {"long_tokens": args.long_tokens}
    common = {"model": model, "max_tokens": 1, "temperature": 0.0, "stream": True, "ignore_eos": True}
    long_thread = threading.Thread(target=streamed_ttft,
                                   args=(args.port, {**common, "prompt": long_prompt}, result, "long_ttft_s"))
    long_thread.start()
    deadline = time.monotonic() + 60
    while running_requests(args.port) < 1 and time.monotonic() < deadline:
        time.sleep(0.05)
    time.sleep(0.5)  # the long prefill is under way
    streamed_ttft(args.port, {**common, "prompt": pool[:16], "max_tokens": 8}, result, "short_ttft_s")
    long_thread.join()
    print(json.dumps(result))
    if args.json:
        with open(args.json, "w") as f:
            json.dump(result, f)


if __name__ == "__main__":
    main()
