#!/usr/bin/env bash
# The test command (README, CI): installs what is missing, then
#   host   the host build: tests on the cpu and on emulated GPUs, compile-fail tests, packaging,
#          examples run with their output checked
#   clang  the compile-fail rules again and the header checks, compiled by clang++
#   asan   the same tests under AddressSanitizer + UndefinedBehaviorSanitizer
#   tsan   the tests that use threads under ThreadSanitizer
#   fuzz   the libFuzzer targets (IDX reader, checkpoint loader) under ASan: their corpus, then a
#          minute of fuzzing each
#   cuda   the CUDA build by nvcc for sm_90: compiled, not run (CI has no GPU; scripts/gpu-check.sh
#          runs it where one is)
# Usage: scripts/test.sh [stage...]   (default: host clang asan tsan fuzz cuda; every stage but cuda runs
# without the CUDA Toolkit, against Debian's Thrust)
set -euo pipefail
cd "$(dirname "$0")/.."
stages=("$@")
((${#stages[@]})) || stages=(host clang asan tsan fuzz cuda)
scripts/install-deps.sh "${stages[@]}"
declare -a summary
for stage in "${stages[@]}"; do
  start=$(date +%s)
  echo "=== stage $stage"
  case "$stage" in
    host | clang | asan | tsan | fuzz | cuda) cmake --workflow --preset "$stage" ;;
    *) echo "unknown stage $stage" >&2; exit 2 ;;
  esac
  summary+=("$stage: $(($(date +%s) - start)) s")
done
echo "=== all stages passed"
printf '  %s\n' "${summary[@]}"
