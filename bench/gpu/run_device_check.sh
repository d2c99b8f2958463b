#!/usr/bin/env bash
# One short run on a lent GPU machine (a few minutes of device time), from a
# bundle made by make_bundle.sh, in three phases, each with its own time
# limit so that one hang cannot spend the rest:
#
#   1. every GPU test of the bundle with PSFLOW_REQUIRE_GPU=1 (bundle_env.sh
#      run_gpu_tests: passed, failed and skipped counts per test, and each
#      test's "[ MARGIN ]" lines: how much of its float32 bound the worst
#      GPU-CPU difference used);
#   2. ps_bench over TCP, 1 worker x 1 server at 40 MB, against the same
#      run's loopback stream, 3 runs (issue 35's target: >= 0.85x loopback
#      on the 2-core VM, >= 1.0x on a 16-core host), as bench/RESULTS.md
#      "Quiet re-measurement" ran it on the 2-core VM; before the jobs, so
#      that the machine is quiet;
#   3. the whole jobs of run_jobs_bench.sh (MLP on cuda and cpu with 1
#      parameter server, CTR wide-and-deep on cuda with 2), plus the DLRM
#      zoo job on cuda with 2 (PSFLOW_ZOO_JOBS).
#
#   bash bench/gpu/run_device_check.sh gpu_bundle.tar.xz gpu_data [out_dir]
#
# data_dir holds the four Fashion-MNIST .gz files (run_jobs_bench.sh); the
# CTR data is generated on the machine. Writes summary.md (everything
# bench/RESULTS.md needs) and the logs to out_dir (default: $OUT when set,
# else ./device_check_out). Exits 1 when a test, a job or a ps_bench run
# failed or ran out of time.
#
# Without a GPU (a dry run on the build machine) the tests fail as "no
# GPU" (PSFLOW_REQUIRE_GPU=1) and the "cuda" jobs run on the CPU backend.
#
# Time limits (seconds; environment overrides): the tests together
# CHECK_TESTS_S (100; each at most 90), each ps_bench run CHECK_PS_BENCH_S
# (35), the jobs together CHECK_JOBS_S (170; each at most 80): at most
# about 7 minutes with the unpacking, about 2 when nothing hangs (1.5 on
# the 2-core build VM as a dry run).
set -uo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
source "$here/bundle_env.sh"
script_start=$SECONDS
tests_s="${CHECK_TESTS_S:-100}"
jobs_s="${CHECK_JOBS_S:-170}"
ps_bench_s="${CHECK_PS_BENCH_S:-35}"
bundle_arg="${1:?usage: run_device_check.sh <bundle dir or .tar.xz> <data_dir> [out_dir]}"
data="${2:?usage: run_device_check.sh <bundle dir or .tar.xz> <data_dir> [out_dir]}"
out="${3:-${OUT:-device_check_out}}"
mkdir -p "$out"
out="$(cd "$out" && pwd)"
data="$(cd "$data" && pwd)" || exit 1
summary="$out/summary.md"
: >"$summary"
say() { echo "$@" | tee -a "$summary"; }
failed=0
phase_times=()

