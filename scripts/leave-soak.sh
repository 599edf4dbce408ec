#!/usr/bin/env bash
# leave-soak: runs the README's three-terminal mesh (rcv1, shards 1/3-3/3,
# keys a.key-c.key, checkpoints ckpt-a-ckpt-c, the founder waiting for three
# members) as three `sketchmesh run` processes on 127.0.0.1, and stops one
# member with SIGINT again and again (a random one each time, the founder
# at least once). Each stop must end the process with status 0 and a JSON
# report whose leave notice was acknowledged by every member live at the
# leave (leave_acknowledged_by has members_live_at_leave entries, and that
# is the two others); the member then restarts from its checkpoint as a new
# incarnation, joining through the two live members. From the members'
# progress lines it measures the stall: the longest time no member's clock
# advanced, against one round (the median time per iteration). In a mesh
# that never waits the stall is one round; the bound allows one round more.
# Prints the figures, then one JSON line; exits 1 when a leave was not
# acknowledged by every live member, a stall exceeded the bound or a
# process did not stop or restart in time. Needs Go and python3.
#
#   scripts/leave-soak.sh [-n STOPS] [-t ROUND] [-b ROUNDS] [-w SECONDS] [-s SEED] [-k] [-- RUN FLAGS]
#
# -n  stops (default 20)
# -t  --min-iteration-time of every member (default 100ms)
# -b  stall bound in rounds (default 2: one round lost at most)
# -w  seconds of training between a restart and the next stop (default 2)
# -s  seed of the random choices (default 1)
# -k  keep the work directory (logs, reports, checkpoints) and print its name
# Flags after -- go to every `sketchmesh run`, e.g. -- --log-level debug.
set -euo pipefail

stops=20 round=100ms bound=2 settle=2 seed=1 keep=0
while getopts "n:t:b:w:s:kh" opt; do
  case $opt in
    n) stops=$OPTARG ;; t) round=$OPTARG ;; b) bound=$OPTARG ;; w) settle=$OPTARG ;;
    s) seed=$OPTARG ;; k) keep=1 ;;
    *) sed -n '2,26p' "$0" | sed 's/^# \{0,1\}//'; exit 2 ;;
  esac
done
shift $((OPTIND - 1))
extra=("$@")
if (( stops < 1 )); then echo "leave-soak: -n must be at least 1" >&2; exit 2; fi
RANDOM=$seed

prog=leave-soak
# shellcheck source-path=SCRIPTDIR source=lib/mesh.sh
source "$(dirname "$0")/lib/mesh.sh"
mesh_setup

names=(a b c)
declare -a pid starts addr port
for i in 0 1 2; do port[i]=$(free_port); done

now() { echo "$EPOCHREALTIME"; }
fail() { echo "leave-soak: $*" >&2; keep=1; exit 1; }

start() { # start member $1 (0 founds the mesh), its next incarnation
  local i=$1 n=${starts[$1]:-0} name=${names[$1]}
  starts[i]=$((n + 1))
  # The tutorial's command, with rounds padded to -t, a progress line at
  # every pass of the loop (the stall is measured from them) and training
  # until stopped.
  local args=(run --data rcv1 --shard "$((i + 1))/3" --listen "/ip4/127.0.0.1/tcp/${port[$i]}"
    --key "$name.key" --checkpoint-dir "ckpt-$name" --min-iteration-time "$round"
    --progress 1ms --log-format json --json "${extra[@]}")
  if (( n == 0 && i == 0 )); then
    args+=(--wait-members 3 --iterations 0)
  elif (( n == 0 )); then
    args+=(--join "${addr[0]}")
  else
    # A restart joins through the live members, from a random one on.
    local k j first=$((RANDOM % 3))
    for k in 0 1 2; do
      j=$(((first + k) % 3))
      (( j != i )) && args+=(--join "${addr[$j]}")
    done
  fi
  ./sketchmesh "${args[@]}" > "$name.$n.json" 2> "$name.$n.log" &
  pid[i]=$!
}

# clock_in FILE [first|last]: the clock of the first or last progress line
# of a member's log FILE (empty before the first).
clock_in() {
  local pick=tail
  [[ ${2:-last} == first ]] && pick='head'
  { grep -o '"msg":"progress".*"clock":[0-9]*' "$1" 2>/dev/null || true; } | "$pick" -n 1 | grep -o '[0-9]*$' || true
}

# wait_training I SECONDS: the current incarnation of member I has trained
# at least once since it started (its clock moved past its first one).
wait_training() {
  local i=$1 deadline=$((SECONDS + $2)) name=${names[$1]} n=$((starts[$1] - 1)) first=""
  while (( SECONDS < deadline )); do
    kill -0 "${pid[$i]}" 2>/dev/null || fail "member $name (incarnation $n) exited; see $work/$name.$n.log"
    if [[ -z $first ]]; then
      first=$(clock_in "$name.$n.log" first)
    elif (( $(clock_in "$name.$n.log") > first )); then
      return 0
    fi
    sleep 0.1
  done
  fail "member $name (incarnation $n) did not train within $2 s; see $work/$name.$n.log"
}

