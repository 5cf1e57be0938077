#!/usr/bin/env bash
# For a machine with an NVIDIA GPU: builds the CUDA configuration, runs every test and example on
# the real GPU(s) (two logical GPUs per card where there are fewer than two), runs the GPU
# benchmarks when they are built, and prints a short table. Meant to finish within 8 minutes on an
# H100-class machine with 16 cores.
set -uo pipefail
cd "$(dirname "$0")/.."
start=$(date +%s)
jobs=$(nproc)
build=build/gpu-check
nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv,noheader 2>/dev/null || echo "nvidia-smi: none"
cmake -S . -B "$build" -G Ninja -DCMAKE_BUILD_TYPE=Release -DLOCUS_ENABLE_CUDA=ON -DCMAKE_CUDA_ARCHITECTURES=native \
      -DLOCUS_RUN_GPU_TESTS=ON -DLOCUS_BUILD_BENCHMARKS=ON -DCMAKE_CUDA_COMPILER=/usr/local/cuda/bin/nvcc >"$build.configure.log" 2>&1 \
  || { tail -30 "$build.configure.log"; exit 1; }
t0=$(date +%s)
cmake --build "$build" -j "$jobs" >"$build.build.log" 2>&1 || { grep -m20 -E "error" "$build.build.log"; exit 1; }
t1=$(date +%s)
(cd "$build" && ctest -j 4 --output-on-failure --timeout 300) >"$build.test.log" 2>&1
test_rc=$?
t2=$(date +%s)
bench_rc=0
: >"$build.bench.log"
for b in "$build"/bench/bench_*; do
  [ -x "$b" ] || continue
  LOCUS_LOGICAL_GPUS=2 "$b" >>"$build.bench.log" 2>&1 || bench_rc=$?
done
t3=$(date +%s)
# compute-sanitizer (memcheck, racecheck) over the CUDA tests of the GPU code paths.
sanitizer=/usr/local/cuda/bin/compute-sanitizer
san_rc=0
: >"$build.sanitizer.log"
if [ -x "$sanitizer" ] && [ -x "$build/tests/locus_tests_cuda" ]; then
  for tool in memcheck racecheck; do
    LOCUS_LOGICAL_GPUS=2 timeout 240 "$sanitizer" --tool "$tool" --error-exitcode 3 \
      "$build/tests/locus_tests_cuda" "[expr],[reduce],[matmul],[nn]" >>"$build.sanitizer.log" 2>&1 || san_rc=$?
    echo "compute-sanitizer $tool: rc=$san_rc" >>"$build.sanitizer.log"
  done
fi
t4=$(date +%s)
echo
echo "| step | result | seconds |"
echo "| --- | --- | --- |"
echo "| build (nvcc, native arch) | ok | $((t1 - t0)) |"
echo "| ctest on the GPU | $(grep -E 'tests passed' "$build.test.log" | tail -1) | $((t2 - t1)) |"
echo "| benchmarks | rc=$bench_rc | $((t3 - t2)) |"
echo "| compute-sanitizer memcheck + racecheck | rc=$san_rc | $((t4 - t3)) |"
echo "| total | | $((t4 - start)) |"
grep -E "Failed|\*\*\*" "$build.test.log" | head -20
echo
cat "$build.bench.log"
tail -5 "$build.sanitizer.log"
exit $((test_rc != 0 || bench_rc != 0 || san_rc != 0))
