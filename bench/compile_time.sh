#!/usr/bin/env bash
# Compile time of locus against its targets (issues 15 and 27): prints a markdown table of the CPU seconds
# (user + sys of the compiler, children included) that g++ -O2 -std=c++20 takes for
#   hello              a TU that includes <locus/locus.hpp> and prints on<cpu>(a + b * 2.f); again
#                      with LOCUS_SEPARATE_RUNTIME=1 (README: the run-time part compiled once)
#   eigen              Eigen Tensor's equivalent: Eigen::Tensor<float, 1> c = a + b * 2.f
#   data_parallel      a TU that builds train::data_parallel<sync_average, gpu<0>, gpu<1>> over the
#                      built-in mlp and calls fit; again with LOCUS_SEPARATE_RUNTIME=1
#   one_device         the same trainer over one device (data_parallel<sync_average, gpu<0>>), in
#                      the separate mode: the smallest training program, the floor of any trainer TU
#   devices_N          the data_parallel TU, header-only, over N = 1, 2 and 4 devices
#   libtorch           the same MLP program with libtorch's C++ frontend (when libtorch-dev is there)
#   runtime            the separate runtime's own file (once per program, emulated GPUs)
#   example            examples/multi_device_train.cpp; again at -O0 (the code it generates, whatever
#                      the optimiser does)
# with the flags of the host build (cmake/locusBackend.cmake): Thrust's OMP device system over the
# CUDA Toolkit's CCCL (/usr/local/cuda/include/cccl), or Debian's Thrust in /usr/include without the
# toolkit; -fopenmp; LOCUS_HAS_CBLAS, LOCUS_HAS_ZLIB; LOCUS_EMULATE_GPUS=1 (the emulated variant) for
# the TUs that name gpu<N>; MPI's include folders for the example when mpicxx is there. Each TU is
# compiled (-c) best of N times (default 3; the example once: --example-runs to change). Beside the
# seconds: the object's text in KB (`size`), which measures what was generated and, unlike the
# seconds on a shared machine, does not move with the load: compare cuts by it.
#
# Usage: bench/compile_time.sh [--runs N] [--example-runs N] [--against REV] [--tests] [--cxx g++]
#   --against REV  also compile each locus TU from git revision REV's include/ and examples/, in
#             turn with this tree's (one, then the other, N times), and print the two side by side.
#   --tests   also configure the host preset's tests and examples into a temporary build folder and
#             build them from clean with -j2 (cmake --build), reporting wall and CPU seconds.
# Run it from anywhere; it writes only to a temporary folder, removed at the end.
set -euo pipefail

root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
runs=3
example_runs=1
tests=0
against=""
cxx="${CXX:-g++}"
while (($#)); do
  case "$1" in
    --runs) runs="$2"; shift 2 ;;
    --example-runs) example_runs="$2"; shift 2 ;;
    --tests) tests=1; shift ;;
    --cxx) cxx="$2"; shift 2 ;;
    --against) against="$2"; shift 2 ;;
    -h|--help) sed -n '2,27p' "$0" | sed 's/^# \{0,1\}//'; exit 0 ;;
    *) echo "compile_time.sh: unknown option $1" >&2; exit 2 ;;
  esac
done

work="$(mktemp -d "${TMPDIR:-/tmp}/locus-compile-time.XXXXXX")"
trap 'rm -rf "$work"' EXIT
base="$work/base"
if [ -n "$against" ]; then
  git -C "$root" rev-parse --verify --quiet "$against^{commit}" > /dev/null || {
    echo "compile_time.sh: --against $against: not a commit of $root" >&2
    exit 2
  }
  mkdir -p "$base"
  git -C "$root" archive "$against" include examples | tar -x -C "$base"
fi

cuda="${CUDA_HOME:-/usr/local/cuda}"
thrust_include=()
thrust_where="Debian's Thrust (/usr/include)"
if [ -f "$cuda/include/cccl/thrust/version.h" ]; then
  thrust_include=(-I"$cuda/include/cccl")
  thrust_where="CCCL ($cuda/include/cccl)"
fi
flags=(-std=c++20 -O2 -DNDEBUG -fopenmp -I"$root/include" "${thrust_include[@]}"
       -DTHRUST_DEVICE_SYSTEM=THRUST_DEVICE_SYSTEM_OMP -DTHRUST_HOST_SYSTEM=THRUST_HOST_SYSTEM_CPP
       -DLOCUS_HAS_CBLAS=1 -DLOCUS_HAS_ZLIB=1)
