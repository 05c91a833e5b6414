#!/usr/bin/env bash
# Builds the libFuzzer targets (tests/fuzz, docs/fuzzing.md) with clang into build-fuzz/ and runs
# each one on a scratch copy of its committed seed corpus. Fails on any crash, leak, timeout or
# failed check, and prints a table: target, executions, exec/s, coverage (cov:), result.
#
#   scripts/fuzz.sh                 10 s per target (a CI-sized pass)
#   scripts/fuzz.sh 600             10 minutes per target
#   scripts/fuzz.sh --runs 1000000  a fixed number of executions per target instead of a time
#   options: --only frame,ddp (targets, without the fuzz_ prefix)   --keep DIR (scratch corpora,
#            crash inputs and logs go there and stay; default a temporary directory, kept only
#            when something failed)   --no-build
# Environment: FUZZ_BUILD_JOBS (ninja -j, default nproc), FUZZ_ARGS (extra libFuzzer arguments).
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
build=$root/build-fuzz
targets=(frame ddp mpa ia_params pcap ethernet stateful roce ib_cm)

seconds=10 runs="" keep="" do_build=1
while (($#)); do
  case $1 in
    --runs) runs=$2; shift 2 ;;
    --only) IFS=, read -r -a targets <<<"$2"; shift 2 ;;
    --keep) keep=$2; shift 2 ;;
    --no-build) do_build=0; shift ;;
    -h|--help) sed -n '2,13p' "$0"; exit 0 ;;
    *[!0-9]*) echo "fuzz.sh: unknown argument '$1'" >&2; exit 2 ;;
    *) seconds=$1; shift ;;
  esac
done

if ((do_build)); then
  "$root/scripts/setup.sh"
  # clang 14 with libFuzzer and the sanitizer runtimes; llvm-symbolizer for the stack traces.
  missing=()
  for p in clang libclang-rt-14-dev llvm-14; do
    dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
  done
  if ((${#missing[@]})); then
    echo "fuzz: installing ${missing[*]}"
    export DEBIAN_FRONTEND=noninteractive
    apt-get update -q
    apt-get install -y -q --no-install-recommends "${missing[@]}"
  fi
  cmake -S "$root" -B "$build" -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo -DCMAKE_CXX_COMPILER=clang++ \
    -DSOFTRNIC_FUZZ=ON -DSOFTRNIC_WITH_DPDK=OFF >/dev/null
  nice -n 10 ninja -C "$build" -j "${FUZZ_BUILD_JOBS:-$(nproc)}" softrnic_fuzz
fi

if [[ -n $keep ]]; then
  scratch=$keep
  mkdir -p "$scratch"
else
  scratch=$(mktemp -d /tmp/softrnic-fuzz.XXXXXX)
fi
export ASAN_OPTIONS=${ASAN_OPTIONS:-abort_on_error=1:detect_leaks=1:symbolize=1}
export UBSAN_OPTIONS=${UBSAN_OPTIONS:-print_stacktrace=1:halt_on_error=1}
# fuzz_pcap writes two small files per execution in TMPDIR: memory is faster than a disk.
if [[ -z ${TMPDIR:-} && -d /dev/shm && -w /dev/shm ]]; then export TMPDIR=/dev/shm; fi
if [[ -z ${ASAN_SYMBOLIZER_PATH:-} ]] && command -v llvm-symbolizer-14 >/dev/null; then
  ASAN_SYMBOLIZER_PATH=$(command -v llvm-symbolizer-14)
  export ASAN_SYMBOLIZER_PATH
fi

status=0
rows=()
for t in "${targets[@]}"; do
  bin=$build/tests/fuzz/fuzz_$t
  [[ -x $bin ]] || { echo "fuzz.sh: no $bin (build first)" >&2; exit 2; }
  corpus=$scratch/corpus/$t
  mkdir -p "$corpus" "$scratch/artifacts"
  cp -n "$root/tests/fuzz/corpus/$t/"* "$corpus/" 2>/dev/null || true
  args=(-timeout=30 -rss_limit_mb=4096 -print_final_stats=1 -artifact_prefix="$scratch/artifacts/$t-")
  if [[ -n $runs ]]; then args+=(-runs="$runs"); else args+=(-max_total_time="$seconds"); fi
  [[ -f $root/tests/fuzz/$t.dict ]] && args+=(-dict="$root/tests/fuzz/$t.dict")
  # The stateful target keeps its RNIC pair across inputs, whose memory grows between them: no
  # per-input leak check (LeakSanitizer still runs at exit).
  [[ $t == stateful ]] && args+=(-detect_leaks=0)
  log=$scratch/$t.log
  if [[ -n $runs ]]; then echo "=== fuzz_$t: $runs runs"; else echo "=== fuzz_$t: $seconds s"; fi
  mapfile -t before < <(ls "$scratch/artifacts/$t-"{crash,leak,timeout,oom}-* 2>/dev/null || true)
  start=$(date +%s)
  rc=0
  # shellcheck disable=SC2086
  nice -n 10 "$bin" "${args[@]}" ${FUZZ_ARGS:-} "$corpus" >"$log" 2>&1 || rc=$?
  elapsed=$(($(date +%s) - start))
  execs=$(sed -n 's/^stat::number_of_executed_units: *//p' "$log" | tail -1)
  rate=$(sed -n 's/^stat::average_exec_per_sec: *//p' "$log" | tail -1)
  cov=$(grep -o 'cov: [0-9]*' "$log" | tail -1 | cut -d' ' -f2)
  # New crash, leak, timeout or out-of-memory inputs (slow-unit reports are not failures).
  crashes=$(comm -13 <(printf '%s\n' "${before[@]}") <(ls "$scratch/artifacts/$t-"{crash,leak,timeout,oom}-* 2>/dev/null) |
    head -1 || true)
  if ((rc != 0)) || [[ -n $crashes ]]; then
    result=FAILED
    status=1
    grep -m1 -E 'ERROR: |FUZZ_CHECK failed|runtime error|SUMMARY' "$log" | sed 's/^/  /' || true
    echo "  input: ${crashes:-?}   log: $log"
    env=""
    [[ $t == stateful ]] && env="SOFTRNIC_FUZZ_RECYCLE=1 SOFTRNIC_FUZZ_TRACE=1 "
    echo "  reproduce: $env$bin ${crashes:-INPUT}"
  else
    result=ok
  fi
  rows+=("$(printf '%-10s %12s %9s %7s %7s  %s' "$t" "${execs:-?}" "${rate:-?}" "${cov:-?}" "${elapsed}s" "$result")")
done

echo
printf '%-10s %12s %9s %7s %7s  %s\n' target executions exec/s cov time result
for r in "${rows[@]}"; do echo "$r"; done
if ((status == 0)) && [[ -z $keep ]]; then
  rm -rf "$scratch"
else
  echo "scratch corpora, logs and crash inputs: $scratch"
fi
exit $status