start 0
addr[0]=$(wait_address a.0.json "${port[0]}" 30) || fail "the founder did not start; see $work/a.0.log"
for i in 1 2; do start "$i"; done
for i in 1 2; do
  addr[i]=$(wait_address "${names[$i]}.0.json" "${port[$i]}" 30) || fail "member ${names[$i]} did not start; see $work/${names[$i]}.0.log"
done
for i in 0 1 2; do wait_training "$i" 60; done
# The stall is measured from a second after the start on: the window
# before the first stop shows the mesh with no one leaving.
sleep 1
t0=$(now)
sleep "$settle"

: > events.tsv # stop number, member, incarnation, SIGINT, exit and restart times
founder_stopped=0
for k in $(seq 1 "$stops"); do
  victim=$((RANDOM % 3))
  if (( k == stops && !founder_stopped )); then victim=0; fi
  (( victim == 0 )) && founder_stopped=1
  name=${names[$victim]} n=$((starts[victim] - 1))
  t_stop=$(now)
  kill -INT "${pid[$victim]}" 2>/dev/null || fail "stop $k: member $name had exited before its stop; see $work/$name.$n.log"
  status=0
  wait_exit "${pid[$victim]}" 15 || status=$?
  if (( status == 124 )); then
    kill -9 "${pid[$victim]}" 2>/dev/null || true
    fail "stop $k: member $name did not exit within 15 s of SIGINT; see $work/$name.$n.log"
  fi
  t_exit=$(now)
  (( status == 0 )) || fail "stop $k: member $name exited with status $status; see $work/$name.$n.log"
  # The checks on the report come at the end; this line shows progress.
  acked=$({ grep -o '"leave_acknowledged_by":\[[^]]*\]' "$name.$n.json" || true; } | grep -o '"[^"]*/[0-9]*"' | wc -l)
  live=$({ grep -o '"members_live_at_leave":[0-9]*' "$name.$n.json" || true; } | grep -o '[0-9]*$' || true)
  echo "leave-soak: stop $k: SIGINT to $name (incarnation $n): acknowledged by $acked of ${live:-?} live" >&2
  start "$victim"
  t_restart=$(now)
  printf '%s\t%s\t%s\t%s\t%s\t%s\n' "$k" "$name" "$n" "$t_stop" "$t_exit" "$t_restart" >> events.tsv
  wait_training "$victim" 60
  sleep "$settle"
done
t_end=$(now)

for i in 0 1 2; do kill -INT "${pid[$i]}" 2>/dev/null || true; done
for i in 0 1 2; do
  wait_exit "${pid[$i]}" 15 || { kill -9 "${pid[$i]}" 2>/dev/null || true; echo "leave-soak: member ${names[$i]} did not stop at the end" >&2; }
done

# The figures and checks; a failed check keeps the work directory.
python3 - "$t0" "$t_end" "$round" "$bound" <<'PY' || { keep=1; exit 1; }
import glob, json, re, statistics, sys
from datetime import datetime

t0, t_end, bound = float(sys.argv[1]), float(sys.argv[2]), float(sys.argv[4])
pad = sys.argv[3]

def when(stamp):
    # slog writes RFC 3339 with up to nanoseconds; keep microseconds.
    m = re.match(r"(.*T[0-9:]+)(\.[0-9]+)?(.*)", stamp)
    frac = (m.group(2) or ".0")[:7]
    return datetime.fromisoformat(m.group(1) + frac + m.group(3).replace("Z", "+00:00")).timestamp()

events = []
for line in open("events.tsv"):
    k, name, inc, t_stop, t_exit, t_restart = line.split("\t")
    events.append({"stop": int(k), "member": name, "incarnation": int(inc),
                   "t_stop": float(t_stop), "t_exit": float(t_exit), "t_restart": float(t_restart)})

# A member's clock advances when a progress line shows a higher clock than
# the previous line of the same incarnation (a joiner's first line is the
# clock it entered at, not an iteration).
advances, per_iteration, notices = [], [], {"member left": 0, "member suspected": 0, "member declared dead": 0}
left_at = {}  # a leaver's log file: when it logged "left the mesh"
for log in glob.glob("*.log"):
    last = None
    for line in open(log, errors="replace"):
        if not line.startswith("{"):
            continue
        try:
            rec = json.loads(line)
        except ValueError:
            continue
        t = when(rec["time"])
        msg = rec.get("msg", "")
        if msg in notices and t0 <= t <= t_end:
            notices[msg] += 1
        if msg == "left the mesh":
            left_at[log] = t
        if msg != "progress":
            continue
        # blocked: the member's time at the staleness gate so far, in ns.
        clock, blocked = rec["clock"], rec.get("blocked", 0) / 1e9
        if last is not None and clock > last[1]:
            advances.append((t, blocked - last[2]))
            if t0 <= last[0] and t <= t_end:
                per_iteration.append((t - last[0]) / (clock - last[1]))
        if last is None or clock > last[1]:
            last = (t, clock, blocked)

