#!/usr/bin/env bash
# Two "hosts" on one machine for multi-host MPI runs: network namespaces joined by a veth pair,
# each with its own host name and its own local disk, and an Open MPI launch agent that starts
# commands on a host by entering it (no sshd).
#
#   hosts.sh up DIR [HOST_A HOST_B]   make the hosts (default names hosta, hostb); root only
#   hosts.sh exec DIR HOST CMD...     run CMD on HOST (with the launch agent set for mpirun)
#   hosts.sh kill DIR HOST            SIGKILL every process running on HOST
#   hosts.sh link DIR HOST down|up    take HOST's network link down, or bring it back up
#   hosts.sh down DIR                 stop what still runs on the hosts, remove them and DIR
#
# `up` writes DIR/hosts.txt (an Open MPI hostfile: each host with 2 slots) and DIR/agent (the
# launch agent, `plm_rsh_agent`). A two-host job is started on the first host, as a user starts
# mpirun on a login or head node:
#
#   hosts.sh exec DIR hosta mpirun --hostfile DIR/hosts.txt -np 4 tessel train ...
#
# Each host sees the machine's file system (a shared file system) and its own folder at
# DIR/local (its local disk; from outside, DIR/disk/HOST). The hosts' addresses are
# 10.77.0.1 and 10.77.0.2 on the veth pair, which connects the two namespaces and nothing
# else: no traffic leaves the machine. Namespace and link names carry a random id, so several
# harnesses (parallel tests) and leftovers of a killed one do not collide. `up` undoes what it
# made when it fails; `down` may be run more than once.
#
# Exit code 77 (and a line saying why) when this machine cannot make the hosts: not root,
# `ip` or `unshare` missing, or network namespaces refused (a container without the
# privilege). Tests turn 77 into a skip.
set -euo pipefail

readonly kSubnet=10.77.0
readonly kSkip=77

die() {
  echo "hosts.sh: $*" >&2
  exit 1
}
skip() {
  echo "hosts.sh: cannot make hosts on this machine: $*" >&2
  exit "$kSkip"
}
usage() {
  sed -n '2,/^set -euo/p' "$0" | sed -e '/^set -euo/d' -e 's/^# \{0,1\}//' >&2
  exit 2
}

# The harness state that `up` wrote: id, host names, namespace and link names.
load_state() {
  local dir="$1"
  [ -f "$dir/state" ] || die "$dir is not a harness folder (no $dir/state; run hosts.sh up $dir)"
  HOSTS=() NAMESPACES=() LINKS=()
  # shellcheck source=/dev/null
  source "$dir/state"
}

# The index (0 or 1) of host name $1 in the loaded state.
host_index() {
  local i
  for i in 0 1; do
    if [ "${HOSTS[$i]}" = "$1" ]; then
      echo "$i"
      return
    fi
  done
  die "unknown host '$1' (the hosts are ${HOSTS[*]})"
}

# Namespaces an earlier harness left behind when it was killed outright (SIGKILL runs no trap
# and no `down`): each namespace made by `up` names its owner (the process that ran `up`) in
# /run/tessel-hosts/NAME; one whose owner is gone and in which nothing runs is removed, with its
# link. Harnesses running beside this one keep theirs (their owners are alive).
remove_stale() {
  local namespace owner pids
  for namespace in $(ip netns list 2>/dev/null | awk '{print $1}' | grep '^ts-[0-9a-f]\{6\}-' || true); do
    owner="$(cat "/run/tessel-hosts/$namespace" 2>/dev/null || true)"
    [[ "$owner" =~ ^[0-9]+$ ]] || continue
    kill -0 "$owner" 2>/dev/null && continue
    pids="$(ip netns pids "$namespace" 2>/dev/null || true)"
    [ -z "$pids" ] || continue
    echo "hosts.sh: removing $namespace, left by process $owner (gone)" >&2
    ip netns delete "$namespace" 2>/dev/null || true
    rm -rf "/etc/netns/$namespace" "/run/tessel-hosts/$namespace"
    local id="${namespace#ts-}"
    id="${id%%-*}"
    ip link delete "tv${id}a" 2>/dev/null || true
    ip link delete "tv${id}b" 2>/dev/null || true
  done
}

