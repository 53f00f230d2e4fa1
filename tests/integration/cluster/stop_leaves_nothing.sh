#!/usr/bin/env bash
# `stop` ends every process the harness started (and the jobs' processes) and removes its network
# namespaces, bridge, cgroups and state directory; nothing of the cluster is left behind.
source "$(dirname "$0")/../lib/testlib.sh"

# Every process the harness started, and every job process, lives in its cgroup tree (this
# instance's only: another cluster may be running beside it and must be left alone).
cg="/sys/fs/cgroup/pids/$EXPANSE_TC_CGROUP"
started="$(cat "$cg"/*/cgroup.procs "$cg"/*/*/cgroup.procs 2>/dev/null | sort -u || true)"
[[ -n "$started" ]] || fail "no processes found in the cluster's cgroups before stop (is it running?)"
pass "$(wc -l <<<"$started") processes of the cluster before stop"

"$TESTCLUSTER" stop

bridge="$EXPANSE_TC_BRIDGE"
# Processes still alive (not zombies), with their command lines. A process may exit between any
# two of these reads, so each read tolerates its file vanishing.
still_running() {
  local pid state cmd out=""
  for pid in $started; do
    state="$(awk '{print $3}' "/proc/$pid/stat" 2>/dev/null || true)"
    [[ -n "$state" && "$state" != Z ]] || continue
    cmd="$({ tr '\0' ' ' <"/proc/$pid/cmdline"; } 2>/dev/null || true)"
    out+="$pid($cmd) "
  done
  echo "$out"
}
# A killed process can take a moment to be gone (an exiting sanitizer build flushes its report).
left="$(still_running)"
for _ in $(seq 1 25); do
  [[ -z "$left" ]] && break
  sleep 0.2
  left="$(still_running)"
done
assert_eq "" "$left" "processes of the cluster left running"
assert_eq "" "$(ip netns list | grep "^$EXPANSE_TC_NETNS_PREFIX" || true)" "network namespaces left"
ip link show "$bridge" >/dev/null 2>&1 && fail "bridge $bridge still exists"
pass "bridge $bridge removed"
assert_eq "" "$(ls -d /sys/fs/cgroup/*/"$EXPANSE_TC_CGROUP" 2>/dev/null || true)" "cgroups left"
[[ -e "$EXPANSE_TC_STATE" ]] && fail "state directory $EXPANSE_TC_STATE still exists"
pass "state directory removed"
out="$("$TESTCLUSTER" stop 2>&1)" || fail "a second stop failed: $out"
pass "a second stop is harmless"
