"""Trains the demo model (docs/demo-model.md): a DeepSeek-V4-architecture body (HF transformers 5.17
DeepseekV4ForCausalLM) on the Brown corpus, then its MTP and DSpark drafters on the frozen body, and exports both
checkpoints in DeepSeek's original on-disk format. Runs on the GPU machine (tools/train/device_train.sh).

    python3 tools/train/train.py --data DATA_DIR --tokenizer TOKENIZER_DIR --out OUT_DIR
        [--resume CKPT_DIR] [--time-limit SEC] [--stop-after-steps N] [--smoke] [--body-steps N] ...

Phases: body (LM loss + lightning-indexer distillation, aux-loss-free expert balancing), mtp (distillation of the
body's next-next-token distribution), dspark (distillation of the body's distributions over a 5-token block, plus
its confidence head), final (held-out bits per byte before and after the FP8/FP4 export, drafter acceptance in
PyTorch, greedy golden continuations, export). Seeded: the same data, tokenizer and arguments give the same run
(GPU kernels aside). A run that passes --time-limit / --stop-after-steps saves OUT_DIR/ckpt and exits with status
75; --resume OUT_DIR/ckpt continues it. OUT_DIR/ckpt also holds the final float32 weights of a finished run.
"""
import argparse
import json
import math
import os
import sys
import time

import torch
import torch.nn.functional as F

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
sys.path.insert(0, os.path.join(HERE, "..", "fixtures"))

import checkpoint  # noqa: E402
import data as D  # noqa: E402
import demo_config as C  # noqa: E402
import drafters  # noqa: E402
import hf_patches  # noqa: E402
import speculative  # noqa: E402
import v4_checkpoint as V  # noqa: E402

RESUME_EXIT = 75
GOLDEN_PROMPTS = [
    "The jury said that",
    "Once upon a time, there was a",
    "The President of the United States",
    "In the morning, she walked to the",
    "<｜User｜>Write a sentence about music.<｜Assistant｜></think>",
]


class StopForResume(Exception):
    pass


def parse_args():
    ap = argparse.ArgumentParser()
    ap.add_argument("--data", required=True)
    ap.add_argument("--tokenizer", required=True, help="directory with tokenizer.json (train_tokenizer.py)")
    ap.add_argument("--out", required=True)
    ap.add_argument("--resume", default="")
    ap.add_argument("--time-limit", type=float, default=0.0, help="seconds; save a checkpoint and exit 75 after")
    ap.add_argument("--stop-after-steps", type=int, default=0, help="save a checkpoint and exit 75 after N steps")
    ap.add_argument("--smoke", action="store_true", help="a few steps of every phase (tests the pipeline)")
    for key, val in C.TRAIN.items():
        ap.add_argument("--" + key.replace("_", "-"), type=type(val), default=val)
    args = ap.parse_args()
    if args.smoke:
        args.body_steps, args.mtp_steps, args.dspark_steps, args.eval_every = 30, 10, 10, 20
    return args


def cosine_lr(step, steps, peak, warmup):
    if step < warmup:
        return peak * (step + 1) / warmup
    progress = (step - warmup) / max(1, steps - warmup)
    return peak * (0.1 + 0.9 * 0.5 * (1 + math.cos(math.pi * min(1.0, progress))))


def make_optimizer(params, lr, wd):
    params = [p for p in params if p.requires_grad]
    decay = [p for p in params if p.dim() >= 2]
    rest = [p for p in params if p.dim() < 2]
    return torch.optim.AdamW([{"params": decay, "weight_decay": wd}, {"params": rest, "weight_decay": 0.0}],
                             lr=lr, betas=(0.9, 0.95), eps=1e-8)