mpi_flags=()
if command -v mpicxx > /dev/null 2>&1; then
  read -r -a mpi_flags <<< "$(mpicxx --showme:compile 2> /dev/null | sed "s/-I/-isystem /g" || true)"
fi

cat > "$work/hello.cpp" << 'EOF'
#include <locus/locus.hpp>
#include <cstdio>
int main() {
  locus::tensor<float, locus::cpu> a{1.f, 2.f, 3.f}, b{4.f, 5.f, 6.f};
  auto c = locus::on<locus::cpu>(a + b * 2.f);
  for (std::size_t i = 0; i < c.size(); ++i) std::printf("%g\n", double(c(i)));
}
EOF
cat > "$work/eigen.cpp" << 'EOF'
#include <unsupported/Eigen/CXX11/Tensor>
#include <cstdio>
int main() {
  Eigen::Tensor<float, 1> a(3), b(3);
  a.setValues({1.f, 2.f, 3.f});
  b.setValues({4.f, 5.f, 6.f});
  Eigen::Tensor<float, 1> c = a + b * 2.f;
  for (Eigen::Index i = 0; i < c.size(); ++i) std::printf("%g\n", double(c(i)));
}
EOF
cat > "$work/data_parallel.cpp" << 'EOF'
#include <locus/train/data_parallel.hpp>
#include <locus/train/mlp.hpp>
#include <cstdio>
int main() {
  using namespace locus;
  train::mlp<float> model({784, 256, 10}, 1);
  train::data_parallel<train::sync_average, gpu<0>, gpu<1>> trainer{model, train::sgd{0.1f, 0.9f}};
  train::fit_options o;
  o.max_steps = 1;
  const auto data = data::fashion_mnist::load_train("");
  std::printf("%zu steps\n", trainer.fit(data, o).curve.size());
}
EOF

# one_compile TAG src flags...: compiles src to an object once; appends the compiler's CPU seconds
# (user + sys) to $work/TAG.cpu and writes the object's text size in KB to $work/TAG.text.
one_compile() {
  local tag="$1" src="$2"
  shift 2
  /usr/bin/time -f '%U %S' -o "$work/time" "$cxx" "$@" -c "$src" -o "$work/out.o" 2> "$work/err" || {
    echo "compile_time.sh: $cxx failed on $src:" >&2
    head -30 "$work/err" >&2
    return 1
  }
  awk '{printf "%.2f\n", $1 + $2}' "$work/time" >> "$work/$tag.cpu"
  size "$work/out.o" | awk 'NR == 2 {printf "%.1f", $1 / 1000}' > "$work/$tag.text"
}
# measure TAG N src flags...: N compiles of this tree's TU and, with --against, N of the baseline's
# (the same TU from the exported revision: this tree's path under $root becomes $base), one after
# the other, so that both see the same load.
measure() {
  local tag="$1" n="$2" src="$3"
  shift 3
  for ((i = 0; i < n; ++i)); do
    one_compile "$tag" "$src" "$@"
    if [ -n "$against" ]; then one_compile "$tag.base" "${src/#"$root"/$base}" "${@//"$root"/$base}"; fi
  done
}
best() { if [ -f "$work/$1.cpu" ]; then sort -n "$work/$1.cpu" | head -1; else echo "n/a"; fi; }
text() { cat "$work/$1.text" 2> /dev/null || echo "n/a"; }

measure hello "$runs" "$work/hello.cpp" "${flags[@]}"
if [ -f /usr/include/eigen3/unsupported/Eigen/CXX11/Tensor ]; then
  against="" measure eigen "$runs" "$work/eigen.cpp" -std=c++20 -O2 -DNDEBUG -fopenmp -I/usr/include/eigen3
fi
measure hello_separate "$runs" "$work/hello.cpp" "${flags[@]}" -DLOCUS_SEPARATE_RUNTIME=1
measure data_parallel "$runs" "$work/data_parallel.cpp" "${flags[@]}" -DLOCUS_EMULATE_GPUS=1
measure data_parallel_separate "$runs" "$work/data_parallel.cpp" "${flags[@]}" -DLOCUS_EMULATE_GPUS=1 \
        -DLOCUS_SEPARATE_RUNTIME=1
