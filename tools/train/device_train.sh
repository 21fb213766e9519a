#!/usr/bin/env bash
# Device-machine entry point of the demo-model training (docs/demo-model.md). Run from a directory that holds
# tools/train, tools/fixtures and data.tar.gz (prepare_data.py's output directory `data/`, packed), e.g. the staging
# folder .train/ (tools/train/stage.sh):
#
#   bash tools/train/device_train.sh smoke           pipeline test: fixture export unchanged, 10 body steps, stop,
#                                                    resume, every phase a few steps; prints step times
#   bash tools/train/device_train.sh train [ARGS]    the real run (ARGS go to train.py, e.g. --body-steps N);
#                                                    resumes from ./ckpt when it holds a checkpoint
#
# Results in $OUT: results.tar.gz (models/demo, training_record.json, heldout_tokens.npy, tokenizer_golden.jsonl),
# dspark.tar.gz (models/demo-dspark without the body shard, which is byte-identical to models/demo's),
# ckpt/checkpoint.json + checkpoint.partNN (the float32 weights / resume state), train.log.
set -euo pipefail
mode=${1:?usage: device_train.sh smoke|train [train.py args]}
shift
here=$(pwd)
export PYTHONUNBUFFERED=1
python3 -c "import torch, transformers, tokenizers; print('torch', torch.__version__, 'transformers', \
transformers.__version__, 'tokenizers', tokenizers.__version__, torch.cuda.get_device_name())"
work=/tmp/demo-train
rm -rf "$work" && mkdir -p "$work"
tar xzf data.tar.gz -C "$work"
log=$OUT/train.log

if [[ -f tokenizer/tokenizer.json ]]; then
  cp -r tokenizer "$work/tokenizer"
else
  python3 tools/train/train_tokenizer.py "$work/data" "$work/tokenizer" --golden "$work/tokenizer_golden.jsonl" \
    2>&1 | tee -a "$log"
fi

if [[ $mode == smoke ]]; then
  # The refactored fixture exporter must still write the committed flash_schedule checkpoint byte for byte.
  python3 - <<'EOF' 2>&1 | tee -a "$log"
import hashlib, os, sys
sys.path.insert(0, "tools/fixtures")
import make_fixtures as mf
cfg, model, _ = mf.build_model("flash_schedule", 1234)
mf.export_checkpoint(cfg, model, "/tmp/fx_check")
ref = os.environ.get("FIXTURE_REF", "../tests/fixtures/flash_schedule")
for f in ("model-00001-of-00002.safetensors", "model-00002-of-00002.safetensors", "model.safetensors.index.json"):
    a = hashlib.sha256(open(os.path.join("/tmp/fx_check", f), "rb").read()).hexdigest()
    b = hashlib.sha256(open(os.path.join(ref, f), "rb").read()).hexdigest()
    print("fixture export", f, "identical" if a == b else f"DIFFERENT {a} {b}")
EOF
  set +e
  python3 tools/train/train.py --data "$work/data" --tokenizer "$work/tokenizer" --out "$work/out" --smoke \
    --stop-after-steps 10 2>&1 | tee -a "$log"
  rc=${PIPESTATUS[0]}
  set -e
  [[ $rc -eq 75 ]] || { echo "smoke: expected exit 75 after 10 steps, got $rc"; exit 1; }
  python3 tools/train/train.py --data "$work/data" --tokenizer "$work/tokenizer" --out "$work/out" --smoke \
    --resume "$work/out/ckpt" 2>&1 | tee -a "$log"
else
  resume=()
  if [[ -f ckpt/checkpoint.json ]]; then resume=(--resume "$here/ckpt"); fi
  python3 tools/train/train.py --data "$work/data" --tokenizer "$work/tokenizer" --out "$work/out" "${resume[@]}" \
    "$@" 2>&1 | tee -a "$log"
fi

out=$work/out
[[ -f $work/tokenizer_golden.jsonl ]] && cp "$work/tokenizer_golden.jsonl" "$out/"
tar czf "$OUT/results.tar.gz" -C "$out" models/demo training_record.json heldout_tokens.npy \
  $(cd "$out" && ls tokenizer_golden.jsonl 2>/dev/null)
tar czf "$OUT/dspark.tar.gz" -C "$out" --exclude model-00001-of-00002.safetensors models/demo-dspark
cmp "$out/models/demo/model-00001-of-00002.safetensors" "$out/models/demo-dspark/model-00001-of-00002.safetensors"
mkdir -p "$OUT/ckpt" && cp "$out"/ckpt/* "$OUT/ckpt/"
ls -la "$OUT" "$OUT/ckpt"