def build_models(args, dev):
    from transformers import DeepseekV4ForCausalLM

    cfg = C.mtp_config()
    torch.manual_seed(args.seed)
    body = DeepseekV4ForCausalLM(V.hf_config(cfg)).float()
    gen = torch.Generator().manual_seed(args.seed + 1)
    e, k = cfg["n_routed_experts"], cfg["num_experts_per_tok"]
    with torch.no_grad():
        for layer in body.model.layers:  # hash routing: a fixed random set of k experts per token id
            if hasattr(layer.mlp.gate, "tid2eid"):
                layer.mlp.gate.tid2eid.copy_(torch.stack(
                    [torch.randperm(e, generator=gen)[:k] for _ in range(cfg["vocab_size"])]))
    dcfg = C.draft_block_config()
    mtp = drafters.MtpHead(dcfg)
    dspark = drafters.DsparkHead(dcfg, cfg["vocab_size"], C.MARKOV_RANK, len(C.DSPARK_TARGET_LAYERS),
                                 C.DSPARK_BLOCK, C.NOISE_TOKEN_ID)
    for m in list(mtp.modules()) + list(dspark.modules()):  # HF's initialisation of the fresh blocks
        body._init_weights(m)
    return cfg, body.to(dev), mtp.to(dev), dspark.to(dev)


