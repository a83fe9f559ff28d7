#!/usr/bin/env bash
# multihost.sh: emulates several hosts on this machine and runs one job across them.
#
#   tools/multihost.sh [--hosts 2x2 | --layout 2,1,1] [--name TAG] [--timeout S]
#                      [--launcher commrun|env] [--commrun PATH] [--allow-fail R[,R]]
#                      [--env VAR=VALUE]... [--] program [args...]
#
# Each emulated host is a network namespace with its own UTS, IPC and mount
# namespaces (own hostname mh-h<K>, own SysV IPC, own /dev/shm tmpfs, own
# /etc/hosts naming every emulated host, own TMPDIR inside the rig's work
# directory, so launchers killed with the rig leave nothing in /tmp), joined to the others by a veth pair
# into a bridge that lives in a namespace of its own. Host K has address
# 10.77.0.<K+1>/24 on its device mh0; nothing is created in this machine's own
# network namespace, so the addresses exist only inside the rig.
#
# Ranks: host K runs layout[K] ranks. With --launcher commrun (the default)
# each host runs `commrun --nnodes H --node-rank K --master 10.77.0.1:29400
# -n layout[K] --rank-offset O --world-size W program args` (node 0's rank 0
# hosts the store), so the rig exercises commrun's multi-node launch. With
# --launcher env each host starts its ranks itself with only launcher
# variables set (the rig's --env decides which: SLURM_*, RANK/MASTER_*, ...),
# for testing how the library finds its store without commrun.
#
# The transports' own device variables are set per host: UCX_NET_DEVICES=mh0,
# FI_TCP_IFACE=mh0, FI_NET_IFACE=mh0 and COMM_IFACE=<host address>; every rank
# gets the rig's COMM_STORE_TOKEN (a fresh random one unless set).
# Every process of a host, the namespaces, the veth links and the bridge are
# removed on exit, also on failure, Ctrl-C or SIGTERM; a rig killed with
# SIGKILL leaves its namespaces behind, and the next rig removes them (their
# names carry the dead rig's pid).
#
# Exit status: the first non-zero status of a host's launcher (commrun passes on
# a failing rank's code), 124 when --timeout expired, 77 when this machine
# cannot create namespaces (not root, no `ip`/`unshare`), 2 for bad usage.
set -euo pipefail

usage() {
  sed -n '2,31p' "$0" | sed 's/^# \{0,1\}//'
  exit "${1:-2}"
}

layout="2,2"
tag="rig"
timeout_s=120
launcher="commrun"
commrun=""
allow_fail=""
extra_env=()
while (($#)); do
  case $1 in
    --hosts)
      [[ ${2:-} =~ ^([0-9]+)x([0-9]+)$ ]] || { echo "multihost: --hosts '${2:-}' is not HxR (e.g. 2x2)" >&2; exit 2; }
      layout=$(printf "${BASH_REMATCH[2]}%.0s," $(seq "${BASH_REMATCH[1]}")); layout=${layout%,}; shift 2 ;;
    --layout) layout=${2:-}; shift 2 ;;
    --name) tag=${2:-}; shift 2 ;;
    --timeout) timeout_s=${2:-}; shift 2 ;;
    --launcher) launcher=${2:-}; shift 2 ;;
    --commrun) commrun=${2:-}; shift 2 ;;
    --allow-fail) allow_fail=${2:-}; shift 2 ;;
    --env) extra_env+=("${2:-}"); shift 2 ;;
    -h|--help) usage 0 ;;
    --) shift; break ;;
    -*) echo "multihost: unknown option '$1'" >&2; usage 2 ;;
    *) break ;;
  esac