round_s = statistics.median(per_iteration)
# A stall ends with some member's advance; what that member had waited at
# the staleness gate for it tells a wait for another member from a node
# that was busy or not running.
points = sorted([(t0, 0)] + [p for p in advances if t0 < p[0] < t_end] + [(t_end, 0)])
gaps = [(b - a, a, b, gate) for (a, _), (b, gate) in zip(points, points[1:])]
stall, s_from, s_to, s_gate = max(gaps)

def cycle(t):  # the stop after which t falls (0: before the first)
    return max([e["stop"] for e in events if e["t_stop"] <= t], default=0)

worst = {}
for g, a, b, _ in gaps:
    c = cycle(b)
    worst[c] = max(worst.get(c, 0), g)

problems = []
leaves = []
for e in events:
    files = glob.glob(f"{e['member']}.{e['incarnation']}.json")
    reports = [l for l in open(files[0]) if l.startswith("{")] if files else []
    if not reports:
        problems.append(f"stop {e['stop']}: {e['member']} printed no report")
        continue
    r = json.loads(reports[-1])
    acked, live = len(r.get("leave_acknowledged_by") or []), r.get("members_live_at_leave", 0)
    leaves.append((acked, live))
    if not r.get("stopped"):
        problems.append(f"stop {e['stop']}: {e['member']}'s report says it was not stopped")
    if live != 2:
        problems.append(f"stop {e['stop']}: {e['member']} sent its leave to {live} live members, not the 2 running")
    if acked != live:
        problems.append(f"stop {e['stop']}: {e['member']}'s leave acknowledged by {acked} of {live} live members")
if stall > bound * round_s:
    problems.append(f"stall of {stall * 1000:.0f} ms ({stall / round_s:.2f} rounds) after stop {cycle(s_to)}, "
                    f"above the bound of {bound:g} rounds")

# From SIGINT to the leaver's "left the mesh" (its acknowledgements are in
# and its last sends out) and to the end of its process.
leave_s = [left_at[f"{e['member']}.{e['incarnation']}.log"] - e["t_stop"] for e in events
           if f"{e['member']}.{e['incarnation']}.log" in left_at]
exit_s = [e["t_exit"] - e["t_stop"] for e in events]
by_member = {m: sum(1 for e in events if e["member"] == m) for m in "abc"}
acked_all = sum(1 for a, l in leaves if a == l == 2)
print(f"stops: {len(events)} (a, the founder: {by_member['a']}, b: {by_member['b']}, c: {by_member['c']})")
print(f"leaves acknowledged by every live member: {acked_all} of {len(events)} "
      f"(acknowledgements {sum(a for a, _ in leaves)} of {sum(l for _, l in leaves)})")
print(f"SIGINT to 'left the mesh': median {statistics.median(leave_s):.2f} s, max {max(leave_s):.2f} s; "
      f"to the process's exit: median {statistics.median(exit_s):.2f} s, max {max(exit_s):.2f} s")
print(f"round: {round_s * 1000:.1f} ms (median time per iteration, --min-iteration-time {pad})")
where = f"stop {cycle(s_to)}"
if cycle(s_to):
    e = events[cycle(s_to) - 1]
    where += f" ({e['member']}), {s_from - e['t_stop']:+.2f} s to {s_to - e['t_stop']:+.2f} s after its SIGINT"
print(f"longest stall: {stall * 1000:.0f} ms = {stall / round_s:.2f} rounds, after {where}, "
      f"{min(s_gate, stall) * 1000:.0f} ms of it at the staleness gate "
      f"(bound {bound:g} rounds = {bound * round_s * 1000:.0f} ms); worst between stops: "
      + " ".join(f"{worst.get(c, 0) / round_s:.2f}" for c in range(len(events) + 1)))
print(f"stalls above the bound: {sum(1 for g in gaps if g[0] > bound * round_s)}")
print(f"peers' log lines: member left {notices['member left']}, suspected {notices['member suspected']}, "
      f"declared dead {notices['member declared dead']}")
print(json.dumps({
    "stops": len(events), "stops_by_member": by_member,
    "leaves_acknowledged_by_every_live_member": acked_all,
    "acknowledgements": sum(a for a, _ in leaves), "members_live_at_leaves": sum(l for _, l in leaves),
    "left_after_s": {"median": round(statistics.median(leave_s), 3), "max": round(max(leave_s), 3)},
    "exit_after_s": {"median": round(statistics.median(exit_s), 3), "max": round(max(exit_s), 3)},
    "round_ms": round(round_s * 1000, 1), "longest_stall_ms": round(stall * 1000),
    "longest_stall_rounds": round(stall / round_s, 2), "longest_stall_gate_ms": round(min(s_gate, stall) * 1000),
    "stall_bound_rounds": bound,
    "stalls_above_bound": sum(1 for g in gaps if g[0] > bound * round_s),
    "member_left_lines": notices["member left"], "suspected_lines": notices["member suspected"],
    "declared_dead_lines": notices["member declared dead"],
    "ok": not problems, "problems": problems}))
sys.exit(1 if problems else 0)
PY