class Trainer:
    def __init__(self, args, dev):
        from tokenizers import Tokenizer

        self.args, self.dev, self.t0 = args, dev, time.time()
        self.tok = Tokenizer.from_file(os.path.join(args.tokenizer, "tokenizer.json"))
        self.stream, self.stream_info = D.training_stream(self.tok, args.data, args.seed)
        self.valid = D.segments(self.tok, args.data, "valid")
        self.test = D.segments(self.tok, args.data, "test")
        self.byte_len = D.token_byte_lengths(self.tok).to(dev)
        self.cfg, self.body, self.mtp, self.dspark = build_models(args, dev)
        self.gen = torch.Generator().manual_seed(args.seed + 2)
        self.log = {"body": [], "mtp": [], "dspark": [], "valid": []}
        self.phase, self.start_step, self.resumed_opt = "body", 0, None
        self.steps_run = 0
        if args.resume:
            self.resume(args.resume)

    # ------------------------------------------------------------------------------------------------------------
    def modules(self, phase="done"):
        """The modules a checkpoint of `phase` holds: drafters not trained yet are re-created from the seed."""
        order = ["body", "mtp", "dspark"]
        held = order[:order.index(phase) + 1] if phase in order else order
        return {k: getattr(self, k) for k in held}

    def resume(self, directory):
        index, payload = checkpoint.load(directory)
        for name, state in payload["modules"].items():
            getattr(self, name).load_state_dict(state)
        self.gen.set_state(payload["rng"]["data"])
        torch.cuda.set_rng_state(payload["rng"]["cuda"])
        self.log = index["log"]
        self.phase, self.start_step, self.resumed_opt = index["phase"], index["step"], payload["optimizer"]
        print(f"resumed {directory}: phase {self.phase} step {self.start_step}", flush=True)

    def save(self, phase, step, opt):
        rng = {"data": self.gen.get_state(), "cuda": torch.cuda.get_rng_state()}
        size = checkpoint.save(os.path.join(self.args.out, "ckpt"), phase, step, self.modules(phase), opt, rng,
                               {"log": self.log, "args": vars(self.args)})
        print(f"checkpoint: phase {phase} step {step}, {size / 2**20:.1f} MiB", flush=True)

    def check_stop(self, phase, step, opt):
        self.steps_run += 1
        over_time = self.args.time_limit and time.time() - self.t0 > self.args.time_limit
        if over_time or (self.args.stop_after_steps and self.steps_run >= self.args.stop_after_steps):
            self.save(phase, step, opt)
            raise StopForResume()

    def run_phase(self, name, steps, params, lr, warmup, step_fn):
        if self.phase != name:
            return
        opt = make_optimizer(params, lr, self.args.weight_decay if name == "body" else 0.0)
        if self.resumed_opt is not None:
            opt.load_state_dict(self.resumed_opt)
            self.resumed_opt = None
        t = time.time()
        step = self.start_step
        while step < steps:
            if name == "body" and self.args.body_seconds and step == self.start_step + 20:
                steps = self.fit_steps(steps, (time.time() - t) / 20)
            for g in opt.param_groups:
                g["lr"] = cosine_lr(step, steps, lr, warmup)
            metrics = step_fn(step)
            torch.nn.utils.clip_grad_norm_([p for g in opt.param_groups for p in g["params"]], self.args.grad_clip)
            opt.step()
            opt.zero_grad(set_to_none=True)
            if name == "body":
                metrics["load_max_over_mean"] = self.balancer.step()
            if step % 10 == 0 or step == steps - 1:
                metrics.update(step=step, seconds=round(time.time() - t, 1))
                self.log[name].append(metrics)
                print(name, json.dumps(metrics), flush=True)
            if name == "body" and (step + 1) % self.args.eval_every == 0:
                self.log["valid"].append({"step": step + 1, "bpb": self.bpb(self.valid[:self.args.eval_segments])})
                print("valid", json.dumps(self.log["valid"][-1]), flush=True)
            self.check_stop(name, step + 1, opt)
            step += 1
        self.phase, self.start_step = {"body": "mtp", "mtp": "dspark", "dspark": "final"}[name], 0

    def fit_steps(self, steps, per_step):
        """--body-seconds: the step count that fits the budget at the measured step time (decided during warmup, so
        the learning-rate schedule equals that of a run given --body-steps N)."""
        fitted = min(steps, max(self.args.body_warmup + 1, int(self.args.body_seconds / per_step)))
        self.args.body_steps = fitted
        print(f"body: {per_step:.3f} s/step -> {fitted} steps in {self.args.body_seconds:.0f} s", flush=True)
        return fitted

    # ------------------------------------------------------------------------------------------------------------
    def windows(self, batch=None):
        x = D.sample_windows(self.stream, batch or self.args.batch, self.args.seq_len, self.gen).to(self.dev)
        return x[:, :-1], x[:, 1:]

    def body_step(self, step):
        self.body.train()
        inp, lab = self.windows()
        logits = self.body(input_ids=inp, use_cache=False).logits
        lm = F.cross_entropy(logits.float().reshape(-1, logits.shape[-1]), lab.reshape(-1))
        kl = hf_patches.distillation_loss(self.indexers)
        if kl is None:
            raise RuntimeError("no lightning-indexer distillation loss: the eager-attention patch did not apply")
        (lm + kl).backward()
        return {"lm": round(lm.item(), 4), "indexer_kl": round(kl.item(), 4)}

    @torch.no_grad()
    def frozen_pass(self, inp, tap):
        self.body.eval()
        logits = self.body(input_ids=inp, use_cache=False).logits.float()
        return logits, tap.out

    def mtp_step(self, step):
        inp, _ = self.windows(self.args.draft_batch)
        logits, out = self.frozen_pass(inp, self.tap)
        target = logits[:, 1:].softmax(dim=-1)  # row t (state t, token t+1) predicts token t+2
        self.mtp.train()
        pred, _ = self.mtp(out[C.LAYERS - 1][:, :-1], inp[:, 1:], self.body)
        loss = drafters.soft_cross_entropy(pred, target)
        loss.backward()
        with torch.no_grad():
            agree = (pred.argmax(-1) == logits[:, 1:].argmax(-1)).float().mean().item()
            accept = drafters.acceptance_probability(pred, target).mean().item()
        return {"loss": round(loss.item(), 4), "top1_agree": round(agree, 4), "accept_t1": round(accept, 4)}

    def dspark_step(self, step):
        inp, _ = self.windows(self.args.draft_batch)
        logits, out = self.frozen_pass(inp, self.tap)
        b, s = inp.shape
        k, a = C.DSPARK_BLOCK, self.args.dspark_anchors
        mainhid = torch.cat([out[l].mean(dim=2) for l in C.DSPARK_TARGET_LAYERS], dim=-1)
        anchors = torch.randint(0, s - k - 1, (b, a), generator=self.gen).to(self.dev)
        rows = anchors[..., None] + 1 + torch.arange(k, device=self.dev)  # positions p+1 .. p+5
        bidx = torch.arange(b, device=self.dev)[:, None, None]
        markov_tokens = inp[bidx, rows]  # d_k = the token at p+1+k (d_0 = y)
        target = logits[bidx, rows].softmax(dim=-1)  # the body's distribution of the token at p+2+k
        self.dspark.train()
        pred, kappa = self.dspark(markov_tokens[..., 0], anchors, self.dspark.context(mainhid), markov_tokens,
                                  self.body)
        ce = drafters.soft_cross_entropy(pred, target)
        accept = drafters.acceptance_probability(pred, target).detach()
        conf = F.binary_cross_entropy_with_logits(kappa.float(), accept)
        (ce + 0.1 * conf).backward()
        per_pos = accept.mean(dim=(0, 1))
        return {"loss": round(ce.item(), 4), "confidence_bce": round(conf.item(), 4),
                "accept_t1_by_pos": [round(v, 3) for v in per_pos.tolist()]}

    # ------------------------------------------------------------------------------------------------------------
    @torch.no_grad()
    def segment_nats(self, segs):
        """-sum log p (nats) and UTF-8 bytes of the scored tokens, per segment (exact float32: no TF32)."""
        self.body.eval()
        tf32 = torch.backends.cuda.matmul.allow_tf32
        torch.backends.cuda.matmul.allow_tf32 = False
        nats, nbytes = [], []
        for i in range(0, len(segs), 16):
            x = segs[i:i + 16].to(self.dev)
            logits = self.body(input_ids=x[:, :-1], use_cache=False).logits.double()
            lp = torch.log_softmax(logits, dim=-1).gather(-1, x[:, 1:, None])[..., 0]
            nats += (-lp.sum(dim=1)).tolist()
            nbytes += self.byte_len[x[:, 1:]].sum(dim=1).tolist()
        torch.backends.cuda.matmul.allow_tf32 = tf32
        return nats, nbytes

    def bpb(self, segs):
        nats, nbytes = self.segment_nats(segs)
        return round(sum(nats) / math.log(2) / sum(nbytes), 5)

    @torch.no_grad()
    def greedy(self, prompt, n):
        self.body.eval()
        ids = [D.BOS] + self.tok.encode(prompt, add_special_tokens=False).ids
        start = len(ids)
        for _ in range(n):
            logits = self.body(input_ids=torch.tensor([ids], device=self.dev), use_cache=False).logits[0, -1]
            ids.append(int(logits.argmax()))
            if ids[-1] == D.EOS:
                break
        return {"prompt": prompt, "prompt_ids": ids[:start], "ids": ids[start:],
                "text": self.tok.decode(ids[start:], skip_special_tokens=False)}

    def acceptance(self, smoke):
        target = speculative.Target(self.body, C.LAYERS - 1, C.DSPARK_TARGET_LAYERS)
        n_prompts, new = (2, 12) if smoke else (6, 40)
        stride = max(1, len(self.test) // n_prompts)
        prompts = [self.test[i * stride][:65].tolist() for i in range(n_prompts)]
        mtp = lambda f, ids, k, t, g: speculative.draft_mtp(self.mtp.eval(), self.body, f, ids, k, t, g)  # noqa
        dsp = lambda f, ids, k, t, g: speculative.draft_dspark(self.dspark.eval(), self.body, f, ids, k, t, g)  # noqa
        report = {}
        for name, fn, k in (("mtp", mtp, 3), ("dspark", dsp, C.DSPARK_BLOCK)):
            for temp in (0.0, 1.0):
                r = speculative.acceptance_report(target, fn, prompts, new, k, temp, self.args.seed + 3, self.dev)
                report[f"{name}_t{temp:g}"] = r
                print("acceptance", name, json.dumps(r), flush=True)
        target.tap.remove()
        return report

    # ------------------------------------------------------------------------------------------------------------
    def export(self, out):
        """Writes OUT/demo (MTP drafter) and OUT/demo-dspark (DSpark drafters); same body shard in both."""
        with torch.no_grad():
            body_w = V.CheckpointWriter(V.module_tensors(self.body))
            V.export_body(body_w, self.cfg)
            V.verify_export(body_w.tensors, V.module_tensors(self.body))
            mtp_w = V.CheckpointWriter(V.module_tensors(self.mtp))
            drafters.export_mtp(mtp_w, self.cfg)
            ds_w = V.CheckpointWriter(V.module_tensors(self.dspark))
            drafters.export_dspark(ds_w, self.cfg)
        for name, cfg, draft in (("demo", C.mtp_config(), mtp_w), ("demo-dspark", C.dspark_config(), ds_w)):
            d = os.path.join(out, name)
            os.makedirs(d, exist_ok=True)
            json.dump(cfg, open(os.path.join(d, "config.json"), "w"), indent=2)
            V.write_shards(d, {**body_w.tensors, **draft.tensors}, [sorted(body_w.tensors), sorted(draft.tensors)])
            for f in ("tokenizer.json", "tokenizer_config.json"):
                open(os.path.join(d, f), "wb").write(open(os.path.join(self.args.tokenizer, f), "rb").read())

    def final(self):
        args, out = self.args, self.args.out
        record = {"phase_logs": self.log, "args": vars(args), "stream": self.stream_info,
                  "segments": {"valid": len(self.valid), "test": len(self.test), "tokens_each": D.SEG}}
        record["test_bpb_float32"] = self.bpb(self.test)
        record["valid_bpb_float32"] = self.bpb(self.valid)
        self.save("done", 0, None)
        self.export(os.path.join(out, "models"))
        nats, nbytes = self.segment_nats(self.test)
        record["test_bpb_exported"] = round(sum(nats) / math.log(2) / sum(nbytes), 5)
        record["test_segment_nats_exported"] = nats
        record["test_segment_bytes"] = nbytes
        record["valid_bpb_exported"] = self.bpb(self.valid)
        print("bpb", json.dumps({k: record[k] for k in record if "bpb" in k}), flush=True)
        V.save_npy(os.path.join(out, "heldout_tokens.npy"), self.test.to(torch.int32), "<i4")
        record["golden"] = [self.greedy(p, 16 if args.smoke else 48) for p in GOLDEN_PROMPTS]
        for g in record["golden"]:
            print("golden", json.dumps({"prompt": g["prompt"], "text": g["text"]}, ensure_ascii=False), flush=True)
        record["acceptance"] = self.acceptance(args.smoke)
        record["seconds"] = round(time.time() - self.t0, 1)
        return record

    def run(self):
        self.indexers = hf_patches.install_indexer_distillation(self.body)
        self.balancer = hf_patches.RouterBalancer(self.body, self.args.router_bias_rate)
        a = self.args
        self.run_phase("body", a.body_steps, self.body.parameters(), a.body_lr, a.body_warmup, self.body_step)
        self.balancer.remove()
        for p in self.body.parameters():
            p.requires_grad_(False)
        self.tap = speculative.BodyTap(self.body, sorted(set([C.LAYERS - 1] + C.DSPARK_TARGET_LAYERS)))
        if self.phase == "mtp" and self.start_step == 0:
            self.mtp.init_from(self.body)
        self.run_phase("mtp", a.mtp_steps, self.mtp.parameters(), a.draft_lr, a.draft_warmup, self.mtp_step)
        if self.phase == "dspark" and self.start_step == 0:
            self.dspark.init_from(self.body, C.DSPARK_TARGET_LAYERS)
        self.run_phase("dspark", a.dspark_steps, self.dspark.parameters(), a.draft_lr, a.draft_warmup,
                       self.dspark_step)
        self.tap.remove()
        return self.final()


def main():
    args = parse_args()
    dev = torch.device("cuda")
    torch.backends.cuda.matmul.allow_tf32 = True
    torch.backends.cudnn.allow_tf32 = True
    os.makedirs(args.out, exist_ok=True)
    trainer = Trainer(args, dev)
    try:
        record = trainer.run()
    except StopForResume:
        print(f"stopped for resume: {os.path.join(args.out, 'ckpt')} (exit {RESUME_EXIT})", flush=True)
        return RESUME_EXIT
    import tokenizers
    import transformers
    record["versions"] = {"torch": torch.__version__, "transformers": transformers.__version__,
                          "tokenizers": tokenizers.__version__, "gpu": torch.cuda.get_device_name()}
    record["command"] = " ".join(["python3", "tools/train/train.py"] + sys.argv[1:])
    record["data_manifest"] = json.load(open(os.path.join(args.data, "manifest.json")))
    record["tokenizer_sha256"] = D.file_sha256(os.path.join(args.tokenizer, "tokenizer.json"))
    record["config"] = C.mtp_config()
    json.dump(record, open(os.path.join(args.out, "training_record.json"), "w"), indent=1, ensure_ascii=False)
    print(f"done in {record['seconds']} s", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
