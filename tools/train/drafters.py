"""The demo model's drafters, model-spec section 3, built from HF transformers 5.17's DeepSeek-V4 modules.

MTP (original V4, keys mtp.0.*): row t combines the target's 4-stream state after the last layer at position t
with the embedding of token t+1 and predicts token t+2:
    Z_j = h_proj(RMS(H_t,j; hnorm)) + e_proj(RMS(E[x_t+1]; enorm)),  Z <- Block(Z) (sliding window, causal, RoPE
    position t, theta 1e4),  logits = head(RMS(hc_head(Z); norm)).
Recursion (k > 1 drafts) feeds the block's output state Z back as H with the drafted token, at position t+1.

DSpark (0731, keys mtp.0-2.*): context rows c_T = RMS(main_proj(concat_l mean_j X^(l)_T,j); main_norm) for the
target layers l; each stage turns c_T into its own K=V row (kv_proj, kv_norm, RoPE at T; no attention norm). A
block of B=5 rows [y, N, N, N, N] at positions p+1..p+5 (y = the token the target emitted after position p, N = the
noise token) runs through the 3 stages; each block query attends to the context rows at positions p-W+1..p (W =
sliding window) and to all 5 block rows (bidirectional), plus the sink. Row k: h_k = hc_head(Z_k), base logits
U_k = head(RMS(h_k; norm)), Markov step logits_k = U_k + markov_w2 . markov_w1[d_k] with d_0 = y and d_k the
previous draft, confidence kappa_k = proj([h_k ; markov_w1[d_k]]).
"""
import torch
import torch.nn as nn
import torch.nn.functional as F


def _modeling():
    import transformers.models.deepseek_v4.modeling_deepseek_v4 as M
    return M


def rope(x, cos, sin):
    """Interleaved RoPE on the trailing rope dims (HF's apply_rotary_pos_emb); cos/sin [..., S, r/2] broadcast."""
    r = cos.shape[-1] * 2
    c, s = cos.repeat_interleave(2, dim=-1), sin.repeat_interleave(2, dim=-1)
    nope, rp = x[..., :-r], x[..., -r:]
    rotated = torch.stack((-rp[..., 1::2], rp[..., 0::2]), dim=-1).flatten(-2)
    return torch.cat([nope, rp * c + rotated * s], dim=-1)


def sliding_mask(seq, window, device):
    """Additive causal sliding-window mask [1, 1, S, S]: key j visible to query i when 0 <= i - j < window."""
    i = torch.arange(seq, device=device)
    d = i[:, None] - i[None, :]
    ok = (d >= 0) & (d < window)
    return torch.zeros(seq, seq, device=device).masked_fill(~ok, float("-inf"))[None, None]


def mix(hc, streams, sublayer):
    """One mHC site around `sublayer` (HF DeepseekV4DecoderLayer's arithmetic)."""
    post, comb, collapsed = hc(streams)
    y = sublayer(collapsed)
    return post.unsqueeze(-1) * y.unsqueeze(-2) + torch.matmul(comb.transpose(-1, -2), streams)


def init_block_from(block, source):
    """Copies a body layer's weights into a draft block (everything but the compressor)."""
    state = {k: v for k, v in source.state_dict().items() if ".compressor." not in k and "tid2eid" not in k}
    missing, unexpected = block.load_state_dict(state, strict=False)
    assert not unexpected, unexpected
    assert all("e_score_correction_bias" in k for k in missing), missing


class MtpHead(nn.Module):
    def __init__(self, dcfg):
        super().__init__()
        M = _modeling()
        d = dcfg.hidden_size
        self.window = dcfg.sliding_window
        self.block = M.DeepseekV4DecoderLayer(dcfg, 0)
        self.e_proj = nn.Linear(d, d, bias=False)
        self.h_proj = nn.Linear(d, d, bias=False)
        self.enorm = M.DeepseekV4RMSNorm(d, eps=dcfg.rms_norm_eps)
        self.hnorm = M.DeepseekV4RMSNorm(d, eps=dcfg.rms_norm_eps)
        self.norm = M.DeepseekV4RMSNorm(d, eps=dcfg.rms_norm_eps)
        self.hc_head = M.DeepseekV4HyperHead(dcfg)
        self.rotary = M.DeepseekV4RotaryEmbedding(dcfg)

    def init_from(self, body):
        init_block_from(self.block, body.model.layers[-1])
        with torch.no_grad():
            self.e_proj.weight.copy_(torch.eye(self.e_proj.weight.shape[0]))
            self.h_proj.weight.copy_(torch.eye(self.h_proj.weight.shape[0]))
            for n in (self.enorm, self.hnorm, self.norm):
                n.weight.fill_(1.0)
            self.norm.weight.copy_(body.model.norm.weight)
            self.hc_head.load_state_dict(body.model.hc_head.state_dict())

    def forward(self, streams, tokens, body, start=0):
        """streams [B, S, hc, D] (target states or recursion states), tokens [B, S] (the token after each row);
        rows sit at positions start..start+S-1. Returns (logits [B, S, V], block output streams)."""
        b, s = tokens.shape
        e = self.enorm(body.model.embed_tokens(tokens))
        z = self.h_proj(self.hnorm(streams)) + self.e_proj(e).unsqueeze(2)
        pos = torch.arange(start, start + s, device=tokens.device)[None].expand(b, -1)
        cs = self.rotary(z, position_ids=pos, layer_type="main")
        z = self.block(z, position_embeddings={"main": cs, "compress": cs}, position_ids=pos,
                       attention_mask=sliding_mask(s, self.window, tokens.device), input_ids=None)
        return body.lm_head(self.norm(self.hc_head(z))), z


