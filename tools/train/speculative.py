"""Speculative decoding in PyTorch, to measure the drafters' acceptance lengths (the engine's own measurement waits for
speculative decoding in dsv4, issue 17).

One step: the drafter proposes K tokens after the accepted prefix; the target scores prefix + drafts in one causal
pass; greedy (temperature 0) accepts the longest prefix of drafts equal to the target's argmax, temperature T accepts
draft i with probability min(1, p_i(d_i) / q_i(d_i)) and on the first rejection samples from max(0, p - q)
normalised (standard rejection sampling, lossless); either way one more target token (correction or bonus) follows.
Reported: accepted drafts per step and emitted tokens per step (accepted + 1). Each step recomputes the target over
the whole prefix (no cache): slow but exact, and the small demo model makes it cheap.
"""
import torch


class BodyTap:
    """Forward hooks that keep the outputs (4-stream states) of chosen body layers."""

    def __init__(self, body, layers):
        self.out = {}
        self.handles = [body.model.layers[l].register_forward_hook(self._hook(l)) for l in layers]

    def _hook(self, l):
        def fn(module, args, output):
            self.out[l] = output[0] if isinstance(output, tuple) else output
        return fn

    def remove(self):
        for h in self.handles:
            h.remove()


def probabilities(logits, temperature):
    if temperature == 0:
        p = torch.zeros_like(logits, dtype=torch.float32)
        p[logits.argmax()] = 1.0
        return p
    return (logits.float() / temperature).softmax(dim=-1)


def pick(probs, temperature, gen):
    if temperature == 0:
        return int(probs.argmax())
    return int(torch.multinomial(probs, 1, generator=gen))


class Target:
    """The frozen body: logits and tapped states of a token list."""

    def __init__(self, body, last_layer, dspark_layers):
        self.body = body
        self.last, self.dspark_layers = last_layer, dspark_layers
        self.tap = BodyTap(body, sorted(set([last_layer] + list(dspark_layers))))

    @torch.no_grad()
    def __call__(self, ids):
        x = torch.tensor([ids], device=self.body.lm_head.weight.device)
        logits = self.body(x, use_cache=False).logits[0]
        last = self.tap.out[self.last][0]
        mainhid = torch.cat([self.tap.out[l][0].mean(dim=1) for l in self.dspark_layers], dim=-1)
        return logits, {"last": last, "mainhid": mainhid}


@torch.no_grad()
def draft_mtp(mtp, body, feats, ids, k, temperature, gen):
    rows = len(ids) - 1  # rows t = 0 .. L-2 pair the target state at t with token t + 1
    streams = feats["last"][:rows][None]
    tokens = torch.tensor([ids[1:]], device=streams.device)
    drafts, qs = [], []
    for _ in range(k):
        logits, z = mtp(streams, tokens, body)
        q = probabilities(logits[0, -1], temperature)
        d = pick(q, temperature, gen)
        drafts.append(d)
        qs.append(q)
        streams = torch.cat([streams, z[:, -1:]], dim=1)
        tokens = torch.cat([tokens, torch.tensor([[d]], device=tokens.device)], dim=1)
    return drafts, qs


@torch.no_grad()
def draft_dspark(dspark, body, feats, ids, k, temperature, gen):
    p = len(ids) - 2  # the target consumed positions 0..p; ids[-1] = y is its latest token
    dev = feats["mainhid"].device
    ctx = dspark.context(feats["mainhid"][:p + 1])[None]
    h, base = dspark.block_states(torch.tensor([[ids[-1]]], device=dev), torch.tensor([[p]], device=dev), ctx, body)
    drafts, qs, prev = [], [], ids[-1]
    for j in range(min(k, dspark.block_size)):
        logits, _ = dspark.markov(h[:, :, j], base[:, :, j], torch.tensor([[prev]], device=dev))
        q = probabilities(logits[0, 0], temperature)
        prev = pick(q, temperature, gen)
        drafts.append(prev)
        qs.append(q)
    return drafts, qs


@torch.no_grad()
def speculate(target, draft, prompt, new_tokens, k, temperature, gen):
    """Returns the accepted-draft counts of every step for one prompt."""
    ids = list(prompt)
    logits, feats = target(ids)
    ids.append(pick(probabilities(logits[-1], temperature), temperature, gen))
    emitted, accepted = 1, []
    while emitted < new_tokens:
        drafts, qs = draft(feats, ids, k, temperature, gen)
        base = len(ids) - 1
        logits, feats = target(ids + drafts)
        n = 0
        while n < len(drafts):
            p = probabilities(logits[base + n], temperature)
            d = drafts[n]
            ok = d == int(p.argmax()) if temperature == 0 else \
                float(torch.rand((), generator=gen, device=p.device)) < min(1.0, float(p[d] / qs[n][d]))
            if not ok:
                break
            n += 1
        p = probabilities(logits[base + n], temperature)
        if n < len(drafts) and temperature != 0:
            residual = (p - qs[n]).clamp(min=0)
            p = residual / residual.sum() if residual.sum() > 0 else p
        ids += drafts[:n] + [pick(p, temperature, gen)]
        emitted += n + 1
        accepted.append(n)
        feats = {key: v[:len(ids) - 1] for key, v in feats.items()}
    return accepted


def acceptance_report(target, draft, prompts, new_tokens, k, temperature, seed, device):
    gen = torch.Generator(device=device)
    gen.manual_seed(seed)
    steps = []
    for prompt in prompts:
        steps += speculate(target, draft, prompt, new_tokens, k, temperature, gen)
    total = len(steps)
    return {"k": k, "temperature": temperature, "prompts": len(prompts), "new_tokens": new_tokens, "steps": total,
            "mean_accepted": sum(steps) / total, "tokens_per_step": (sum(steps) + total) / total,
            "histogram": [steps.count(i) for i in range(k + 1)]}