done
(($#)) || { echo "multihost: no program given" >&2; usage 2; }
[[ $layout =~ ^[1-9][0-9]*(,[1-9][0-9]*)*$ ]] || { echo "multihost: --layout '$layout' is not a list of rank counts (e.g. 2,1,1)" >&2; exit 2; }
[[ $tag =~ ^[A-Za-z0-9_]{1,40}$ ]] || { echo "multihost: --name '$tag' must be 1-40 letters, digits or _" >&2; exit 2; }
[[ $timeout_s =~ ^[0-9]+$ ]] && ((timeout_s > 0)) || { echo "multihost: --timeout '$timeout_s' is not a positive integer" >&2; exit 2; }
[[ $launcher == commrun || $launcher == env ]] || { echo "multihost: --launcher must be commrun or env" >&2; exit 2; }
IFS=, read -r -a ranks_per_host <<<"$layout"
nhosts=${#ranks_per_host[@]}
((nhosts <= 200)) || { echo "multihost: at most 200 hosts" >&2; exit 2; }
world=0
for n in "${ranks_per_host[@]}"; do world=$((world + n)); done

if [[ $launcher == commrun && -z $commrun ]]; then
  commrun=$(command -v commrun || true)
  [[ -n $commrun ]] || commrun="$(cd "$(dirname "$0")/.." && pwd)/build/bin/commrun"
fi
[[ $launcher == env || -x $commrun ]] || { echo "multihost: commrun not found (give --commrun PATH)" >&2; exit 2; }

skip() { echo "multihost: SKIP: $*" >&2; exit 77; }
((EUID == 0)) || skip "emulating hosts needs root (network namespaces, veth, mounts)"
for tool in ip unshare nsenter; do command -v $tool >/dev/null || skip "'$tool' is not installed (iproute2 / util-linux)"; done

# Namespace names: cmh.<rig pid>.<tag>.<sw|hK>. The pid lets a later rig
# recognise namespaces whose rig died without cleaning up.
prefix="cmh.$$.$tag"
master_port=29400

# Removes every namespace of a rig that no longer runs.
sweep_stale() {
  local ns pid
  for ns in $(ip netns list 2>/dev/null | awk '{print $1}' | grep '^cmh\.' || true); do
    pid=${ns#cmh.}; pid=${pid%%.*}
    [[ $pid =~ ^[0-9]+$ ]] || continue
    if ! kill -0 "$pid" 2>/dev/null; then
      for p in $(ip netns pids "$ns" 2>/dev/null); do kill -9 "$p" 2>/dev/null || true; done
      ip netns del "$ns" 2>/dev/null || true
    fi
  done
  for d in "${TMPDIR:-/tmp}"/cmh.*; do
    [[ -d $d ]] || continue
    pid=${d##*/cmh.}; pid=${pid%%.*}
    [[ $pid =~ ^[0-9]+$ ]] && ! kill -0 "$pid" 2>/dev/null && rm -rf "$d"
  done
  return 0
}

workdir=""
host_pids=()
cleaned=0
cleanup() {
  ((cleaned)) && return
  cleaned=1
  set +e
  # Every process inside a host (launchers, ranks, their children), by pid.
  local ns
  for ((k = 0; k < nhosts; k++)); do
    ns="$prefix.h$k"
    for p in $(ip netns pids "$ns" 2>/dev/null); do kill -9 "$p" 2>/dev/null; done
  done
  for p in "${host_pids[@]}"; do kill -9 "$p" 2>/dev/null; wait "$p" 2>/dev/null; done
  for ((k = 0; k < nhosts; k++)); do ip netns del "$prefix.h$k" 2>/dev/null; done
  # Deleting the switch namespace deletes the bridge and the remaining veth ends.
  ip netns del "$prefix.sw" 2>/dev/null
  [[ -n $workdir ]] && rm -rf "$workdir"
  local left
  left=$(ip netns list 2>/dev/null | awk '{print $1}' | grep -F "$prefix." || true)
  [[ -z $left ]] || echo "multihost: WARNING: could not remove namespaces: $left" >&2
}
trap cleanup EXIT
trap 'echo "multihost: interrupted; removing the hosts" >&2; exit 130' INT
trap 'echo "multihost: terminated; removing the hosts" >&2; exit 143' TERM HUP

sweep_stale
ip netns add "$prefix.sw" 2>/dev/null || skip "cannot create a network namespace here (ip netns add failed: no CAP_SYS_ADMIN?)"
ip -n "$prefix.sw" link add br0 type bridge
ip -n "$prefix.sw" link set br0 up
workdir=$(mktemp -d "${TMPDIR:-/tmp}/cmh.$$.XXXXXX")
{
  echo "127.0.0.1 localhost"
  for ((k = 0; k < nhosts; k++)); do echo "10.77.0.$((k + 1)) mh-h$k"; done
} >"$workdir/hosts"
for ((k = 0; k < nhosts; k++)); do
  ns="$prefix.h$k"
  ip netns add "$ns"
  ip -n "$prefix.sw" link add "v$k" type veth peer name mh0 netns "$ns"
  ip -n "$prefix.sw" link set "v$k" master br0 up
  ip -n "$ns" addr add "10.77.0.$((k + 1))/24" dev mh0
  ip -n "$ns" link set mh0 up
  ip -n "$ns" link set lo up
done

# The script a host's namespaces run: hostname, private /dev/shm and
# /etc/hosts, then the launcher.
cat >"$workdir/host.sh" <<'EOF'
set -eu
k=$1; shift
hostname "mh-h$k"
mount --make-rprivate /
mount -t tmpfs -o mode=1777 tmpfs /dev/shm
mount --bind "$MH_WORKDIR/hosts" /etc/hosts
exec "$@"
EOF

# One token per rig: the hosts' ranks agree on it, other rigs' ranks cannot join.
: "${COMM_STORE_TOKEN:=$(od -An -N16 -tx1 /dev/urandom | tr -d ' \n')}"
export COMM_STORE_TOKEN

offset=0
for ((k = 0; k < nhosts; k++)); do
  n=${ranks_per_host[$k]}
  mkdir "$workdir/tmp-h$k"
  env_k=(MH_WORKDIR="$workdir" TMPDIR="$workdir/tmp-h$k" UCX_NET_DEVICES=mh0 FI_TCP_IFACE=mh0 FI_NET_IFACE=mh0 COMM_IFACE="10.77.0.$((k + 1))"
         MH_HOST="$k" MH_HOSTS="$nhosts" MH_WORLD="$world" MH_RANK_OFFSET="$offset" MH_LOCAL_RANKS="$n"
         MH_MASTER="10.77.0.1:$master_port" "${extra_env[@]}")
  if [[ $launcher == commrun ]]; then
    cmd=("$commrun" --nnodes "$nhosts" --node-rank "$k" --master "10.77.0.1:$master_port" -n "$n"
         --rank-offset "$offset" --world-size "$world" --timeout "$timeout_s")
    [[ -n $allow_fail ]] && cmd+=(--allow-fail "$allow_fail")
    cmd+=(-- "$@")
  else
    # One process per rank, started by a shell that waits for all of them and
    # returns the first failure; MH_LOCAL_INDEX tells each rank which it is.
    cmd=(bash -c 'codes=0; pids=(); for ((i = 0; i < MH_LOCAL_RANKS; i++)); do MH_LOCAL_INDEX=$i "$@" & pids+=($!); done
                  for p in "${pids[@]}"; do wait "$p" || { c=$?; ((codes)) || codes=$c; }; done; exit $codes' mh "$@")
  fi
  ip netns exec "$prefix.h$k" env "${env_k[@]}" unshare --uts --ipc --mount --propagation private -- \
    sh "$workdir/host.sh" "$k" "${cmd[@]}" &
  host_pids+=($!)
  offset=$((offset + n))
done

# Wait for every host; stop the rest after the first failure or the deadline.
deadline=$((SECONDS + timeout_s + 15))
rc=0
remaining=$nhosts
declare -A done_pid=()
while ((remaining > 0)); do
  for p in "${host_pids[@]}"; do
    [[ -n ${done_pid[$p]:-} ]] && continue
    if ! kill -0 "$p" 2>/dev/null; then
      code=0; wait "$p" || code=$?
      done_pid[$p]=1
      remaining=$((remaining - 1))
      if ((code != 0 && rc == 0)); then
        rc=$code
        echo "multihost: a host's launcher exited with code $code; stopping the other hosts" >&2
        cleanup_deadline=$((SECONDS + 10))
        ((deadline > cleanup_deadline)) && deadline=$cleanup_deadline
      fi
    fi
  done
  if ((SECONDS >= deadline && remaining > 0)); then
    ((rc == 0)) && { rc=124; echo "multihost: job timed out after ${timeout_s} s" >&2; }
    break
  fi
  ((remaining > 0)) && sleep 0.2
done
exit $rc
