#!/usr/bin/env bash
# Packs .devbin/ (tools/device/stage.sh, stage_e2e.sh, plus any extra files the caller put there) into one
# xz-compressed tarball, .devpack/devbin.tar.xz, so the test programs, dsv4 and the e2e tools fit the 64 MiB carry
# together. On the device machine: `tar xJf .devpack/devbin.tar.xz` in the repository root restores .devbin/.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/../.."
[[ -d .devbin ]] || { echo "pack: no .devbin (run tools/device/stage.sh first)" >&2; exit 1; }
rm -rf .devpack && mkdir -p .devpack
# -9: a 64 MiB dictionary spans a whole binary, so the device code that every program links (dsv4, the test programs,
# an A/B baseline) is stored once: 35 -> 15 MB for four programs.
tar cf - .devbin | xz -T2 -9 >.devpack/devbin.tar.xz
du -sh .devbin .devpack/devbin.tar.xz