sed 's/gpu<0>, gpu<1>>/gpu<0>>/' "$work/data_parallel.cpp" > "$work/one_device.cpp"
measure one_device "$runs" "$work/one_device.cpp" "${flags[@]}" -DLOCUS_EMULATE_GPUS=1 -DLOCUS_SEPARATE_RUNTIME=1
# The same trainer, header-only, over 1, 2 and 4 devices: what one more device costs a TU.
for n in 1 2 4; do
  list="gpu<0>"
  for ((k = 1; k < n; ++k)); do list="$list, gpu<$k>"; done
  sed "s/gpu<0>, gpu<1>>/$list>/" "$work/data_parallel.cpp" > "$work/devices_$n.cpp"
  measure "devices_$n" "$runs" "$work/devices_$n.cpp" "${flags[@]}" -DLOCUS_EMULATE_GPUS=1
done
# The same MLP program written with libtorch's C++ frontend (Debian's libtorch-dev), when present.
torch_flags=()
if [ -f /usr/include/torch/csrc/api/include/torch/torch.h ]; then
  torch_flags=(-std=c++17 -O2 -DNDEBUG -I/usr/include/torch/csrc/api/include)
  cat > "$work/libtorch.cpp" << 'EOF2'
#include <torch/torch.h>
#include <cstdio>
struct net : torch::nn::Module {
  net() : fc1(register_module("fc1", torch::nn::Linear(784, 256))), fc2(register_module("fc2", torch::nn::Linear(256, 10))) {}
  torch::Tensor forward(torch::Tensor x) { return fc2(torch::relu(fc1(x.view({-1, 784})))); }
  torch::nn::Linear fc1, fc2;
};
int main() {
  auto model = std::make_shared<net>();
  torch::optim::SGD opt(model->parameters(), torch::optim::SGDOptions(0.1).momentum(0.9));
  auto data = torch::data::datasets::MNIST("/usr/share/datasets/fashion-mnist").map(torch::data::transforms::Stack<>());
  auto loader = torch::data::make_data_loader(std::move(data), 256);
  for (auto& batch : *loader) {
    opt.zero_grad();
    auto loss = torch::nn::functional::cross_entropy(model->forward(batch.data), batch.target);
    loss.backward();
    opt.step();
    std::printf("%f\n", loss.item<float>());
    break;
  }
}
EOF2
  against="" measure libtorch "$runs" "$work/libtorch.cpp" "${torch_flags[@]}"
fi
printf '#define LOCUS_RUNTIME_IMPLEMENTATION\n#include <locus/runtime.hpp>\n' > "$work/runtime.cpp"
against="" measure runtime 1 "$work/runtime.cpp" "${flags[@]}" -DLOCUS_EMULATE_GPUS=1 -DLOCUS_SEPARATE_RUNTIME=1
measure example "$example_runs" "$root/examples/multi_device_train.cpp" "${flags[@]}" -DLOCUS_EMULATE_GPUS=1 \
        -I"$root/examples" "${mpi_flags[@]}"
against="" measure example_O0 1 "$root/examples/multi_device_train.cpp" "${flags[@]}" -DLOCUS_EMULATE_GPUS=1 \
        -I"$root/examples" "${mpi_flags[@]}" -O0

ratio() { awk -v a="$1" -v b="$2" 'BEGIN{ if (a == "n/a" || b == "n/a" || b == 0) print "n/a"; else printf "%.2f", a / b }'; }
verdict() { awk -v a="$1" -v t="$2" 'BEGIN{ if (a == "n/a") print "n/a"; else print (a <= t ? "met" : "not met") }'; }
hello_ratio="$(ratio "$(best hello)" "$(best eigen)")"
separate_ratio="$(ratio "$(best hello_separate)" "$(best eigen)")"

