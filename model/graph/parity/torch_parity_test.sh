#!/usr/bin/env bash
# PyTorch parity of the model zoo (issue 34). For each config (the zoo's,
# and testdata/graph_options.json for the options the zoo does not use),
# psflow trains the config's model.graph, exactly as shipped, for 3 SGD
# steps on random batches of 16 examples (graph_step_dump), and the PyTorch
# twin (torch_twin.py) replays them from the same initial values and rows:
# parity_check.py compares every loss, probability and gradient and fails
# naming what differs beyond float32 rounding. Both twins run: float64 (the
# reference the bounds are derived for) and float32.
#
#   torch_parity_test.sh <graph_step_dump> <parity_check.py> <config>...
#
# Without PyTorch for Debian's /usr/bin/python3 (python3-torch; tools/setup.sh
# installs it) the dumps are still written, then the test prints SKIPPED and
# passes, as the tree's other tests of optional peers do.
set -euo pipefail
dump="$1"
check="$2"
shift 2

out="${TEST_TMPDIR:-$(mktemp -d)}/parity"
mkdir -p "$out"
manifests=()
for config in "$@"; do
  name="$(basename "$config" .json)"
  "$dump" --job="$config" --out="$out/$name.json"
  manifests+=("$out/$name.json")
done

# Debian's interpreter, not a python3 found first on PATH (a pyenv, say):
# Debian's torch is installed for it.
python=/usr/bin/python3
if ! "$python" -c "import torch" 2>/dev/null; then
  echo "SKIPPED: PyTorch parity: $python cannot import torch (install" \
    "python3-torch: bash tools/setup.sh); psflow's step dumps were written"
  exit 0
fi
"$python" "$check" --dtype=float64 "${manifests[@]}"
"$python" "$check" --dtype=float32 "${manifests[@]}"
