#!/usr/bin/env bash
# Packs psflow's role binaries, psctl, the shared libraries they need and
# the shipped job configs into one relocatable tarball:
#
#   psflow/ps/ps_server  psflow/chief/chief  psflow/worker/worker
#   psflow/evaluator/evaluator  psflow/client/psctl/psctl
#   psflow/lib/           every shared library but the C library's own
#   psflow/configs/       job configs
#   psflow/BUNDLE         what is inside and where it was built
#
# The binaries' RPATH becomes $ORIGIN/../lib, or as many ../ as the
# binary is deep (DT_RPATH, which also serves
# their libraries' own dependencies), so the tree runs from any directory
# on any glibc >= the build machine's (Debian 12: 2.36) with nothing else
# installed. The layout mirrors bazel-bin, so `psflow/client/psctl/psctl local`
# finds the role binaries beside it.
#
#   make_bundle.sh <out.tar.gz> <binary>... -- <config>...
# (run by the //deploy:bundle genrule)
set -euo pipefail
out="$1"
shift
binaries=()
while [ "$#" -gt 0 ] && [ "$1" != "--" ]; do
  binaries+=("$1")
  shift
done
[ "$#" -gt 0 ] && shift
configs=("$@")

command -v patchelf >/dev/null || {
  echo "make_bundle: patchelf is missing; run tools/setup.sh" >&2
  exit 1
}
stage="$(mktemp -d)"
trap 'rm -rf "$stage"' EXIT
root="$stage/psflow"
mkdir -p "$root/lib" "$root/configs"

# The C library and its loader come from the host; everything else ships.
is_glibc() {
  case "$1" in
    linux-vdso.so.* | ld-linux*.so.* | libc.so.* | libm.so.* | libdl.so.* | \
      librt.so.* | libpthread.so.* | libresolv.so.* | libutil.so.* | \
      libanl.so.* | libnss_*.so.*) return 0 ;;
  esac
  return 1
}

for binary in "${binaries[@]}"; do
  # bazel-out/<config>/bin/<package>/<name> -> <package>/<name>
  relative="${binary#*/bin/}"
  mkdir -p "$root/$(dirname "$relative")"
  cp -L "$binary" "$root/$relative"
  chmod u+w "$root/$relative"
  while read -r name arrow path _; do
    [ "$arrow" = "=>" ] || continue
    is_glibc "$name" && continue
    if [ "$path" = "not" ]; then
      echo "make_bundle: $relative needs $name, which is not found" >&2
      exit 1
    fi
    if [ ! -e "$root/lib/$name" ]; then
      cp -L "$path" "$root/lib/$name"
      chmod u+w "$root/lib/$name"
    fi
  done < <(ldd "$binary")
  # $ORIGIN/../lib for ps/ps_server, $ORIGIN/../../lib for client/psctl/psctl.
  up="$(dirname "$relative" | sed 's#[^/][^/]*#..#g')"
  patchelf --force-rpath --set-rpath "\$ORIGIN/$up/lib" "$root/$relative"
done
for library in "$root"/lib/*; do
  patchelf --force-rpath --set-rpath '$ORIGIN' "$library"
done
for config in "${configs[@]}"; do
  cp "$config" "$root/configs/"
done
{
  echo "psflow bundle"
  echo "built on: $(uname -srm), glibc $(ldd --version | head -1 | awk '{print $NF}')"
  echo "binaries:"
  (cd "$root" && find . -type f -perm -u+x ! -path './lib/*' | sort | sed 's/^/  /')
  echo "libraries:"
  (cd "$root/lib" && ls | sed 's/^/  /')
} > "$root/BUNDLE"
tar -C "$stage" -czf "$out" psflow
