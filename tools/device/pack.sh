#!/usr/bin/env bash
# Packs .devbin/ (tools/device/stage.sh, stage_e2e.sh, plus any extra files the caller put there) into one
# xz-compressed tarball, .devpack/devbin.tar.xz, so the test programs, dsv4 and the e2e tools fit the 64 MiB carry
# together. On the device machine: `tar xJf .devpack/devbin.tar.xz` in the repository root restores .devbin/.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/../.."
[[ -d .devbin ]] || { echo "pack: no .devbin (run tools/device/stage.sh first)" >&2; exit 1; }
rm -rf .devpack && mkdir -p .devpack
tar cf - .devbin | xz -T2 -6 >.devpack/devbin.tar.xz
du -sh .devbin .devpack/devbin.tar.xz
