"""The demo model's architecture (DeepSeek-style config.json) and its training hyperparameters.

Every DeepSeek-V4 layer type is present at small sizes: layers 0-1 sliding-window only, 2 and 4 CSA (ratio 4,
lightning indexer with top-16 of up to 128 entries per 512-token window), 3 and 5 HCA (ratio 32 here instead of
128, so a few hundred tokens give several entries), window 64 (instead of 128), hash-routed MoE in layers 0-2 and
learned routing in 3-5, a shared expert everywhere, mHC with hc_mult 4. The drafters: one MTP stage (original V4
layout) or three DSpark stages (0731 layout), each a full sliding-window block.
"""
import copy
import os
import sys

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "fixtures"))

from make_fixtures import BASE  # noqa: E402  (the keys every dsv4 fixture shares with DeepSeek's config.json)

LAYERS = 6
SCHEDULE = [0, 0, 4, 32, 4, 32]
DSPARK_TARGET_LAYERS = [3, 4, 5]
DSPARK_BLOCK = 5
MARKOV_RANK = 32
NOISE_TOKEN_ID = 50  # <｜place▁holder▁no▁799｜> in the demo tokenizer (tools/train/train_tokenizer.py)

BODY = dict(
    vocab_size=2048, hidden_size=256, num_hidden_layers=LAYERS, num_attention_heads=4, head_dim=128,
    qk_rope_head_dim=64, q_lora_rank=128, o_groups=2, o_lora_rank=128, sliding_window=64,
    compress_rates={"compressed_sparse_attention": 4, "heavily_compressed_attention": 32},
    index_n_heads=16, index_head_dim=64, index_topk=16, n_routed_experts=4, num_experts_per_tok=2,
    moe_intermediate_size=96, num_hash_layers=3, hc_mult=4, num_nextn_predict_layers=1,
    attention_dropout=0.0, initializer_range=0.02, use_cache=True,
)

# Training hyperparameters (train.py's defaults; the record of a run stores the values it used).
TRAIN = dict(
    seed=20261201, seq_len=512, batch=32, draft_batch=32,
    body_steps=3000, body_seconds=0.0, body_lr=2e-3, body_warmup=100, weight_decay=0.1, grad_clip=1.0, router_bias_rate=1e-3,
    mtp_steps=400, dspark_steps=400, draft_lr=1e-3, draft_warmup=30, dspark_anchors=32,
    eval_every=500, eval_segments=32,
)


def mtp_config():
    """config.json of the MTP checkpoint (original V4 layout: one draft stage, keys mtp.0.*)."""
    cfg = copy.deepcopy(BASE)
    cfg.update(copy.deepcopy(BODY))
    cfg["compress_ratios"] = SCHEDULE + [0]
    return cfg


def dspark_config():
    """config.json of the DSpark checkpoint (0731 layout: three stages mtp.0-2, dspark_* keys)."""
    cfg = mtp_config()
    cfg["compress_ratios"] = SCHEDULE + [0, 0, 0]
    cfg.update(dspark_block_size=DSPARK_BLOCK, dspark_markov_rank=MARKOV_RANK, dspark_noise_token_id=NOISE_TOKEN_ID,
               dspark_target_layer_ids=list(DSPARK_TARGET_LAYERS))
    return cfg


def draft_block_config():
    """An HF config for one sliding-window, learned-routing block (an MTP or DSpark stage)."""
    from v4_checkpoint import hf_config

    cfg = mtp_config()
    cfg.update(num_hidden_layers=1, compress_ratios=[0], num_hash_layers=0)
    draft = hf_config(cfg)
    assert draft.layer_types == ["sliding_attention"] and draft.mlp_layer_types == ["moe"], draft.layer_types
    return draft
