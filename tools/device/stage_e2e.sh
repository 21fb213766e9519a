#!/usr/bin/env bash
# Stages what the server e2e suites need on the device machine (which has no node, npm packages or tokenizer build):
# node (xz-compressed), the openai npm SDK, curl with its shared libraries, and the V4 tokenizer.json. Goes into
# .devbin/e2e/ next to tools/device/stage.sh's binaries; gpu_tests.sh's `e2e` suite unpacks it.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/../.."
dest=.devbin/e2e
rm -rf "$dest" && mkdir -p "$dest/lib"
cp "$(command -v node)" "$dest/node" && strip "$dest/node"  # symbols off and xz -9: the carry is size-limited
xz -T2 -9 "$dest/node"
tar cJf "$dest/node_modules.tar.xz" -C tests/node node_modules/openai
cp "$(command -v curl)" "$dest/"
ldd "$(command -v curl)" | awk '/=> \// {print $3}' | grep -vE '/(libc|libm|libdl|libpthread|librt|ld-linux[^/]*)\.so' \
    | while read -r lib; do  # (the carry is size-limited: libraries stage.sh already copied are not repeated)
        [[ -f .devbin/lib/$(basename "$lib") ]] || cp -L "$lib" "$dest/lib/"
      done
tokenizer=""
for candidate in build/{cuda,dev,release}/tokenizer/deepseek_v4/tokenizer.json; do
  if [[ -f $candidate ]]; then tokenizer=$candidate && break; fi
done
[[ -n $tokenizer ]] || { echo "stage_e2e: no generated tokenizer.json; build the dsv4 target first" >&2; exit 1; }
xz -T2 -c "$tokenizer" >"$dest/tokenizer.json.xz"
du -sh .devbin "$dest"
