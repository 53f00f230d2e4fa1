# Library of the SLURM test-cluster harness (sourced by tests/cluster/testcluster).
# shellcheck shell=bash

# Everything below is derived from these settings; tests may override them through the environment.
# EXPANSE_TC_INSTANCE (1..9, default 1) lets several clusters run on one machine at once (the
# suite runs two): each instance has its own state, subnet, ports, bridge, network namespaces
# and cgroup tree, and `stop` of one never touches another. Instance 1 keeps the plain names.
TC_INSTANCE="${EXPANSE_TC_INSTANCE:-1}"
[[ "$TC_INSTANCE" =~ ^[1-9]$ ]] || {
  printf 'testcluster: error: EXPANSE_TC_INSTANCE must be 1..9, not "%s"\n' "$TC_INSTANCE" >&2
  exit 1
}
TC_TAG="$( ((TC_INSTANCE == 1)) || echo "$TC_INSTANCE")"
TC_STATE="${EXPANSE_TC_STATE:-/var/tmp/expanse-testcluster$TC_TAG}"
TC_SUBNET="${EXPANSE_TC_SUBNET:-10.$((76 + TC_INSTANCE)).0}" # a /24; the controller is .1, workerN .(10+N)
TC_PORT_BASE="${EXPANSE_TC_PORT_BASE:-$((16817 + 100 * (TC_INSTANCE - 1)))}"
TC_BRIDGE="${EXPANSE_TC_BRIDGE:-exptc${TC_TAG}0}"
# Neither may be a prefix of another instance's: `stop` deletes every namespace with the prefix.
TC_NETNS_PREFIX="exptc$TC_TAG-"
TC_CGROUP_NAME="expanse-testcluster$TC_TAG"
TC_CLUSTER_NAME="expansetc"
TC_SLURM_USER="${EXPANSE_TC_SLURM_USER:-slurm}"
TC_GPUS_PER_HOST=2

log() { printf 'testcluster: %s\n' "$*" >&2; }
die() {
  printf 'testcluster: error: %s\n' "$*" >&2
  exit 1
}

controller_name() { hostname -s; }
worker_name() { printf 'worker%d\n' "$1"; }
worker_addr() { printf '%s.%d' "$TC_SUBNET" $((10 + $1)); }
controller_addr() { printf '%s.1' "$TC_SUBNET"; }

# --- processes we start -------------------------------------------------------------------------
# Every process the harness starts is placed into cgroups under $TC_CGROUP_NAME in every cgroup-v1
# hierarchy, so `stop` can find each one (and every job process slurmd forked) and nothing else.

# Prints "mountpoint options" for every cgroup v1 hierarchy, e.g. "/sys/fs/cgroup/cpu cpu".
cgroup_v1_hierarchies() {
  awk '$3 == "cgroup" {
    n = split($4, o, ","); opts = "";
    for (i = 1; i <= n; i++) {
      if (o[i] ~ /^(rw|ro|relatime|nosuid|nodev|noexec|noatime|clone_children|xattr)$/) continue;
      opts = opts (opts == "" ? "" : ",") o[i];
    }
    print $2, opts }' /proc/mounts
}

cgroup_v2_unified() { awk '$3 == "cgroup2" { print $2; exit }' /proc/mounts; }

check_cgroups() {
  [[ -n "$(cgroup_v1_hierarchies)" ]] ||
    die "no cgroup v1 hierarchies are mounted; this harness needs a v1 or hybrid cgroup layout"
}

