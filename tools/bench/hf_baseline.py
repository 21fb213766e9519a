"""Peer baseline on the GPU machine: HF transformers' DeepseekV4ForCausalLM (eager, bf16) at full width, truncated to
the first L layers of the real schedule, random weights with hash tables that spread tokens over the experts. Prints
prefill and decode timings in the same format as `dsv4 bench offline` so the two can be compared side by side.

    python3 tools/bench/hf_baseline.py [--layers 4] [--prefill 1024,8192] [--decode-batch 1,8] [--context 2048]
"""
import argparse
import time

import torch
from transformers import DeepseekV4Config, DeepseekV4ForCausalLM


def timed(fn, reps=1):
    torch.cuda.synchronize()
    t = time.time()
    for _ in range(reps):
        fn()
    torch.cuda.synchronize()
    return (time.time() - t) / reps


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--layers", type=int, default=4)
    ap.add_argument("--prefill", default="1024,8192")
    ap.add_argument("--decode-batch", default="1,8")
    ap.add_argument("--context", type=int, default=2048)
    args = ap.parse_args()
    schedule = [0, 0] + [4, 128] * 20 + [4]
    cfg = DeepseekV4Config(num_hidden_layers=args.layers, compress_ratios=schedule[:args.layers],
                           num_hash_layers=min(3, args.layers),
                           rope_scaling={"type": "yarn", "factor": 16, "original_max_position_embeddings": 65536,
                                         "beta_fast": 32, "beta_slow": 1})
    torch.manual_seed(0)
    with torch.device("cuda"):
        model = DeepseekV4ForCausalLM(cfg).to(torch.bfloat16).eval()
    with torch.no_grad():
        for layer in model.model.layers:
            gate = layer.mlp.gate
            if hasattr(gate, "tid2eid"):
                start = torch.randint(0, cfg.n_routed_experts, (cfg.vocab_size, 1), device="cuda")
                gate.tid2eid.copy_((start + torch.arange(cfg.num_experts_per_tok, device="cuda")) % cfg.n_routed_experts)
    print(f"HF eager bf16, {args.layers} layers, weights "
          f"{sum(p.numel() * p.element_size() for p in model.parameters()) / 2**30:.1f} GiB", flush=True)
    with torch.no_grad():
        for n in [int(x) for x in args.prefill.split(",") if x]:
            ids = torch.randint(0, cfg.vocab_size, (1, n), device="cuda")
            model(ids, use_cache=False)
            secs = timed(lambda: model(ids, use_cache=False))
            print(f"hf prefill {n} tokens: {secs:.3f} s, {n / secs:.0f} tok/s ({args.layers} layers)", flush=True)
        for b in [int(x) for x in args.decode_batch.split(",") if x]:
            ids = torch.randint(0, cfg.vocab_size, (b, args.context), device="cuda")
            out = model(ids, use_cache=True)
            cache = out.past_key_values
            nxt = torch.randint(0, cfg.vocab_size, (b, 1), device="cuda")
            for _ in range(2):
                out = model(nxt, past_key_values=cache, use_cache=True)
                cache = out.past_key_values
            reps = 8

            def step():
                nonlocal cache
                o = model(nxt, past_key_values=cache, use_cache=True)
                cache = o.past_key_values

            secs = timed(step, reps)
            print(f"hf decode batch {b} context {args.context}: {secs * 1e3:.2f} ms/step, {b / secs:.1f} tok/s "
                  f"({args.layers} layers)", flush=True)


if __name__ == "__main__":
    main()
