#!/usr/bin/env bash
# The GPU check, in two halves so that the GPU machine's short lease is spent on running, not compiling:
#
#   scripts/gpu-check.sh prepare        on any machine with nvcc (no GPU needed): builds the CUDA
#                                       configuration for sm_90 (H100/H200) in build/gpu, saves its test
#                                       list (ctest JSON), and packs binaries, the shared libraries they
#                                       need beyond glibc and the CUDA driver/cuBLAS (compressed), and Fashion-MNIST
#                                       into .gpu-bundle/ (git-ignored; carry it to the GPU machine)
#   scripts/gpu-check.sh [stage...]     on the GPU machine: unpacks .gpu-bundle/ (or, without one, builds
#                                       there with -j $(nproc)), then runs the stages and prints a table:
#       tests      every test case and example of the CUDA build, on the GPU (two logical GPUs per card
#                  where there are fewer than two), in parallel, examples alone
#       bench      bench/bench_gpu: bandwidth, matmul against cuBLAS, NCCL all-reduce (correctness, busbw), MLP epochs
#       torch      bench/mlp_torch_gpu.py: the same MLP recipe in PyTorch on the GPU (if torch is there)
#       sanitizer  compute-sanitizer memcheck and racecheck over the GPU tests of expr/reduce/matmul/nn
#   (default: tests bench torch sanitizer). Logs go to $OUT (the device tool's folder) or build/gpu-out.
#   Meant to finish within 8 minutes on a 16-core H100/H200 machine with the bundle.
set -uo pipefail
cd "$(dirname "$0")/.."
root=$(pwd)
build=build/gpu
bundle=.gpu-bundle