echo "$("$cxx" --version | head -1), $(nproc) cores; Thrust: $thrust_where; MPI: ${mpi_flags[*]:-none}"
echo "flags: ${flags[*]//"$root"/.}"
echo
echo "| TU | CPU s | ratio | target | | object text KB |"
echo "| --- | ---: | ---: | --- | --- | ---: |"
echo "| hello: \`on<cpu>(a + b * 2.f)\` (best of $runs) | $(best hello) | $hello_ratio x Eigen | <= 1.5x Eigen | $(verdict "$hello_ratio" 1.5) | $(text hello) |"
echo "| hello, \`LOCUS_SEPARATE_RUNTIME=1\` (the run-time part compiled elsewhere, once) | $(best hello_separate) | $separate_ratio x Eigen | <= 1.25x Eigen | $(verdict "$separate_ratio" 1.25) | $(text hello_separate) |"
echo "| Eigen Tensor: \`c = a + b * 2.f\` (best of $runs) | $(best eigen) | 1.00 | | | $(text eigen) |"
echo "| one \`data_parallel<sync_average, gpu<0>, gpu<1>>\` + fit (best of $runs) | $(best data_parallel) | | | | $(text data_parallel) |"
echo "| the same, \`LOCUS_SEPARATE_RUNTIME=1\` | $(best data_parallel_separate) | | | | $(text data_parallel_separate) |"
echo "| one \`data_parallel<sync_average, gpu<0>>\` + fit, \`LOCUS_SEPARATE_RUNTIME=1\` (one device: the floor of a trainer TU) | $(best one_device) | | | | $(text one_device) |"
for n in 1 2 4; do
  r="$(ratio "$(best "devices_$n")" "$(best devices_1)")"
  t="$(ratio "$(text "devices_$n")" "$(text devices_1)")"
  if ((n == 4)); then target="<= 1.10x one device"; v="$(verdict "$r" 1.10)"; else target=""; v=""; fi
  echo "| the same header-only over $n device$( ((n > 1)) && echo s) (\`gpu<0>\`..\`gpu<$((n - 1))>\`) | $(best "devices_$n") | $r x one device (text $t x) | $target | $v | $(text "devices_$n") |"
done
if ((${#torch_flags[@]})); then
  echo "| the same MLP with libtorch's C++ frontend (\`#include <torch/torch.h>\`, Debian's libtorch-dev) | $(best libtorch) | | | | $(text libtorch) |"
  echo "| two-device trainer TU / libtorch's | $(ratio "$(best devices_2)" "$(best libtorch)") | | <= 0.5 | $(verdict "$(ratio "$(best devices_2)" "$(best libtorch)")" 0.5) | |"
else
  echo "| libtorch's MLP: not measured (no libtorch-dev) | | | | | |"
fi
echo "| the separate runtime's own file (\`#include <locus/runtime.hpp>\`, once per program) | $(best runtime) | | | | $(text runtime) |"
echo "| examples/multi_device_train.cpp (best of $example_runs) | $(best example) | | <= 20 s | $(verdict "$(best example)" 20) | $(text example) |"
echo "| its text (issue 27: <= 0.4x of 1293 KB) | | | <= 517 KB | $(verdict "$(text example)" 517) | |"
echo "| the same at -O0 (once) | $(best example_O0) | | | | $(text example_O0) |"
if [ -n "$against" ]; then
  echo
  echo "Against $against ($(git -C "$root" rev-parse --short "$against")), compiled in turn with this tree's TUs:"
  echo
  echo "| TU | CPU s, $against | CPU s, this tree | ratio | text KB, $against | text KB, this tree | ratio |"
  echo "| --- | ---: | ---: | ---: | ---: | ---: | ---: |"
  for tag in hello hello_separate data_parallel data_parallel_separate one_device devices_1 devices_2 devices_4 example; do
    echo "| $tag | $(best "$tag.base") | $(best "$tag") | $(ratio "$(best "$tag")" "$(best "$tag.base")") | $(text "$tag.base") | $(text "$tag") | $(ratio "$(text "$tag")" "$(text "$tag.base")") |"
  done
fi

if ((tests)); then
  build="$work/build"
  cmake -S "$root" -B "$build" -G Ninja -DCMAKE_BUILD_TYPE=Release -DLOCUS_BUILD_TESTS=ON \
        -DLOCUS_BUILD_EXAMPLES=ON -DLOCUS_TEST_VARIANTS="host;emulated" -DLOCUS_BUILD_BENCHMARKS=ON \
        -DLOCUS_INSTALL=ON > "$work/configure.log" 2>&1 || { tail -30 "$work/configure.log" >&2; exit 1; }
  /usr/bin/time -f '%e %U %S' -o "$work/time" cmake --build "$build" -j2 > "$work/build.log" 2>&1 || {
    tail -30 "$work/build.log" >&2
    exit 1
  }
  read -r wall user sys < "$work/time"
  targets="$(grep -c '^\[' "$work/build.log" || true)"
  echo "| tests, examples and benchmarks of the host preset from clean, -j2 ($targets build steps) | $(awk -v u="$user" -v s="$sys" 'BEGIN{printf "%.0f", u + s}') CPU, $(printf '%.0f' "$wall") wall | | | | |"
fi
