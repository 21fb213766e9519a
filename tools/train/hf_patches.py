"""Training aids patched into HF transformers 5.17's DeepSeek-V4 modules (the forward math stays HF's own).

* Lightning-indexer distillation: the indexer's top-k picks carry no gradient, so (as in DeepSeek-V3.2) the indexer
  is trained to match the main attention: per CSA layer, KL(target || softmax(index scores)) over the compressed
  entries a query may see, with target = the main attention's probabilities over those entries (no top-k mask,
  averaged over heads, detached). The indexer's inputs are detached, so this loss trains the indexer alone.
* Auxiliary-loss-free expert balancing (DeepSeek-V3): each learned router's selection bias
  (`e_score_correction_bias`, exported as `ffn.gate.bias`) moves by a fixed rate towards under-used experts after
  every step. Hash layers keep their fixed tid2eid table.
"""
import types

import torch
import torch.nn.functional as F


def _modeling():
    import transformers.models.deepseek_v4.modeling_deepseek_v4 as M
    return M


def install_indexer_distillation(model):
    """Patches the model's CSA layers; returns the list of indexers whose `_distill_loss` is set by each forward."""
    M = _modeling()
    indexers = []
    for layer in model.model.layers:
        comp = layer.self_attn.compressor
        if not isinstance(comp, M.DeepseekV4CSACompressor):
            continue
        ix = comp.indexer
        ix._orig_forward = ix.forward
        ix.forward = types.MethodType(
            lambda self, h, q, pos, cache, idx: self._orig_forward(h.detach(), q.detach(), pos, cache, idx), ix)
        scorer = ix.scorer
        scorer._orig_forward = scorer.forward

        def scorer_forward(self, q, keys, hidden):
            out = self._orig_forward(q, keys, hidden)
            self._last_scores = out
            return out

        scorer.forward = types.MethodType(scorer_forward, scorer)
        ix._distill_loss = None
        indexers.append(ix)
    if not getattr(M, "_dsv4_distill_installed", False):
        M._dsv4_orig_eager = M.eager_attention_forward
        M.eager_attention_forward = _eager_with_distillation
        M._dsv4_distill_installed = True
    return indexers


def _eager_with_distillation(module, query, key, value, attention_mask, **kwargs):
    M = _modeling()
    out = M._dsv4_orig_eager(module, query, key, value, attention_mask, **kwargs)
    comp = module.compressor
    seq = query.shape[2]
    if (module.training and isinstance(comp, M.DeepseekV4CSACompressor) and key.shape[2] > seq
            and getattr(comp.indexer.scorer, "_last_scores", None) is not None):
        comp.indexer._distill_loss = _indexer_kl(query, key[:, :, seq:], kwargs["scaling"], comp)
    return out


def _indexer_kl(query, compressed, scaling, comp):
    seq, entries = query.shape[2], compressed.shape[2]
    pos = torch.arange(seq, device=query.device)
    eligible = torch.arange(entries, device=query.device)[None, :] < ((pos + 1) // comp.compress_rate)[:, None]
    with torch.no_grad():
        scores = torch.matmul(query, compressed.transpose(2, 3)) * scaling  # [B, H, S, C]
        scores = scores.masked_fill(~eligible, float("-inf"))
        target = torch.nan_to_num(scores.softmax(dim=-1), nan=0.0).mean(dim=1)  # [B, S, C]
    index_scores = comp.indexer.scorer._last_scores[..., :entries]
    log_q = F.log_softmax(index_scores.masked_fill(~eligible, float("-inf")), dim=-1)
    terms = torch.where(eligible, target * (torch.log(target.clamp(min=1e-12)) - log_q), torch.zeros_like(target))
    rows = eligible.any(dim=-1)
    comp.indexer.scorer._last_scores = None
    return terms.sum(dim=-1)[:, rows].mean()


def distillation_loss(indexers):
    losses = [ix._distill_loss for ix in indexers if ix._distill_loss is not None]
    for ix in indexers:
        ix._distill_loss = None
    return torch.stack(losses).mean() if losses else None


class RouterBalancer:
    """Counts each learned router's expert picks (a forward hook) and nudges its selection bias."""

    def __init__(self, model, rate):
        M = _modeling()
        self.rate = rate
        self.routers = [m for m in model.modules() if isinstance(m, M.DeepseekV4TopKRouter)]
        self.counts = {id(r): torch.zeros(r.num_experts, device=r.weight.device) for r in self.routers}
        self.handles = [r.register_forward_hook(self._hook) for r in self.routers]

    def _hook(self, module, args, output):
        if module.training:
            indices = output[2]
            self.counts[id(module)] += torch.bincount(indices.reshape(-1), minlength=module.num_experts).float()

    @torch.no_grad()
    def step(self):
        """Returns the max/mean load ratio over the routers since the last step."""
        worst = 0.0
        for r in self.routers:
            load = self.counts[id(r)]
            if load.sum() == 0:
                continue
            r.e_score_correction_bias += self.rate * torch.sign(load.mean() - load)
            worst = max(worst, (load.max() / load.mean()).item())
            load.zero_()
        return worst

    def remove(self):
        for h in self.handles:
            h.remove()