if [ "${1:-}" = "prepare" ]; then
  set -e
  cmake -S . -B "$build" -G Ninja -DCMAKE_BUILD_TYPE=Release -DLOCUS_ENABLE_CUDA=ON -DCMAKE_CUDA_ARCHITECTURES=90 \
        -DLOCUS_RUN_GPU_TESTS=ON -DLOCUS_BUILD_BENCHMARKS=ON -DLOCUS_WITH_MPI=OFF \
        -DCMAKE_CUDA_COMPILER=/usr/local/cuda/bin/nvcc >/dev/null
  nice cmake --build "$build" -j "$(nproc)"
  (cd "$build" && ctest --show-only=json-v1) >"$build/tests.json"
  rm -rf "$bundle" "$build/lib" && mkdir -p "$build/lib" "$bundle/data"
  bins=("$build"/tests/locus_tests_cuda "$build"/examples/example_* "$build"/bench/bench_gpu)
  # Shared libraries beyond glibc, the CUDA driver, cuBLAS and NCCL (218 MB: the GPU machine has its
  # own, from the toolkit or PyTorch's nvidia-nccl wheel).
  ldd "${bins[@]}" | awk '/=> \//{print $3}' | sort -u |
    grep -vE '/(libc|libm|libdl|libpthread|librt|ld-linux[^/]*|libcuda|libcublas[^/]*|libnccl)\.so' |
    while read -r lib; do cp -L "$lib" "$build/lib/"; done
  cp -L "$(data_dir=${LOCUS_FASHION_MNIST_DIR:-/usr/share/datasets/fashion-mnist}; echo "$data_dir")"/*.gz "$bundle/data/"
  XZ_OPT=-T0 tar -cJf "$bundle/build.tar.xz" "${bins[@]}" "$build/tests.json" "$build/lib"
  { echo "root=$root"; echo "cmake=$(command -v cmake)"; echo "commit=$(git rev-parse HEAD)$(git diff --quiet HEAD || echo +changes)"; } >"$bundle/origin"
  du -sh "$bundle"/* && ls "$build/lib"
  exit 0
fi

stages=("$@")
((${#stages[@]})) || stages=(tests bench torch sanitizer)
out=${OUT:-$build-out}
mkdir -p "$out"
summary="$out/summary.md"
: >"$summary"
row() { echo "| $1 | $2 | $3 |" | tee -a "$summary"; }
start=$(date +%s)
echo "GPU check of locus $(cat $bundle/origin 2>/dev/null | sed -n 's/^commit=//p') on $(hostname), $(date -u +%F)" | tee -a "$summary"
nvidia-smi --query-gpu=name,memory.total,driver_version,clocks.max.sm --format=csv,noheader 2>&1 | tee -a "$summary"
echo "| step | result | seconds |" | tee -a "$summary"
echo "| --- | --- | --- |" | tee -a "$summary"

t0=$(date +%s)
orig_ld=${LD_LIBRARY_PATH:-}
if [ -f "$bundle/build.tar.xz" ]; then
  tar -xJf "$bundle/build.tar.xz"
  from_root=$(sed -n 's/^root=//p' "$bundle/origin")
  from_cmake=$(sed -n 's/^cmake=//p' "$bundle/origin")
  export LOCUS_FASHION_MNIST_DIR="$root/$bundle/data"
  libs="$root/$build/lib"
  for d in /usr/local/cuda/lib64 /usr/local/cuda/targets/x86_64-linux/lib \
           $(python3 -c 'import nvidia.cublas, os; print(os.path.join(list(nvidia.cublas.__path__)[0], "lib"))' 2>/dev/null) \
           $(python3 -c 'import nvidia.nccl, os; print(os.path.join(list(nvidia.nccl.__path__)[0], "lib"))' 2>/dev/null); do
    [ -d "$d" ] && libs="$libs:$d"
  done
  have_nccl=0
  IFS=: read -ra dirs <<<"$libs"
  for d in "${dirs[@]}"; do ls "$d"/libnccl.so.2* >/dev/null 2>&1 && have_nccl=1; done
  if ((have_nccl == 0)); then
    found=$(find / -xdev -name 'libnccl.so.2*' -not -path '/proc/*' 2>/dev/null | head -1)
    [ -n "$found" ] && libs="$libs:$(dirname "$found")"
  fi
  have_cublas=0
  IFS=: read -ra dirs <<<"$libs"
  for d in "${dirs[@]}"; do ls "$d"/libcublas.so.* >/dev/null 2>&1 && have_cublas=1; done
  if ((have_cublas == 0)); then  # cuBLAS elsewhere: look for it
    found=$(find / -xdev -name 'libcublas.so.13*' -not -path '/proc/*' 2>/dev/null | head -1)
    [ -n "$found" ] && libs="$libs:$(dirname "$found")"
  fi
  export LD_LIBRARY_PATH="$libs${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
  missing=$(ldd "$build"/tests/locus_tests_cuda "$build"/bench/bench_gpu | grep "not found" | sort -u)
  row "unpack the prepared build (sm_90)" "${missing:-ok}" $(($(date +%s) - t0))
else
  from_root=$root
  from_cmake=$(command -v cmake)
  cmake -S . -B "$build" -G Ninja -DCMAKE_BUILD_TYPE=Release -DLOCUS_ENABLE_CUDA=ON -DCMAKE_CUDA_ARCHITECTURES=90 \
        -DLOCUS_RUN_GPU_TESTS=ON -DLOCUS_BUILD_BENCHMARKS=ON -DLOCUS_WITH_MPI=OFF \
        -DCMAKE_CUDA_COMPILER=/usr/local/cuda/bin/nvcc >"$out/configure.log" 2>&1 || { tail -30 "$out/configure.log"; exit 1; }
  cmake --build "$build" -j "$(nproc)" >"$out/build.log" 2>&1 || { grep -m20 -E "error" "$out/build.log"; exit 1; }
  (cd "$build" && ctest --show-only=json-v1) >"$build/tests.json"
  row "build (nvcc, sm_90)" ok $(($(date +%s) - t0))
fi

status=0
for stage in "${stages[@]}"; do
  t0=$(date +%s)
  case "$stage" in
    tests)
      timeout 300 python3 scripts/gpu-run-tests.py "$build/tests.json" --from-root "$from_root" --to-root "$root" \
        --from-cmake "$from_cmake" -j "$(nproc)" --deadline 200 --log "$out/tests.log" >"$out/tests.txt" 2>&1 || status=1
      cat "$out/tests.txt"
      row "tests and examples on the GPU" "$(tail -1 "$out/tests.txt")" $(($(date +%s) - t0)) ;;
    bench)
      timeout 150 "$build/bench/bench_gpu" 5 >"$out/bench.txt" 2>&1; rc=$?
      ((rc == 0)) || status=1
      row "bench_gpu" "rc=$rc" $(($(date +%s) - t0)) ;;
    torch)
      # The machine's own libraries for python (the bundle's libstdc++ may be older than torch's).
      LD_LIBRARY_PATH=$orig_ld PYTHONUNBUFFERED=1 timeout 120 python3 bench/mlp_torch_gpu.py 5 >"$out/torch.txt" 2>&1; rc=$?
      row "PyTorch peer (mlp_torch_gpu.py)" "rc=$rc: $(tail -1 "$out/torch.txt")" $(($(date +%s) - t0)) ;;
    sanitizer)
      san=$(command -v compute-sanitizer || echo /usr/local/cuda/bin/compute-sanitizer)
      for tool in memcheck racecheck; do
        LOCUS_LOGICAL_GPUS=2 LOCUS_LOG_DEVICE_PLACEMENT=0 timeout 170 "$san" --tool "$tool" --error-exitcode 3 \
          "$build/tests/locus_tests_cuda" "[expr],[reduce],[matmul],[nn]" >"$out/sanitizer-$tool.txt" 2>&1 &
      done
      wait
      for tool in memcheck racecheck; do
        verdict=$(grep -E "ERROR SUMMARY|RACECHECK SUMMARY|test cases" "$out/sanitizer-$tool.txt" | tail -2 | tr '\n' ' ')
        row "compute-sanitizer $tool" "${verdict:-no summary (timed out?)}" $(($(date +%s) - t0))
        grep -qE "ERROR SUMMARY: [1-9]|RACECHECK SUMMARY: [1-9]" "$out/sanitizer-$tool.txt" && status=1
      done ;;
    *) echo "unknown stage $stage" >&2; exit 2 ;;
  esac
done
row total "" $(($(date +%s) - start))
for f in bench.txt torch.txt; do [ -f "$out/$f" ] && { echo; cat "$out/$f"; } | tee -a "$summary"; done
exit $status