bundle="$(open_bundle "$bundle_arg")" || {
  say "cannot open the bundle $bundle_arg"
  exit 1
}
unpack_s=$((SECONDS - script_start))
case "$bundle" in  # unpacked here by open_bundle: removed at the end
  /tmp/psflow_bundle_$$/*) trap 'rm -rf "/tmp/psflow_bundle_$$"' EXIT ;;
esac

# Any process of the bundle's binaries still running after a phase (a job's
# servers after a timeout): killed, by the path of its executable.
kill_leftovers() {
  local proc exe
  for proc in /proc/[0-9]*; do
    exe="$(readlink "$proc/exe" 2>/dev/null)" || continue
    case "$exe" in
      "$bundle"/bin/*)
        kill -9 "${proc#/proc/}" 2>/dev/null &&
          say "(killed a leftover ${exe#"$bundle"/} process, ${proc#/proc/})"
        ;;
    esac
  done
}

say "# psflow device check ($(date -u +%Y-%m-%dT%H:%M:%SZ))"
say
say '```'
tee -a "$summary" <"$bundle/MANIFEST"
nvidia-smi --query-gpu=name,driver_version,memory.total,clocks.max.sm \
  --format=csv 2>&1 | tee -a "$summary"
say "host: $(nproc) cores,$(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2), $(uname -srm)"
say "load average at start: $(cut -d' ' -f1-3 /proc/loadavg)"
say '```'
say
use_bundle_libraries "$bundle" >"$out/libraries.log" 2>&1
loadable=$?
say '```'
tee -a "$summary" <"$out/libraries.log"
say '```'
if [ "$loadable" != 0 ]; then
  say "A binary cannot load: nothing run."
  exit 1
fi
gpu_device=cuda
if ! nvidia-smi -L >/dev/null 2>&1; then
  gpu_device=cpu
  say
  say "**No GPU here (nvidia-smi fails): a dry run. The GPU tests fail as"
  say "\"no GPU\" and the cuda jobs run with --device=cpu.**"
fi

# --- 1. Tests.
say
say "## 1. GPU tests (PSFLOW_REQUIRE_GPU=1; at most $tests_s s together)"
say
start=$SECONDS
PSFLOW_TEST_TIMEOUT=90 PSFLOW_TESTS_DEADLINE=$(($(date +%s) + tests_s)) \
  run_gpu_tests "$bundle" "$out/tests" || failed=1
kill_leftovers
phase_times+=("tests $((SECONDS - start)) s")

# --- 2. ps_bench, TCP 1 x 1 at 40 MB, three runs: before the jobs, on a
# machine that has been quiet but for the short tests.
say
say "## 2. ps_bench TCP 1 x 1 at 40 MB against the same run's loopback stream"
say
say '```'
say "ps_bench --ps_server=<bundle>/bin/ps/ps_server --sizes_mb=40 --layouts=1x1 \\"
say "    --tls_mb=0 --optimizer_elements=0 --cpu_pushes=0 --shared_memory_mb=0"
say '```'
say
start=$SECONDS
rows=()
for run in 1 2 3; do
  log="$out/ps_bench_$run.log"
  load="$(cut -d' ' -f1 /proc/loadavg)"
  (cd "$bundle/bin" && timeout --kill-after=5 "$ps_bench_s" ./bench/ps_bench \
    --ps_server="$bundle/bin/ps/ps_server" --sizes_mb=40 --layouts=1x1 \
    --tls_mb=0 --optimizer_elements=0 --cpu_pushes=0 --shared_memory_mb=0) \
    >"$log" 2>&1
  rc=$?
  kill_leftovers
  # | 1 x 1 | 40 | base | push | pull | push+pull | push / base | pull / base |
  row="$(grep -m1 '^| 1 x 1 | 40 |' "$log")"
  if [ "$rc" != 0 ] || [ -z "$row" ]; then
    failed=1
    note="exit $rc"
    [ "$rc" = 124 ] || [ "$rc" = 137 ] && note="timed out after $ps_bench_s s"
    rows+=("$run $load failed")
    say "- run $run: FAILED ($note; see ps_bench_$run.log)"
    tail -5 "$log" | tee -a "$summary"
    continue
  fi
  rows+=("$run $load $(echo "$row" | cut -d'|' -f4-6 | tr '|' ' ')")
done
printf '%s\n' "${rows[@]}" | python3 -c '
import statistics, sys
print("| run | load (1 min) | loopback GB/s | push GB/s | pull GB/s | push / base | pull / base |")
print("|---:|---:|---:|---:|---:|---:|---:|")
push, pull = [], []
for line in sys.stdin:
    f = line.split()
    if len(f) < 5:
        print("| %s | %s | failed | | | | |" % (f[0], f[1]))
        continue
    base, p, q = map(float, f[2:5])
    push.append(p / base)
    pull.append(q / base)
    print("| %s | %s | %.2f | %.2f | %.2f | %.2fx | %.2fx |" % (f[0], f[1], base, p, q, p / base, q / base))
if push:
    mp, mq = statistics.median(push), statistics.median(pull)
    print()
    print("Medians: push %.2fx, pull %.2fx of the same run'"'"'s loopback stream. "
          "Issue 35'"'"'s targets: >= 1.0x on a 16-core host: push %s, pull %s; "
          ">= 0.85x on the 2-core VM: push %s, pull %s." % (
              mp, mq, "met" if mp >= 1.0 else "missed", "met" if mq >= 1.0 else "missed",
              "met" if mp >= 0.85 else "missed", "met" if mq >= 0.85 else "missed"))
' | tee -a "$summary"
say
say "First run's full output:"
say '```'
grep -v '^RESULT' "$out/ps_bench_1.log" | tee -a "$summary"
say '```'
phase_times+=("ps_bench $((SECONDS - start)) s")

# --- 3. Whole jobs (run_jobs_bench.sh, its tests skipped: run above).
say
say "## 3. Whole jobs (run_jobs_bench.sh; at most $jobs_s s together, 80 s each)"
say
start=$SECONDS
PSFLOW_SKIP_GPU_TESTS=1 PSFLOW_JOB_TIMEOUT=80 PSFLOW_ZOO_JOBS=ctr_dlrm \
  PSFLOW_JOB_DEVICE="$gpu_device" \
  timeout --kill-after=10 "$jobs_s" \
  bash "$here/run_jobs_bench.sh" "$bundle" "$data" "$out/jobs" >"$out/jobs.log" 2>&1
rc=$?
kill_leftovers
if [ "$rc" != 0 ]; then
  failed=1
  [ "$rc" = 124 ] || [ "$rc" = 137 ] && say "**The jobs ran out of their $jobs_s s.**"
fi
# jobs_summary.md without its header (the same machine as above).
sed -n '/^## Whole jobs/,$p' "$out/jobs/jobs_summary.md" 2>/dev/null | tail -n +2 |
  tee -a "$summary"
[ -s "$out/jobs/jobs_summary.md" ] || tail -20 "$out/jobs.log" | tee -a "$summary"
phase_times+=("jobs $((SECONDS - start)) s")
# What comes back from the machine: the jobs' logs, events and results, not
# their checkpoints (over 100 MB) or their generated TLS keys and tokens.
rm -rf "$out"/jobs/job_*/checkpoints "$out"/jobs/job_*/tls "$out"/jobs/job_*/tokens

say
say "## Time"
say
say "unpacking $unpack_s s; $(IFS=';'; echo "${phase_times[*]}" | sed 's/;/; /g'); total $((SECONDS - script_start)) s"
say
say "Logs: $out (tests/, jobs/, jobs.log, ps_bench_*.log, libraries.log)"
[ "$failed" = 0 ] && say "Result: everything passed." || say "Result: something FAILED (above)."
exit "$failed"
