# shellcheck shell=bash
# Shell functions shared by the soak scripts that run separate
# `sketchmesh run` processes on 127.0.0.1. Source it after setting
# `prog` (the script's name, for messages) and `keep` (1: keep the work
# directory). Needs bash, Go and python3.

# mesh_setup builds the binary once into a fresh work directory ($work,
# binary $work/sketchmesh), makes it the current directory and arranges
# for the processes started in the background and the directory to go at
# exit. $repo is the repository's root.
mesh_setup() {
  repo=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
  work=$(mktemp -d)
  trap mesh_cleanup EXIT
  (cd "$repo" && go build -o "$work/sketchmesh" ./cmd/sketchmesh)
  cd "$work" || exit 1
}

mesh_cleanup() {
  local p
  for p in $(jobs -p); do kill -9 "$p" 2>/dev/null || true; done
  if (( ${keep:-0} )); then echo "${prog:-soak}: work directory $work" >&2; else rm -rf "$work"; fi
}

# free_port prints a TCP port of 127.0.0.1 that nothing listens on now.
free_port() {
  python3 -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])'
}

# wait_address FILE PORT [SECONDS] prints the /p2p address a node listening
# on PORT wrote to FILE (its stdout), waiting for it up to SECONDS (30).
wait_address() {
  local file=$1 port=$2 deadline=$((SECONDS + ${3:-30})) a=""
  while (( SECONDS < deadline )); do
    a=$(grep -ho "/ip4/127.0.0.1/tcp/$port/p2p/[A-Za-z0-9]*" "$file" 2>/dev/null | head -1) || true
    [[ -n $a ]] && { echo "$a"; return 0; }
    sleep 0.1
  done
  return 1
}

# wait_exit PID SECONDS waits up to SECONDS for the background process PID
# to end; it returns the process's exit status, or 124 if it is still
# running.
wait_exit() {
  local pid=$1 deadline=$((SECONDS + $2))
  while kill -0 "$pid" 2>/dev/null; do
    (( SECONDS < deadline )) || return 124
    sleep 0.05
  done
  local status=0
  wait "$pid" 2>/dev/null || status=$?
  return "$status"
}
