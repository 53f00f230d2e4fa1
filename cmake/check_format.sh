#!/usr/bin/env bash
# Lists the project's C++ files whose formatting differs from .clang-format and
# exits 1 if there are any. Run from anywhere inside the source tree; ctest runs it
# as the "clang_format" test (label lint).
#
# Exit status: 0 all formatted, 1 some files need clang-format, 2 clang-format is
# not installed.
# Set CLANG_FORMAT to pick a binary; by default clang-format-14 (the version the
# CI pins, since versions disagree on details) and then plain clang-format.
set -euo pipefail

cd "$(dirname "${BASH_SOURCE[0]}")/.."

clang_format="${CLANG_FORMAT:-}"
if [[ -z "$clang_format" ]]; then
  for candidate in clang-format-14 clang-format; do
    if command -v "$candidate" >/dev/null 2>&1; then
      clang_format="$candidate"
      break
    fi
  done
fi
if [[ -z "$clang_format" ]]; then
  echo "check_format: clang-format not found (install clang-format-14 or set CLANG_FORMAT)" >&2
  exit 2
fi

dirs=(src cmd fuzz bench tests)
files=()
if git rev-parse --is-inside-work-tree >/dev/null 2>&1; then
  # Tracked files plus new files not yet added, minus ignored ones (build dirs).
  while IFS= read -r -d '' file; do
    # ls-files still lists tracked files deleted from the working tree.
    [[ -f "$file" ]] && files+=("$file")
  done < <(git ls-files -z -co --exclude-standard -- \
    ':(glob)src/**/*.cc' ':(glob)src/**/*.h' ':(glob)cmd/**/*.cc' ':(glob)cmd/**/*.h' \
    ':(glob)fuzz/**/*.cc' ':(glob)fuzz/**/*.h' ':(glob)bench/**/*.cc' ':(glob)bench/**/*.h' \
    ':(glob)tests/**/*.cc' ':(glob)tests/**/*.h')
else
  existing=()
  for dir in "${dirs[@]}"; do
    [[ -d "$dir" ]] && existing+=("$dir")
  done
  if ((${#existing[@]} > 0)); then
    while IFS= read -r -d '' file; do
      files+=("$file")
    done < <(find "${existing[@]}" -type f \( -name '*.cc' -o -name '*.h' \) -print0)
  fi
fi

# Many files per clang-format run and one run per core: starting clang-format once per file
# was most of the check's time. --dry-run -Werror names every file that differs as
# "<file>:<line>:<col>: error: code should be clang-formatted".
jobs="$(nproc 2>/dev/null || echo 2)"
set +e
output="$(printf '%s\0' "${files[@]}" |
  xargs -0 -r -n 64 -P "$jobs" "$clang_format" --dry-run -Werror 2>&1 >/dev/null)"
status=$?
set -e
mapfile -t needing < <(sed -n 's/^\(.*\):[0-9]*:[0-9]*: error: code should be clang-formatted.*/\1/p' \
  <<<"$output" | sort -u)
if ((status != 0 && ${#needing[@]} == 0)); then
  # clang-format failed otherwise (a file it cannot read, a bad .clang-format): say so.
  echo "check_format: $clang_format failed (status $status):" >&2
  echo "$output" | head -n 20 >&2
  exit 1
fi
for file in "${needing[@]}"; do
  echo "needs clang-format: $file"
done
unformatted=${#needing[@]}

if ((unformatted > 0)); then
  echo "check_format: $unformatted of ${#files[@]} files need formatting; fix with:" >&2
  echo "  $clang_format -i <file>..." >&2
  exit 1
fi
echo "check_format: ${#files[@]} files formatted ($("$clang_format" --version | head -n 1))"
