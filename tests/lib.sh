# Shell helpers of the test scripts; source it: . "$(dirname "${BASH_SOURCE[0]}")/../lib.sh"

# skip REASON...: the test cannot run here (ctest's SKIP_RETURN_CODE 77)
skip() { echo "SKIPPED: $*"; exit 77; }

# stop_pid PID SIGNAL: signal one of our background jobs and reap it (bounded: KILL after 10 s)
stop_pid() {
  local pid=$1 sig=$2 i
  [ -n "$pid" ] || return 0
  kill -0 "$pid" 2>/dev/null || { wait "$pid" 2>/dev/null || true; return 0; }
  kill -"$sig" "$pid" 2>/dev/null || true
  for i in $(seq 1 100); do kill -0 "$pid" 2>/dev/null || break; sleep 0.1; done
  kill -0 "$pid" 2>/dev/null && kill -KILL "$pid" 2>/dev/null || true
  wait "$pid" 2>/dev/null || true
}

# wait_for FILE TEXT SECONDS PID: poll FILE for TEXT while PID lives, at most SECONDS
wait_for() {
  local file=$1 text=$2 secs=$3 pid=$4 i
  for i in $(seq 1 $((secs * 10))); do
    grep -qF "$text" "$file" 2>/dev/null && return 0
    kill -0 "$pid" 2>/dev/null || { grep -qF "$text" "$file" 2>/dev/null; return; }
    sleep 0.1
  done
  return 1
}

# fail_with DIR MESSAGE FILE...: FAIL, the tails of those of DIR's files that are not empty, exit 1
fail_with() {
  local dir=$1 msg=$2 f
  shift 2
  echo "FAIL: $msg"
  for f in "$@"; do
    [ -s "$dir/$f" ] && { echo "---- $f (tail)"; tail -n 25 "$dir/$f"; }
  done
  exit 1
}
