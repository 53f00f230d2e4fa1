#!/usr/bin/env bash
# `stop` ends every process the harness started (and the jobs' processes) and removes its network
# namespaces, bridge, cgroups and state directory; nothing of the cluster is left behind.
source "$(dirname "$0")/../lib/testlib.sh"

# Every process the harness started, and every job process, lives in its cgroup tree.
started="$(cat /sys/fs/cgroup/pids/expanse-testcluster/*/cgroup.procs /sys/fs/cgroup/pids/expanse-testcluster/*/*/cgroup.procs 2>/dev/null | sort -u || true)"
[[ -n "$started" ]] || fail "no processes found in the cluster's cgroups before stop (is it running?)"
pass "$(wc -l <<<"$started") processes of the cluster before stop"

"$TESTCLUSTER" stop

bridge="${EXPANSE_TC_BRIDGE:-exptc0}"
left=""
for pid in $started; do
  [[ -e /proc/$pid ]] && [[ "$(awk '{print $3}' /proc/$pid/stat 2>/dev/null)" != Z ]] && left+="$pid($(tr '\0' ' ' </proc/$pid/cmdline)) "
done
assert_eq "" "$left" "processes of the cluster left running"
assert_eq "" "$(ip netns list | grep '^exptc-' || true)" "network namespaces left"
ip link show "$bridge" >/dev/null 2>&1 && fail "bridge $bridge still exists"
pass "bridge $bridge removed"
assert_eq "" "$(ls -d /sys/fs/cgroup/*/expanse-testcluster 2>/dev/null || true)" "cgroups left"
[[ -e "$EXPANSE_TC_STATE" ]] && fail "state directory $EXPANSE_TC_STATE still exists"
pass "state directory removed"
out="$("$TESTCLUSTER" stop 2>&1)" || fail "a second stop failed: $out"
pass "a second stop is harmless"
