#!/usr/bin/env bash
# Builds the libFuzzer targets with clang in <build>/fuzz-smoke and runs each for a few seconds
# on its seed corpus (ctest label `fuzz` of that build), so the fuzzers of every parser of
# outside input keep building and a shallow crash fails the suite.
# Usage: fuzz_smoke.sh <source dir> <build dir>
set -euo pipefail
src="${1:?source dir}"
build="${2:?build dir}/fuzz-smoke"
command -v clang++ >/dev/null || { echo "fuzz_smoke: clang++ missing (run scripts/setup)" >&2; exit 1; }
cmake -S "$src" -B "$build" -G Ninja -DCMAKE_BUILD_TYPE=Debug -DCMAKE_CXX_COMPILER=clang++ \
  -DCMAKE_C_COMPILER=clang -DEXPANSE_BUILD_FUZZ=ON -DEXPANSE_BUILD_TESTS=OFF >/dev/null
# One job: this runs beside the rest of the suite, which already uses the other core.
cmake --build "$build" -j1
ctest --test-dir "$build" -L fuzz --output-on-failure
