#!/usr/bin/env bash
# Stages the CUDA-preset binaries and the non-system shared libraries they link into .devbin/ (carried to the device
# machine, which has the NVIDIA driver and CUDA but none of our Debian -dev libraries).
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/../.."
rm -rf .devbin && mkdir -p .devbin/lib
for bin in build/cuda/tests/ops/cuda/ops_cuda build/cuda/tests/golden/cuda/golden_cuda build/cuda/dsv4 "$@"; do
    [[ -x $bin ]] || continue
    cp "$bin" .devbin/
    strip --strip-debug ".devbin/$(basename "$bin")"  # the carry to the device is size-limited
    ldd "$bin" | awk '/=> \// {print $3}' | grep -E 'libfmt|libonig|libcrypto|libssl|libgomp|libxxhash|libcpp-httplib|libbrotli|libz\.|libcudart' \
        | xargs -r -I{} cp -L {} .devbin/lib/
done
# The V4 tokenizer for the serving benchmark (tools/device/serve_bench.sh), from whichever build generated it.
for tokenizer in build/{cuda,dev,release}/tokenizer/deepseek_v4/tokenizer.json; do
    if [[ -f $tokenizer ]]; then xz -T2 -c "$tokenizer" >.devbin/tokenizer.json.xz && break; fi
done
du -sh .devbin
