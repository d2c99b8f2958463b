#!/usr/bin/env bash
# The README's "run the main job" command: installs what is needed (Debian
# 12), builds with the optimized config and runs psflow's main job.
#
# The training job (a local cluster on Fashion-MNIST) lands with the
# training issue; until then this builds every binary and validates the
# Kubeflow-style cluster configuration shipped in deploy/examples.
set -euo pipefail
cd "$(dirname "$0")/.."

bash tools/setup.sh
bazel build --config=opt //...

example=deploy/examples/tf_config_kubeflow_worker0.json
echo
echo "== psctl tfconfig check --tf_config=$example"
bazel-bin/client/psctl tfconfig check --tf_config="$example"
