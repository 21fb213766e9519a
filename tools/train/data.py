"""Token streams and evaluation segments of the demo corpus (prepare_data.py's output, tokenized with HF tokenizers).

Training windows: [BOS] + stream[o : o + S] at random offsets o of the training stream, where the stream is every
training document and dialogue as [BOS] + tokens + [EOS], in a seeded shuffled order. Evaluation segments (the
held-out bits per byte): each document of a split tokenized alone, cut into consecutive pieces of SEG tokens (the
last partial piece is dropped), each scored as [BOS] + piece; bits per byte = sum of -log2 p over the piece tokens /
UTF-8 bytes of the piece tokens.
"""
import hashlib
import json
import os
import random

import torch

BOS, EOS = 0, 1
SEG = 511


def read_jsonl(path):
    return [json.loads(line) for line in open(path, encoding="utf-8")]


def file_sha256(path):
    return hashlib.sha256(open(path, "rb").read()).hexdigest()


def gpt2_byte_decoder():
    """The inverse of GPT-2's bytes_to_unicode map (byte-level BPE vocabulary characters -> byte values)."""
    bs = list(range(ord("!"), ord("~") + 1)) + list(range(ord("¡"), ord("¬") + 1)) + list(range(ord("®"), ord("ÿ") + 1))
    cs = bs[:]
    n = 0
    for b in range(256):
        if b not in bs:
            bs.append(b)
            cs.append(256 + n)
            n += 1
    return {chr(c): b for b, c in zip(bs, cs)}


def token_byte_lengths(tok):
    """UTF-8 byte count of every token id (added tokens: their content's bytes)."""
    decoder = gpt2_byte_decoder()
    lengths = [0] * tok.get_vocab_size()
    added = {t.content for t in tok.get_added_tokens_decoder().values()}
    for piece, i in tok.get_vocab().items():
        lengths[i] = len(piece.encode()) if piece in added else sum(1 for ch in piece if ch in decoder)
    return torch.tensor(lengths, dtype=torch.long)


def encode_all(tok, texts):
    return [e.ids for e in tok.encode_batch(texts, add_special_tokens=False)]


def training_stream(tok, data_dir, seed):
    docs = encode_all(tok, read_jsonl(os.path.join(data_dir, "train.jsonl")))
    chats = encode_all(tok, read_jsonl(os.path.join(data_dir, "dialogues.jsonl")))
    items = [[BOS] + d + [EOS] for d in docs] + chats  # a rendered chat starts with BOS and ends with EOS
    random.Random(seed).shuffle(items)
    flat = [t for item in items for t in item]
    return torch.tensor(flat, dtype=torch.long), {"documents": len(docs), "dialogues": len(chats),
                                                 "tokens": len(flat)}


def segments(tok, data_dir, split):
    """[N, SEG + 1] int64 ([BOS] + SEG tokens) of a split's documents."""
    rows = []
    for ids in encode_all(tok, read_jsonl(os.path.join(data_dir, f"{split}.jsonl"))):
        for i in range(0, len(ids) - SEG + 1, SEG):
            rows.append([BOS] + ids[i:i + SEG])
    return torch.tensor(rows, dtype=torch.long)


def sample_windows(stream, batch, seq, gen):
    """[B, seq + 1] windows: BOS then seq + ... tokens of the stream (inputs = [:, :-1], labels = [:, 1:])."""
    offsets = torch.randint(0, stream.numel() - seq, (batch,), generator=gen)
    idx = offsets[:, None] + torch.arange(seq)[None]
    body = stream[idx]
    return torch.cat([torch.full((batch, 1), BOS, dtype=torch.long), body], dim=1)
