#!/usr/bin/env bash
# The main job's epoch on a quiet machine and with one CPU-bound process per core beside it
# (`yes > /dev/null`, started and killed here), side by side in one run: the ratio is what a user
# of a shared machine sees (issue 31; a fair share of a machine busy with one other job is ~2x).
#
#   bench/load.sh [EXAMPLE] [--reps N] [--mpi] [--torch PROGRAM]
#
# EXAMPLE: the built multi_device_train (default build/host/examples/example_multi_device_train).
# Each row: sync on 1 and 2 emulated GPUs, hogwild on 2 (one epoch, 234 steps of 256), the median
# of N runs (default 3) quiet and loaded. --mpi adds `mpirun -np 2` of sync on one device per rank
# against the one-process, two-device epoch, both quiet. --torch adds the same MLP written with
# libtorch (bench/mlp_libtorch.cpp, built by hand: see its top), quiet and loaded, on the same run.
set -euo pipefail
cd "$(dirname "$0")/.."
example=build/host/examples/example_multi_device_train
reps=3
mpi=0
torch=""
while [[ $# -gt 0 ]]; do
  case "$1" in
    --reps) reps="$2"; shift 2 ;;
    --mpi) mpi=1; shift ;;
    --torch) torch="$2"; shift 2 ;;
    *) example="$1"; shift ;;
  esac
done
[[ -x "$example" ]] || { echo "load.sh: $example is not built" >&2; exit 2; }
cores=$(nproc)
hogs=()
stop_load() { for p in "${hogs[@]}"; do kill "$p" 2>/dev/null || true; done; hogs=(); }
trap stop_load EXIT
start_load() { for ((i = 0; i < cores; ++i)); do yes > /dev/null & hogs+=($!); done; sleep 0.5; }

# seconds of one run's training ("trained N steps in X s")
epoch() { "$@" 2>&1 | sed -n 's/.*trained [0-9]* steps in \([0-9.]*\) s.*/\1/p' | head -1; }
median() { sort -g | awk '{v[NR] = $1} END {print (NR % 2) ? v[(NR + 1) / 2] : (v[NR / 2] + v[NR / 2 + 1]) / 2}'; }
measure() {  # quiet/loaded medians for one command
  local q=() l=()
  for ((r = 0; r < reps; ++r)); do
    q+=("$(epoch "$@")")
    start_load; l+=("$(epoch "$@")"); stop_load
  done
  printf '%s\n' "${q[@]}" | median
  printf '%s\n' "${l[@]}" | median
}

"$example" --help > /dev/null 2>&1 || true
echo "host: $cores cores; $("$example" --policy sync --devices 1 --max-steps 1 2>&1 | grep '^host kernels' || echo 'host kernels: ?')"
printf '%-28s %10s %10s %8s\n' "run (one epoch)" "quiet s" "loaded s" "ratio"
for row in "sync 1" "sync 2" "hogwild 2"; do
  set -- $row
  read -r quiet loaded < <(measure "$example" --policy "$1" --devices "$2" --epochs 1 | paste -sd' ')
  printf '%-28s %10.2f %10.2f %7.1fx\n' "$1 on $2 device(s)" "$quiet" "$loaded" "$(echo "$loaded / $quiet" | bc -l)"
done
if [[ -n $torch ]]; then
  # libtorch reads the IDX files uncompressed: Debian's are gzipped.
  idx=$(mktemp -d)
  for f in train-images-idx3-ubyte train-labels-idx1-ubyte; do
    gunzip -c "/usr/share/datasets/fashion-mnist/$f.gz" > "$idx/$f"
  done
  read -r quiet loaded < <(measure "$torch" "$idx" | paste -sd' ')
  printf '%-28s %10.2f %10.2f %7.1fx\n' "libtorch, same MLP" "$quiet" "$loaded" "$(echo "$loaded / $quiet" | bc -l)"
  rm -rf "$idx"
fi
if [[ $mpi == 1 ]] && command -v mpirun > /dev/null; then
  export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
  one=() two=()
  for ((r = 0; r < reps; ++r)); do
    one+=("$(epoch "$example" --policy sync --devices 2 --epochs 1)")
    two+=("$(epoch mpirun -n 2 --oversubscribe "$example" --policy sync --devices 1 --epochs 1)")
  done
  a=$(printf '%s\n' "${one[@]}" | median); b=$(printf '%s\n' "${two[@]}" | median)
  printf '%-28s %10s %10s %8s\n' "run (one epoch, quiet)" "1 proc s" "mpirun s" "ratio"
  printf '%-28s %10.2f %10.2f %7.2fx\n' "mpirun -np 2 vs 2 devices" "$a" "$b" "$(echo "$b / $a" | bc -l)"
fi
