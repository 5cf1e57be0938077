#!/usr/bin/env bash
# The main job: builds and runs the placement example on emulated GPUs (no GPU needed).
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/install-deps.sh
cmake --preset host >/dev/null
cmake --build --preset host --target example_placement
exec build/host/examples/example_placement "$@"