class DsparkHead(nn.Module):
    def __init__(self, dcfg, vocab, rank, targets, block, noise_id):
        super().__init__()
        M = _modeling()
        d = dcfg.hidden_size
        self.window, self.block_size, self.noise_id = dcfg.sliding_window, block, noise_id
        self.stages = nn.ModuleList([M.DeepseekV4DecoderLayer(dcfg, 0) for _ in range(3)])
        self.main_proj = nn.Linear(targets * d, d, bias=False)
        self.main_norm = M.DeepseekV4RMSNorm(d, eps=dcfg.rms_norm_eps)
        self.norm = M.DeepseekV4RMSNorm(d, eps=dcfg.rms_norm_eps)
        self.hc_head = M.DeepseekV4HyperHead(dcfg)
        self.markov_w1 = nn.Parameter(torch.randn(vocab, rank) * 0.02)
        self.markov_w2 = nn.Parameter(torch.zeros(vocab, rank))
        self.confidence = nn.Linear(d + rank, 1, bias=False)
        self.rotary = M.DeepseekV4RotaryEmbedding(dcfg)

    def init_from(self, body, target_layers):
        for stage, l in zip(self.stages, target_layers):
            init_block_from(stage, body.model.layers[l])
        with torch.no_grad():
            d = self.main_proj.weight.shape[0]
            self.main_proj.weight.copy_(torch.cat([torch.eye(d)] * len(target_layers), dim=1) / len(target_layers))
            self.main_norm.weight.fill_(1.0)
            self.norm.weight.copy_(body.model.norm.weight)
            self.hc_head.load_state_dict(body.model.hc_head.state_dict())
            self.confidence.weight.zero_()

    def context(self, mainhid):
        """c_T for mainhid [B, S, targets * D] (the stream means after the target layers)."""
        return self.main_norm(self.main_proj(mainhid))

    def context_keys(self, attn, ctx):
        """A stage's K=V rows of the context: RoPE(kv_norm(kv_proj(c_T)), T) for ctx [B, S, D] -> [B, S, hd]."""
        b, s, _ = ctx.shape
        pos = torch.arange(s, device=ctx.device)[None].expand(b, -1)
        cos, sin = self.rotary(ctx, position_ids=pos, layer_type="main")
        return rope(attn.kv_norm(attn.kv_proj(ctx)), cos, sin)

    def _attention(self, attn, x, pos_block, kv_c, ctx_bias):
        """x [B, A, K, D] block rows (normed), pos_block [B, A, K]; kv_c [B, S, hd] context K=V rows, ctx_bias
        [B, A, S] (0 visible, -inf not). Returns the attention output [B, A, K, D]."""
        b, a, k, _ = x.shape
        n, hd, heads, s = b * a, attn.head_dim, attn.num_heads, kv_c.shape[1]
        xf = x.reshape(n, k, -1)
        cos, sin = self.rotary(xf, position_ids=pos_block.reshape(n, k), layer_type="main")  # [N, K, r/2]
        q = attn.q_b_proj(attn.q_a_norm(attn.q_a_proj(xf))).view(n, k, heads, hd).transpose(1, 2)  # [N, H, K, hd]
        q = rope(attn.q_b_norm(q), cos[:, None], sin[:, None])
        kv_b = rope(attn.kv_norm(attn.kv_proj(xf)), cos, sin)  # [N, K, hd]
        s_ctx = torch.einsum("bahkd,bsd->bahks", q.view(b, a, heads, k, hd), kv_c) * attn.scaling
        s_ctx = s_ctx + ctx_bias[:, :, None, None, :]
        s_blk = (torch.matmul(q, kv_b[:, None].transpose(-1, -2)) * attn.scaling).view(b, a, heads, k, k)
        sinks = attn.sinks.view(1, 1, -1, 1, 1).expand(b, a, heads, k, 1)
        probs = torch.cat([s_ctx, s_blk, sinks], dim=-1).softmax(dim=-1)
        o = torch.einsum("bahks,bsd->bahkd", probs[..., :s], kv_c).reshape(n, heads, k, hd)
        o = o + torch.matmul(probs[..., s:s + k].reshape(n, heads, k, k), kv_b[:, None])
        o = rope(o, cos[:, None], -sin[:, None]).transpose(1, 2)  # inverse RoPE at the query position
        grouped = attn.o_a_proj(o.reshape(n, k, attn.config.o_groups, -1)).flatten(2)
        return attn.o_b_proj(grouped).view(b, a, k, -1)

    def block_states(self, first_tokens, anchors, ctx, body):
        """first_tokens [B, A] (y), anchors [B, A] (p), ctx [B, S, D] context rows c_T of each sequence.
        Returns (h [B, A, K, D] = hc_head of the last stage, base logits U [B, A, K, V])."""
        (b, a), k = first_tokens.shape, self.block_size
        dev = first_tokens.device
        tokens = torch.full((b, a, k), self.noise_id, dtype=torch.long, device=dev)
        tokens[..., 0] = first_tokens
        pos_block = anchors[..., None] + 1 + torch.arange(k, device=dev)
        t = torch.arange(ctx.shape[1], device=dev)
        visible = (t <= anchors[..., None]) & (t > anchors[..., None] - self.window)
        ctx_bias = torch.zeros(visible.shape, device=dev).masked_fill(~visible, float("-inf"))
        hc = body.config.hc_mult
        z = body.model.embed_tokens(tokens.view(b * a, k)).unsqueeze(2).expand(-1, -1, hc, -1).contiguous()
        for st in self.stages:
            kv_c = self.context_keys(st.self_attn, ctx)
            z = mix(st.attn_hc, z, lambda u, st=st, kv_c=kv_c: self._attention(
                st.self_attn, st.input_layernorm(u).view(b, a, k, -1), pos_block, kv_c, ctx_bias).view(b * a, k, -1))
            z = mix(st.ffn_hc, z, lambda u, st=st: st.mlp(st.post_attention_layernorm(u)))
        h = self.hc_head(z).view(b, a, k, -1)
        return h, body.lm_head(self.norm(h))

    def markov(self, h, base_logits, markov_tokens):
        """Row logits and confidence logits for the Markov inputs d_k (markov_tokens, shaped like h[..., 0])."""
        m = self.markov_w1[markov_tokens]
        logits = base_logits + torch.matmul(m, self.markov_w2.t())
        return logits, self.confidence(torch.cat([h, m], dim=-1)).squeeze(-1)

    def forward(self, first_tokens, anchors, ctx, markov_tokens, body):
        """Teacher-forced rows: markov_tokens [B, A, K] = d_0..d_K-1. Returns (logits [B, A, K, V], kappa [B, A, K])."""
        h, base = self.block_states(first_tokens, anchors, ctx, body)
        return self.markov(h, base, markov_tokens)


