#!/usr/bin/env bash
# The main job: trains the 784-256-10 MLP on Fashion-MNIST over two emulated GPUs with synchronous
# averaging, prints where one training step runs (the placement log), the progress and the test
# accuracy. Arguments go to the example (e.g. --policy hogwild --devices 4 --epochs 5).
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/install-deps.sh host
cmake --preset host >/dev/null
cmake --build --preset host --target example_multi_device_train
args=("$@")
((${#args[@]})) || args=(--policy sync --devices 2 --epochs 1 --log-device-placement)
exec build/host/examples/example_multi_device_train "${args[@]}"
