"""Training checkpoints small enough to travel: float32 parameters, Adam moments in bf16, split into parts of at most
15 MiB (the device tool returns files of at most 16 MiB), with a JSON index holding the parts' sha256.

    DIR/checkpoint.json   {"phase", "step", "parts": [{"file", "sha256", "bytes"}], ...}
    DIR/checkpoint.partNN
"""
import hashlib
import io
import json
import os

import torch

PART_BYTES = 15 << 20


def _compact_optimizer(state):
    """Adam moments to bf16 (halves the size; a resumed run continues from the rounded moments)."""
    out = {"param_groups": state["param_groups"], "state": {}}
    for k, v in state["state"].items():
        out["state"][k] = {n: (t.to(torch.bfloat16) if torch.is_tensor(t) and t.dim() > 0 else t) for n, t in v.items()}
    return out


def _expand_optimizer(state):
    for v in state["state"].values():
        for n, t in v.items():
            if torch.is_tensor(t) and t.dtype == torch.bfloat16:
                v[n] = t.float()
    return state


def save(directory, phase, step, modules, optimizer, rng, extra):
    """modules: {name: nn.Module}; optimizer: the current phase's optimizer or None; rng: {name: state}."""
    os.makedirs(directory, exist_ok=True)
    payload = {"modules": {k: {n: t.detach().float().cpu() if t.is_floating_point() else t.cpu()
                               for n, t in m.state_dict().items()} for k, m in modules.items()},
               "optimizer": _compact_optimizer(optimizer.state_dict()) if optimizer is not None else None,
               "rng": rng}
    buf = io.BytesIO()
    torch.save(payload, buf)
    data = buf.getvalue()
    parts = []
    for i in range(0, len(data), PART_BYTES):
        name = f"checkpoint.part{i // PART_BYTES:02d}"
        chunk = data[i:i + PART_BYTES]
        open(os.path.join(directory, name), "wb").write(chunk)
        parts.append({"file": name, "sha256": hashlib.sha256(chunk).hexdigest(), "bytes": len(chunk)})
    index = {"phase": phase, "step": step, "parts": parts, **extra}
    json.dump(index, open(os.path.join(directory, "checkpoint.json"), "w"), indent=1)
    return sum(p["bytes"] for p in parts)


def load(directory):
    """Returns (index, payload); checks every part's sha256."""
    index = json.load(open(os.path.join(directory, "checkpoint.json")))
    data = b""
    for p in index["parts"]:
        chunk = open(os.path.join(directory, p["file"]), "rb").read()
        if hashlib.sha256(chunk).hexdigest() != p["sha256"]:
            raise SystemExit(f"checkpoint: {p['file']} does not match its sha256 (incomplete copy?)")
        data += chunk
    payload = torch.load(io.BytesIO(data), map_location="cpu", weights_only=False)
    if payload["optimizer"] is not None:
        payload["optimizer"] = _expand_optimizer(payload["optimizer"])
    return index, payload