def export_mtp(w, cfg):
    """MTP tensors (original V4 names, mtp.0.*) from a CheckpointWriter over MtpHead's parameters."""
    from v4_checkpoint import export_block

    export_block(w, "block.", "mtp.0.", cfg)
    w.fp8("e_proj.weight", "mtp.0.e_proj")
    w.fp8("h_proj.weight", "mtp.0.h_proj")
    for n in ("enorm", "hnorm", "norm"):
        w.bf16(f"{n}.weight", f"mtp.0.{n}.weight")
    w.hc_head("hc_head", "mtp.0.")


def export_dspark(w, cfg):
    """DSpark tensors (0731 names, mtp.0-2.*) from a CheckpointWriter over DsparkHead's parameters."""
    from v4_checkpoint import export_block

    for s in range(3):
        export_block(w, f"stages.{s}.", f"mtp.{s}.", cfg)
    w.fp8("main_proj.weight", "mtp.0.main_proj")
    w.bf16("main_norm.weight", "mtp.0.main_norm.weight")
    w.bf16("norm.weight", "mtp.2.norm.weight")
    w.hc_head("hc_head", "mtp.2.")
    w.bf16("markov_w1", "mtp.2.markov_head.markov_w1.weight")
    w.bf16("markov_w2", "mtp.2.markov_head.markov_w2.weight")
    w.bf16("confidence.weight", "mtp.2.confidence_head.proj.weight")


def soft_cross_entropy(logits, target_probs):
    return -(target_probs * F.log_softmax(logits.float(), dim=-1)).sum(dim=-1).mean()


def acceptance_probability(logits, target_probs):
    """sum_v min(p_v, q_v): the chance that rejection sampling at temperature 1 accepts a draft from q."""
    return torch.minimum(logits.float().softmax(dim=-1), target_probs).sum(dim=-1)
