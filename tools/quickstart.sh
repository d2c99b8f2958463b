#!/usr/bin/env bash
# The README's "run the main job" command: installs what is needed (Debian
# 12), builds with the optimized config and runs psflow's main job.
#
# Until the training job lands (a local cluster on Fashion-MNIST), the main
# job is the parameter-server smoke run: it validates a Kubeflow-style
# TF_CONFIG, then starts real ps_server processes on 127.0.0.1 and pushes
# and pulls tensors through them with the client library, printing the
# throughput beside the machine's loopback-TCP and memory baselines.
set -euo pipefail
cd "$(dirname "$0")/.."

bash tools/setup.sh
bazel build --config=opt //...

example=deploy/examples/tf_config_kubeflow_worker0.json
echo
echo "== psctl tfconfig check --tf_config=$example"
bazel-bin/client/psctl tfconfig check --tf_config="$example"

echo
echo "== parameter-server smoke run (real ps_server processes)"
bazel-bin/bench/ps_bench --sizes_mb=4,40 --repeats=3 \
  --optimizer_elements=4194304
