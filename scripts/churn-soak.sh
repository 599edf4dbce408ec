#!/usr/bin/env bash
# churn-soak: runs a mesh of separate `sketchmesh run` processes on 127.0.0.1
# and, while it trains, stops members at random (SIGKILL or SIGTERM) and
# restarts them from their checkpoints. At the end every node that finished
# must hold the same updates, with none applied twice, and report the same
# test accuracy. Prints one JSON line; exits 1 when a check fails. Needs Go
# and python3.
#
#   scripts/churn-soak.sh [-n NODES] [-r ROUNDS] [-i ITERATIONS] [-s SEED] [-k]
#
# -n  nodes (3-16, default 6)        -r  stop/restart rounds (default 8)
# -i  iterations (default 500 per round + 1000, at 10 ms each at least)
# -s  seed of the random choices (default 1)
# -k  keep the work directory (logs, checkpoints) and print its name
set -euo pipefail

nodes=6 rounds=8 iterations="" seed=1 keep=0
while getopts "n:r:i:s:kh" opt; do
  case $opt in
    n) nodes=$OPTARG ;; r) rounds=$OPTARG ;; i) iterations=$OPTARG ;;
    s) seed=$OPTARG ;; k) keep=1 ;;
    *) sed -n '2,15p' "$0" | sed 's/^# \{0,1\}//'; exit 2 ;;
  esac
done
if (( nodes < 3 || nodes > 16 )); then echo "churn-soak: -n must be 3-16" >&2; exit 2; fi
# Training must outlast the rounds (about 4 s each), or a late restart finds
# nobody left to join.
iterations=${iterations:-$((500 * rounds + 1000))}
RANDOM=$seed

prog=churn-soak
# shellcheck source-path=SCRIPTDIR source=lib/mesh.sh
source "$(dirname "$0")/lib/mesh.sh"
mesh_setup

declare -a pid starts addr port
for i in $(seq 0 $((nodes - 1))); do port[i]=$(free_port); done
start() { # start node $1 (its next incarnation)
  local i=$1 n=${starts[$1]:-0}
  starts[i]=$((n + 1))
  local args=(run --data a9a --shard "$((i + 1))/$nodes" --listen "/ip4/127.0.0.1/tcp/${port[$i]}"
    --key "node$i.key" --checkpoint-dir "ckpt$i" --iterations "$iterations" --min-iteration-time 10ms
    --dead-after 2s --heartbeat 200ms --json)
  if (( n == 0 && i == 0 )); then
    args+=(--wait-members "$nodes")
  elif (( n == 0 )); then
    args+=(--join "${addr[0]}")
  else
    # A restart joins through any member, tried from a random one on.
    local k j first=$((RANDOM % nodes))
    for k in $(seq 0 $((nodes - 1))); do
      j=$(((first + k) % nodes))
      (( j != i )) && args+=(--join "${addr[$j]}")
    done
  fi
  ./sketchmesh "${args[@]}" > "node$i.$n.json" 2>> "node$i.log" &
  pid[i]=$!
}
address() { # wait for node $1 to print its address
  addr[$1]=$(wait_address "node$1.0.json" "${port[$1]}" 10) ||
    { echo "churn-soak: node $1 did not start; see node$1.log" >&2; keep=1; exit 1; }
}

start 0
address 0
for i in $(seq 1 $((nodes - 1))); do start "$i"; done
for i in $(seq 1 $((nodes - 1))); do address "$i"; done
sleep 3

events=()
for round in $(seq 1 "$rounds"); do
  victim=$((RANDOM % nodes))
  if (( RANDOM % 2 )); then sig=KILL; else sig=TERM; fi
  kill -s "$sig" "${pid[$victim]}" 2>/dev/null || true
  wait "${pid[$victim]}" 2>/dev/null || true
  events+=("$sig:$victim")
  echo "churn-soak: round $round: SIG$sig to node $victim, restart" >&2
  sleep $((1 + RANDOM % 2))
  start "$victim"
  sleep 2
done
status=0
for i in $(seq 0 $((nodes - 1))); do wait "${pid[$i]}" || status=1; done

# The last incarnation of every node must have run to the end; all agree.
python3 - "$nodes" "$iterations" "$status" "$(IFS=,; echo "${events[*]}")" <<'PY'
import glob, json, sys
nodes, iterations, status, events = int(sys.argv[1]), int(sys.argv[2]), int(sys.argv[3]), sys.argv[4]
finals, problems = [], []
for i in range(nodes):
    files = sorted(glob.glob(f"node{i}.*.json"), key=lambda f: int(f.split(".")[1]))
    lines = [l for l in open(files[-1]).read().splitlines() if l.startswith("{")]
    if not lines:
        problems.append(f"node {i}: its last incarnation printed no report")
        continue
    r = json.loads(lines[-1])
    finals.append(r)
    if r["clock"] != iterations:
        problems.append(f"node {i}: stopped at clock {r['clock']}")
    if r["applied_twice"] != 0:
        problems.append(f"node {i}: {r['applied_twice']} updates applied twice")
held = sorted({r["updates_held"] for r in finals})
acc = sorted({r["test_accuracy"] for r in finals})
if len(held) > 1:
    problems.append(f"nodes hold different numbers of updates: {held}")
if len(acc) > 1:
    problems.append(f"nodes report different accuracies: {acc}")
if status:
    problems.append("a node exited with an error")
print(json.dumps({"nodes": nodes, "iterations": iterations, "events": events.split(",") if events else [],
                  "updates_held": held, "test_accuracy": acc, "ok": not problems, "problems": problems}))
sys.exit(1 if problems else 0)
PY