# Creates the cgroup GROUP (e.g. "worker1") below $TC_CGROUP_NAME in every hierarchy.
cgroup_create() {
  local group="$1" mp opts dir
  while read -r mp opts; do
    for dir in "$mp/$TC_CGROUP_NAME" "$mp/$TC_CGROUP_NAME/$group"; do
      [[ -d "$dir" ]] && continue
      mkdir "$dir"
      # A new cpuset is empty and refuses tasks until it inherits its parent's CPUs and nodes.
      if [[ -f "$dir/cpuset.cpus" ]]; then
        cat "$(dirname "$dir")/cpuset.cpus" >"$dir/cpuset.cpus"
        cat "$(dirname "$dir")/cpuset.mems" >"$dir/cpuset.mems"
      fi
    done
  done < <(cgroup_v1_hierarchies)
  local u
  u="$(cgroup_v2_unified)"
  [[ -n "$u" ]] && mkdir -p "$u/$TC_CGROUP_NAME/$group"
  return 0
}

# Prints the shell commands that move the running shell into GROUP in every hierarchy.
cgroup_join_script() {
  local group="$1" mp opts u
  while read -r mp opts; do
    printf 'echo $$ > %q\n' "$mp/$TC_CGROUP_NAME/$group/cgroup.procs"
  done < <(cgroup_v1_hierarchies)
  u="$(cgroup_v2_unified)"
  [[ -n "$u" ]] && printf 'echo $$ > %q\n' "$u/$TC_CGROUP_NAME/$group/cgroup.procs"
  return 0
}

# All PIDs in our cgroup tree (any hierarchy lists every process we started).
cgroup_all_pids() {
  local mp opts
  read -r mp opts < <(cgroup_v1_hierarchies)
  [[ -d "$mp/$TC_CGROUP_NAME" ]] || return 0
  find "$mp/$TC_CGROUP_NAME" -name cgroup.procs -exec cat {} + 2>/dev/null | sort -un
}

cgroup_remove_all() {
  local mp opts u
  while read -r mp opts; do
    [[ -d "$mp/$TC_CGROUP_NAME" ]] && find "$mp/$TC_CGROUP_NAME" -depth -type d -exec rmdir {} + 2>/dev/null
  done < <(cgroup_v1_hierarchies)
  u="$(cgroup_v2_unified)"
  [[ -n "$u" && -d "$u/$TC_CGROUP_NAME" ]] &&
    find "$u/$TC_CGROUP_NAME" -depth -type d -exec rmdir {} + 2>/dev/null
  return 0
}

# spawn GROUP NAME CMD... — starts CMD in the background inside GROUP's cgroups, logs to log/NAME.log.
spawn() {
  local group="$1" name="$2"
  shift 2
  cgroup_create "$group"
  setsid bash -c "$(cgroup_join_script "$group")"'
exec "$@"' spawn "$@" >>"$TC_STATE/log/$name.log" 2>&1 </dev/null &
  echo $! >"$TC_STATE/pids/$name.pid"
}

pid_of() { cat "$TC_STATE/pids/$1.pid" 2>/dev/null; }
alive() {
  local pid
  pid="$(pid_of "$1")" && [[ -n "$pid" ]] && kill -0 "$pid" 2>/dev/null
}

# --- hosts --------------------------------------------------------------------------------------
# A host is an "anchor" process that owns the host's namespaces; daemons and `exec` enter them.

host_list() {
  local n
  controller_name
  for ((n = 1; n <= TC_WORKERS; n++)); do worker_name "$n"; done
}

is_controller() { [[ "$1" == "$(controller_name)" ]]; }

net_setup() {
  ip link show "$TC_BRIDGE" >/dev/null 2>&1 || ip link add "$TC_BRIDGE" type bridge
  ip addr replace "$(controller_addr)/24" dev "$TC_BRIDGE"
  ip link set "$TC_BRIDGE" up
  local n host ns
  for ((n = 1; n <= TC_WORKERS; n++)); do
    host="$(worker_name "$n")"
    ns="$TC_NETNS_PREFIX$host"
    ip netns add "$ns"
    # The host's end of the pair is named like its namespace (at most 15 characters).
    ip link add "$ns" type veth peer name eth0 netns "$ns"
    ip link set "$ns" master "$TC_BRIDGE" up
    ip -n "$ns" addr add "$(worker_addr "$n")/24" dev eth0
    ip -n "$ns" link set lo up
    ip -n "$ns" link set eth0 up
    ip -n "$ns" route add default via "$(controller_addr)"
  done
}

