# Shell helpers of ./sd (sourced): `say`, and `step` for the long install commands.
# shellcheck shell=bash

say() { echo "[supportdesk] $*" >&2; }

# Ctrl-C (or SIGTERM to this script alone) stops a running install at once, with its
# compiler children: each step runs in its own process group, stopped as a whole.
# The stop takes every running job from bash's job table, not only `$child`: a signal that
# lands between a step's start and `child=$!` runs this trap before the assignment.
child=""
stop() {
  trap - INT TERM
  local pid pids
  pids=$(jobs -p)
  [ -z "$pids" ] || say "stopping ..."
  for pid in $pids; do
    kill -TERM -- "-$pid" 2>/dev/null || kill -TERM "$pid" 2>/dev/null || true
  done
  wait 2>/dev/null || true
  say "stopped"
  exit 130
}
trap stop INT TERM

# uv's stderr, with its "waiting for a lock" line (RUST_LOG below) turned into advice.
lock_notes() {
  while IFS= read -r line; do
    case "$line" in
      *"Waiting to acquire"*"lock"*)
        say "another uv process on this machine is using the package cache (it may be building the same package); waiting for it to finish, up to ${UV_LOCK_TIMEOUT}s (UV_LOCK_TIMEOUT) ..." ;;
      *) printf '%s\n' "$line" ;;
    esac
  done
}

# step LABEL COMMAND...: run COMMAND in its own process group, saying every SD_PROGRESS_EVERY
# seconds (30) that it still runs.
step() {
  local label=$1 began=$SECONDS every=${SD_PROGRESS_EVERY:-30} rc=0
  local next=$every
  shift
  set -m
  RUST_LOG="${RUST_LOG:-uv_fs=info}" "$@" 2> >(lock_notes >&2) &
  child=$!
  set +m
  while kill -0 "$child" 2>/dev/null; do
    sleep 1 &
    wait $! 2>/dev/null || true
    if (( SECONDS - began >= next )); then
      say "$label: still running ($((SECONDS - began))s so far) ..."
      next=$((next + every))
    fi
  done
  wait "$child" || rc=$?
  child=""
  return "$rc"
}