cmd_up() {
  [ $# -ge 1 ] || usage
  local dir="$1"
  local -a hosts=("${2:-hosta}" "${3:-hostb}")
  [ "${hosts[0]}" != "${hosts[1]}" ] || die "the two hosts need different names"
  local h
  for h in "${hosts[@]}"; do
    [[ "$h" =~ ^[a-z][a-z0-9-]{0,30}$ ]] ||
      die "host name '$h': use lower-case letters, digits and '-' (a DNS label)"
  done
  [ "$(id -u)" = 0 ] || skip "network namespaces need root (this is uid $(id -u))"
  command -v ip >/dev/null || skip "the ip command (iproute2) is missing"
  command -v unshare >/dev/null || skip "the unshare command (util-linux) is missing"
  if [ -e "$dir" ] && [ -n "$(ls -A "$dir" 2>/dev/null)" ]; then
    die "$dir exists and is not empty"
  fi
  remove_stale
  mkdir -p "$dir"
  dir="$(cd "$dir" && pwd)"
  local id
  id="$(od -An -N3 -tx1 /dev/urandom | tr -d ' \n')"
  local -a ns=("ts-$id-${hosts[0]}" "ts-$id-${hosts[1]}") links=("tv${id}a" "tv${id}b")
  # Written first, so that `down` (also the trap below) finds whatever part was made.
  cat >"$dir/state" <<EOF
ID=$id
HOSTS=(${hosts[0]} ${hosts[1]})
NAMESPACES=(${ns[0]} ${ns[1]})
LINKS=(${links[0]} ${links[1]})
EOF
  # Whatever way up ends before the hosts are complete (a failed command, die), it undoes
  # what it made.
  trap 'echo "hosts.sh: up failed; removing what it made" >&2
    cmd_down "$dir" >/dev/null 2>&1 || true' EXIT
  local why
  if ! why="$(ip netns add "${ns[0]}" 2>&1)"; then
    trap - EXIT
    cmd_down "$dir" >/dev/null 2>&1 || true
    skip "ip netns add refused (${why:-no reason given})"
  fi
  ip netns add "${ns[1]}"
  ip link add "${links[0]}" type veth peer name "${links[1]}"
  local i
  for i in 0 1; do
    ip link set "${links[$i]}" netns "${ns[$i]}"
    ip -n "${ns[$i]}" link set lo up
    ip -n "${ns[$i]}" addr add "$kSubnet.$((i + 1))/24" dev "${links[$i]}"
    ip -n "${ns[$i]}" link set "${links[$i]}" up
    # `ip netns exec` mounts each file of /etc/netns/NAME over /etc: the host's names.
    mkdir -p "/etc/netns/${ns[$i]}"
    {
      echo "127.0.0.1 localhost"
      echo "$kSubnet.1 ${hosts[0]}"
      echo "$kSubnet.2 ${hosts[1]}"
    } >"/etc/netns/${ns[$i]}/hosts"
    echo "${hosts[$i]}" >"/etc/netns/${ns[$i]}/hostname"
    # Not under /etc/netns/NAME: `ip netns exec` would mount it over /etc.
    mkdir -p /run/tessel-hosts
    echo "$PPID" >"/run/tessel-hosts/${ns[$i]}"
    mkdir -p "$dir/disk/${hosts[$i]}"
  done
  mkdir -p "$dir/local"
  printf '%s slots=2\n' "${hosts[@]}" >"$dir/hosts.txt"
  local self
  self="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)/$(basename "${BASH_SOURCE[0]}")"
  cat >"$dir/agent" <<EOF
#!/usr/bin/env bash
# Open MPI launch agent (plm_rsh_agent) of the hosts in this folder: \`agent HOST CMD...\`
# runs CMD on HOST as ssh would (its words joined into one shell command).
exec bash "$self" _agent "$dir" "\$@"
EOF
  chmod +x "$dir/agent"
  # Both ends carry traffic (a fresh pair can take a moment to come up).
  local tries=0
  until ip -n "${ns[0]}" -o link show "${links[0]}" | grep -q 'state UP' &&
    ip -n "${ns[1]}" -o link show "${links[1]}" | grep -q 'state UP'; do
    tries=$((tries + 1))
    [ "$tries" -lt 50 ] || die "the link between ${hosts[0]} and ${hosts[1]} did not come up"
    sleep 0.1
  done
  trap - EXIT
  echo "hosts.sh: hosts ${hosts[0]} ($kSubnet.1) and ${hosts[1]} ($kSubnet.2) are up;" \
    "hostfile $dir/hosts.txt, launch agent $dir/agent"
}

# Runs argv "$@" on host $2 of harness $1: its network namespace, a UTS namespace with its
# host name, and its local disk mounted at DIR/local (`ip netns exec` already gives the
# command a mount namespace of its own, so the mount stays inside).
enter() {
  local dir="$1" host="$2"
  shift 2
  load_state "$dir"
  local i
  i="$(host_index "$host")"
  # shellcheck disable=SC2016 # the inner script's own arguments
  exec ip netns exec "${NAMESPACES[$i]}" unshare --uts -- bash -c \
    'hostname "$1" && mount --bind "$2" "$3" || exit 1; shift 3; exec "$@"' \
    hosts.sh "$host" "$dir/disk/$host" "$dir/local" "$@"
}

cmd_exec() {
  [ $# -ge 3 ] || usage
  local dir
  dir="$(cd "$1" && pwd)"
  export OMPI_MCA_plm_rsh_agent="$dir/agent"
  enter "$dir" "${@:2}"
}

# The launch agent: Open MPI calls `agent HOST WORD...` with the daemon's command line in
# words for a remote shell, as it would call ssh.
cmd_agent() {
  local dir="$1" host="$2"
  shift 2
  enter "$dir" "$host" bash -c "$*"
}

cmd_kill() {
  [ $# -eq 2 ] || usage
  load_state "$1"
  local i pids
  i="$(host_index "$2")"
  pids="$(ip netns pids "${NAMESPACES[$i]}" 2>/dev/null || true)"
  if [ -n "$pids" ]; then
    # shellcheck disable=SC2086
    kill -9 $pids 2>/dev/null || true
  fi
  echo "hosts.sh: killed $(wc -w <<<"$pids") processes on $2"
}

cmd_link() {
  if [ $# -ne 3 ] || { [ "$3" != down ] && [ "$3" != up ]; }; then usage; fi
  load_state "$1"
  local i
  i="$(host_index "$2")"
  ip -n "${NAMESPACES[$i]}" link set "${LINKS[$i]}" "$3"
}

cmd_down() {
  [ $# -eq 1 ] || usage
  local dir="$1"
  [ -e "$dir" ] || return 0
  load_state "$dir"
  local i pids
  for i in 0 1; do
    local namespace="${NAMESPACES[$i]}"
    if ip netns list 2>/dev/null | grep -qw "$namespace"; then
      pids="$(ip netns pids "$namespace" 2>/dev/null || true)"
      if [ -n "$pids" ]; then
        # shellcheck disable=SC2086
        kill -9 $pids 2>/dev/null || true
      fi
      ip netns delete "$namespace" 2>/dev/null || true
    fi
    rm -rf "/etc/netns/$namespace" "/run/tessel-hosts/$namespace"
  done
  # Deleting a namespace deletes the veth end inside it, and with it the pair; an end not yet
  # moved into a namespace (a failed up) is removed here.
  for i in 0 1; do ip link delete "${LINKS[$i]}" 2>/dev/null || true; done
  rm -rf "$dir"
}

[ $# -ge 1 ] || usage
command="$1"
shift
case "$command" in
  up) cmd_up "$@" ;;
  exec) cmd_exec "$@" ;;
  kill) cmd_kill "$@" ;;
  link) cmd_link "$@" ;;
  down) cmd_down "$@" ;;
  _agent) cmd_agent "$@" ;;
  -h | --help | help) usage ;;
  *) echo "hosts.sh: unknown command '$command'" >&2; usage ;;
esac
