#!/usr/bin/env bash
# The bundle is self-contained: unpacked into an empty directory, every
# binary resolves each shared library (but the C library's) inside it, and
# a whole job runs from there with an empty environment.
#   bundle_test.sh <psflow-bundle.tar.gz>
set -euo pipefail
bundle="$1"
dir="${TEST_TMPDIR:-$(mktemp -d)}/unpacked"
rm -rf "$dir"
mkdir -p "$dir"
tar -xzf "$bundle" -C "$dir"
root="$dir/psflow"
lib="$(realpath "$root/lib")"
cat "$root/BUNDLE"

glibc='^(linux-vdso|ld-linux|libc|libm|libdl|librt|libpthread|libresolv|libutil|libanl)[.-]'
for binary in ps/ps_server chief/chief worker/worker evaluator/evaluator client/psctl/psctl; do
  [ -x "$root/$binary" ] || { echo "FAIL: $binary missing" >&2; exit 1; }
  while read -r name arrow path _; do
    [ "$arrow" = "=>" ] || continue
    if [ "$path" = "not" ]; then
      echo "FAIL: $binary cannot find $name" >&2
      exit 1
    fi
    path="$(realpath "$path")"
    if ! [[ "$name" =~ $glibc ]] && [[ "$path" != "$lib/"* ]]; then
      echo "FAIL: $binary takes $name from $path, outside the bundle" >&2
      exit 1
    fi
  done < <(env -i ldd "$root/$binary")
done

# A short job on the real data, from the unpacked tree, no environment.
data=/usr/share/datasets/fashion-mnist
cat > "$dir/job.json" <<JOB
{
  "name": "bundle",
  "model": {"mlp": {"hidden_sizes": [64]}},
  "optimizer": {"kind": "ADAM"},
  "learning_rate": {"learning_rate": 0.002},
  "data": {"train_images": "$data/train-images-idx3-ubyte.gz",
           "train_labels": "$data/train-labels-idx1-ubyte.gz",
           "test_images": "$data/t10k-images-idx3-ubyte.gz",
           "test_labels": "$data/t10k-labels-idx1-ubyte.gz"},
  "training": {"batch_size": 64, "steps": 1000, "mode": "ASYNC"},
  "checkpoint": {"directory": "$dir/checkpoints", "save_every_steps": 100}
}
JOB
cd "$dir"
env -i HOME="$dir" "$root/client/psctl/psctl" local --job="$dir/job.json" \
  --dir="$dir/run" --ps=2 --workers=2 --device=cpu --timeout_s=120 \
  > "$dir/psctl.out" 2>&1 || {
  cat "$dir/psctl.out" >&2
  echo "FAIL: the job failed from the bundle" >&2
  exit 1
}
grep -q '"state": "SUCCEEDED"' "$dir/run/result.json" || {
  cat "$dir/psctl.out" "$dir/run/result.json" >&2
  exit 1
}
env -i "$root/client/psctl/psctl" ckpt list "$dir/run/checkpoints" | grep -q "(newest)"
# The default job config ships too, and parses.
grep -q '"name": "fashion_mnist_mlp"' "$root/configs/fashion_mnist_mlp.json"
echo "PASS: $(tail -1 "$dir/psctl.out")"