net_teardown() {
  local ns
  for ns in $(ip netns list 2>/dev/null | awk '{print $1}' | grep "^$TC_NETNS_PREFIX" || true); do
    ip netns del "$ns" 2>/dev/null || log "could not delete network namespace $ns"
  done
  if ip link show "$TC_BRIDGE" >/dev/null 2>&1; then ip link del "$TC_BRIDGE"; fi
  return 0
}

# The anchor of HOST: unshares the namespaces, gives the host its hostname and own cgroup view,
# then sleeps so that the namespaces outlive any single daemon.
start_anchor() {
  local host="$1" init
  init="set -e
mount --make-rslave /
mount -t tmpfs -o mode=755 cgroup_root /sys/fs/cgroup
$(cgroup_v1_hierarchies | while read -r mp opts; do
    printf 'mkdir -p %q && mount -t cgroup -o %q cgroup %q\n' "$mp" "$opts" "$mp"
  done)
$(u="$(cgroup_v2_unified)"; [[ -n "$u" ]] && printf 'mkdir -p %q && mount -t cgroup2 cgroup2 %q\n' "$u" "$u")
"
  # Node-local Expanse paths are private to each host, as on real nodes: /etc/expanse
  # (daemon.env) and /var/lib/expanse (hook events, sampler state, outbox).
  local local_dir="$TC_STATE/hosts/$host/local"
  mkdir -p "$local_dir/etc-expanse" "$local_dir/var-lib-expanse" /etc/expanse /var/lib/expanse
  init+="mount --bind $(printf %q "$local_dir/etc-expanse") /etc/expanse
mount --bind $(printf %q "$local_dir/var-lib-expanse") /var/lib/expanse
"
  if is_controller "$host"; then
    spawn "$host" "anchor-$host" unshare --mount --cgroup -- bash -c "$init
exec sleep infinity"
  else
    spawn "$host" "anchor-$host" nsenter --net="/run/netns/$TC_NETNS_PREFIX$host" -- \
      unshare --uts --mount --cgroup -- bash -c "hostname $host
$init
mount --bind $(printf %q "$TC_STATE/etc/hosts") /etc/hosts
exec sleep infinity"
  fi
}

# Waits until the anchor has finished its set-up (its cgroup mounts exist in its namespace).
wait_anchor() {
  local host="$1" pid i
  pid="$(pid_of "anchor-$host")"
  for ((i = 0; i < 100; i++)); do
    if [[ "$(readlink "/proc/$pid/exe" 2>/dev/null)" == */sleep ]]; then return 0; fi
    kill -0 "$pid" 2>/dev/null || break
    sleep 0.05
  done
  die "host $host did not come up; see $TC_STATE/log/anchor-$host.log"
}

# host_run HOST CMD... — runs CMD inside HOST's namespaces and cgroups, in the foreground.
host_run() {
  local host="$1" pid
  shift
  pid="$(pid_of "anchor-$host")" || die "unknown host '$host' (is the cluster started?)"
  kill -0 "$pid" 2>/dev/null || die "host '$host' is not running"
  local ns_flags=(--mount --cgroup)
  is_controller "$host" || ns_flags+=(--net --uts)
  bash -c "$(cgroup_join_script "$host")"'
exec nsenter -t "$0" "${@}"' "$pid" "${ns_flags[@]}" -- "$@"
}

# host_spawn HOST NAME CMD... — like host_run, in the background, tracked as NAME.
host_spawn() {
  local host="$1" name="$2" pid
  shift 2
  pid="$(pid_of "anchor-$host")"
  local ns_flags=(--mount --cgroup)
  is_controller "$host" || ns_flags+=(--net --uts)
  spawn "$host" "$name" nsenter -t "$pid" "${ns_flags[@]}" -- "$@"
}
