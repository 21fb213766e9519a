#!/usr/bin/env bash
# Formatting and static checks (part of scripts/test.sh, so CI runs them):
#   1. clang-format: every tracked C++/CUDA file must already be formatted by the repo's .clang-format (no drift);
#   2. clang-tidy on the C++ files this change touched (against origin/main's merge base, else the last commit),
#      with the bug-finding checks as errors; needs a compile_commands.json (the dev build's by default).
# Usage: scripts/lint.sh [build-dir]     DSV4_LINT_BASE=<rev> overrides the base of "changed".
set -euo pipefail
repo_root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
cd "$repo_root"
build_dir=${1:-build/dev}

mapfile -t sources < <(git ls-files '*.cpp' '*.h' '*.cu' '*.cuh')
drift=()
for f in "${sources[@]}"; do
    clang-format --dry-run --Werror "$f" >/dev/null 2>&1 || drift+=("$f")
done
if ((${#drift[@]})); then
    echo "lint: ${#drift[@]} file(s) drift from .clang-format (run clang-format -i on them):" >&2
    printf '  %s\n' "${drift[@]}" >&2
    exit 1
fi
echo "lint: clang-format clean (${#sources[@]} files)"

base=${DSV4_LINT_BASE:-$(git merge-base HEAD origin/main 2>/dev/null || git rev-parse HEAD~1 2>/dev/null || true)}
if [[ -z $base ]]; then
    echo "lint: no base commit to diff against; clang-tidy skipped"
    exit 0
fi
if [[ ! -f $build_dir/compile_commands.json ]]; then
    echo "lint: $build_dir/compile_commands.json missing (configure a build first)" >&2
    exit 1
fi
# Translation units in the compile database that this change touched (headers are checked through them).
mapfile -t changed < <(git diff --name-only --diff-filter=AM "$base" -- '*.cpp' | while read -r f; do
    grep -q "\"file\": \"$repo_root/$f\"" "$build_dir/compile_commands.json" && echo "$f"
done)
if ((${#changed[@]} == 0)); then
    echo "lint: no changed translation units since ${base:0:12}"
    exit 0
fi
echo "lint: clang-tidy on ${#changed[@]} changed file(s) since ${base:0:12}"
# Findings are reported only in the changed files themselves (their headers included), so old code elsewhere does not
# fail a change; the bug-finding checks below are errors, the rest of bugprone / performance warnings.
checks='-*,bugprone-*,performance-*,clang-analyzer-core.*,clang-analyzer-cplusplus.*,-bugprone-easily-swappable-parameters'
errors='bugprone-use-after-move,bugprone-dangling-handle,bugprone-undefined-memory-manipulation,bugprone-infinite-loop'
errors+=',bugprone-suspicious-*,bugprone-unused-return-value,bugprone-string-constructor,bugprone-move-forwarding-reference'
errors+=',bugprone-sizeof-*,bugprone-use-after-move,clang-analyzer-core.*,clang-analyzer-cplusplus.*'
mapfile -t changed_headers < <(git diff --name-only --diff-filter=AM "$base" -- '*.h')
filter='^$'
if ((${#changed_headers[@]})); then
    filter="($(printf '%s|' "${changed_headers[@]}" | sed 's/[.]/\\./g; s/|$//'))$"
fi
log=$(mktemp)
trap 'rm -f "$log"' EXIT
status=0
clang-tidy -p "$build_dir" --quiet --checks="$checks" --warnings-as-errors="$errors" --header-filter="$filter" \
    --extra-arg=-Wno-unknown-warning-option "${changed[@]}" >"$log" 2>&1 || status=$?
if ((status != 0)); then
    grep -v -E '^[0-9]+ warnings? (and [0-9]+ errors? )?generated\.$|^Suppressed|^Use -header-filter' "$log" || true
    echo "lint: clang-tidy found errors (above)" >&2
    exit 1
fi
echo "lint: $(grep -c 'warning:' "$log" || true) clang-tidy warning(s) (not errors; run scripts/lint.sh locally to see them)"
echo "lint: clang-tidy clean"
