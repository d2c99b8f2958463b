#!/usr/bin/env bash
# The README's "run the main job" command: installs what is needed (Debian
# 12), builds with the optimized config and trains the default job: an MLP
# on the real Fashion-MNIST data, on a local cluster (1 parameter server,
# 2 workers with worker 0 as chief, 1 evaluator) on 127.0.0.1. Prints the
# final test accuracy and exits with the job's result.
set -euo pipefail
cd "$(dirname "$0")/.."

bash tools/setup.sh
bazel build --config=opt //...

exec bazel-bin/client/psctl/psctl local \
  --job=configs/fashion_mnist_mlp.json --ps=1 --workers=2 --evaluator \
  --dir="${PSFLOW_DIR:-/tmp/psflow-quickstart}" "$@"
