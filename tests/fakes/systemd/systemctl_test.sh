#!/usr/bin/env bash
# Checks the fake systemctl (and journalctl) against what the real ones do for the subset the
# installer uses, without the SLURM cluster: units in a temporary directory, run for real.
# Needs root: the units run as `nobody` with ambient capabilities.
set -euo pipefail

HERE="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
SYSTEMCTL="$HERE/systemctl"
JOURNALCTL="$HERE/journalctl"

fail() {
  printf 'FAIL [systemctl_test]: %s\n' "$*" >&2
  exit 1
}
pass() { printf 'ok   [systemctl_test]: %s\n' "$*"; }
assert_eq() { # expected actual what
  [[ "$1" == "$2" ]] || fail "$3: expected '$1', got '$2'"
  pass "$3"
}
assert_contains() { # haystack needle what
  [[ "$1" == *"$2"* ]] || fail "$3: '$2' not found in: $1"
  pass "$3"
}
# wait_until SECONDS WHAT CMD...: a deadline for slow machines, not a timing assertion.
wait_until() {
  local seconds="$1" what="$2" i
  shift 2
  for ((i = 0; i < seconds * 20; i++)); do
    if "$@" >/dev/null 2>&1; then return 0; fi
    sleep 0.05
  done
  fail "timed out after ${seconds}s waiting for: $what"
}
gone() { ! kill -0 "$1" 2>/dev/null; }
# Runs the fake; sets $out (stdout and stderr) and $rc.
sc() {
  rc=0
  out="$("$SYSTEMCTL" "$@" 2>&1)" || rc=$?
}

[[ $EUID -eq 0 ]] || fail "needs root (units run as nobody with ambient capabilities)"
id nobody >/dev/null 2>&1 || fail "needs the 'nobody' account"
# CAP_SYS_PTRACE is bit 19; a container that dropped it cannot grant it to a service.
(($(grep CapBnd /proc/self/status | awk '{print "0x" $2}') & (1 << 19))) ||
  fail "CAP_SYS_PTRACE is not in this process's bounding set; run in a container that keeps it"

tmp="$(mktemp -d /tmp/fake-systemctl-test.XXXXXX)"
chmod 755 "$tmp"
export FAKE_SYSTEMD_UNIT_DIR="$tmp/units" FAKE_SYSTEMD_STATE_DIR="$tmp/state"
export FAKE_SYSTEMD_BOOTED_MARKER="$tmp/run-systemd-system"
mkdir -p "$FAKE_SYSTEMD_UNIT_DIR" "$FAKE_SYSTEMD_BOOTED_MARKER" "$tmp/out"
chmod 777 "$tmp/out"
cleanup() {
  local unit
  for unit in "$FAKE_SYSTEMD_UNIT_DIR"/*.service; do
    "$SYSTEMCTL" stop "$(basename "$unit")" >/dev/null 2>&1 || true
  done
  rm -rf "$tmp"
}
trap cleanup EXIT

# --- a unit like the installer's, run as nobody ---------------------------------------------

cat >"$tmp/report.sh" <<'EOF'
#!/bin/bash
# Records who and what it runs as, keeps a second process in its session, then waits.
out="$1"
shift
{
  echo "uid=$(id -u)"
  printf 'arg=%s\n' "$@"
  env | sort | sed 's/^/env:/'
  grep -e '^Cap' -e '^NoNewPrivs' /proc/self/status
  echo "cwd=$PWD"
  sleep 600 &
  echo "child=$!"
  echo "pid=$$"
} >"$out.tmp"
mv "$out.tmp" "$out"
exec sleep 601
EOF
chmod 755 "$tmp/report.sh"

cat >"$tmp/daemon.env" <<'EOF'
# an operator's comment
FROM_FILE="file value"
OVERRIDDEN=by-file
export IGNORED=1
EOF

write_reporter_unit() { # greeting
  cat >"$FAKE_SYSTEMD_UNIT_DIR/reporter.service" <<EOF
[Unit]
Description=Reporter for the fake systemctl test
After=network-online.target

[Service]
Type=simple
User=nobody
# A continuation line, as systemd joins them.
ExecStart=$tmp/report.sh $tmp/out/report "two words \\"quoted\\"" 'dollar \$\$HOME' \\
  \${FROM_FILE} \$SPLIT 100%%
Environment="GREETING=$1" OVERRIDDEN=by-unit
Environment=SPLIT="a b"
EnvironmentFile=$tmp/daemon.env
EnvironmentFile=-$tmp/missing.env
WorkingDirectory=$tmp
CapabilityBoundingSet=CAP_SYS_PTRACE CAP_NET_BIND_SERVICE
AmbientCapabilities=CAP_SYS_PTRACE
NoNewPrivileges=yes
Restart=on-failure
RestartSec=1s
ProtectSystem=strict

[Install]
WantedBy=multi-user.target
EOF
}
write_reporter_unit "hello world"
report="$tmp/out/report"
field() { grep -m1 "^$1" "$report" | cut -d= -f2-; }
status_field() { awk -v key="$1:" '$1 == key { print $2 }' "$report"; }

export LEAKED_FROM_CALLER=1
sc enable --now reporter
assert_eq 0 "$rc" "enable --now exits 0 ($out)"
assert_contains "$out" "Created symlink" "enable says what it linked"
wait_until 10 "the reporter to write its report" test -f "$report"

assert_eq 65534 "$(field uid=)" "ExecStart runs as User=nobody"
# shellcheck disable=SC2016 # a literal $HOME: $$ in ExecStart= is one '$'
assert_eq "$(printf 'arg=%s\n' 'two words "quoted"' 'dollar $HOME' 'file value' a b '100%')" \
  "$(grep '^arg=' "$report")" "ExecStart quoting, escapes, \$\$, \${VAR}, \$VAR splitting, %%"
assert_eq "hello world" "$(field env:GREETING=)" "Environment= with a quoted assignment"
assert_eq "file value" "$(field env:FROM_FILE=)" "EnvironmentFile= value with quotes"
assert_eq "by-file" "$(field env:OVERRIDDEN=)" "EnvironmentFile= overrides Environment="
assert_eq "" "$(field env:IGNORED=)" "an 'export' line is dropped, as systemd drops it"
assert_eq "" "$(field env:LEAKED_FROM_CALLER=)" "the caller's environment does not leak in"
assert_eq "/nonexistent" "$(field env:HOME=)" "HOME is the user's home"
assert_eq "$tmp" "$(field cwd=)" "WorkingDirectory="
assert_eq 0000000000080000 "$(status_field CapAmb)" "CapAmb holds CAP_SYS_PTRACE only"
assert_eq 0000000000080400 "$(status_field CapBnd)" \
  "CapBnd is CAP_SYS_PTRACE + CAP_NET_BIND_SERVICE"
assert_eq 1 "$(status_field NoNewPrivs)" "NoNewPrivileges=yes"

main_pid="$(field pid=)"
child_pid="$(field child=)"
sc is-active reporter
assert_eq "0 active" "$rc $out" "is-active"
sc is-enabled reporter
assert_eq "0 enabled" "$rc $out" "is-enabled"
sc show -p MainPID --value reporter
assert_eq "$main_pid" "$out" "show -p MainPID --value is the main process"
sc show -p User reporter
assert_eq "User=nobody" "$out" "show -p User"
sc show reporter -p User -p AmbientCapabilities,CapabilityBoundingSet -p ActiveState
assert_eq "$(printf '%s\n' 'CapabilityBoundingSet=cap_net_bind_service cap_sys_ptrace' \
  'AmbientCapabilities=cap_sys_ptrace' 'User=nobody' 'ActiveState=active')" "$out" \
  "show prints properties in systemd's order, whatever order -p names them in"
sc show -p NoSuchProperty reporter
assert_eq 1 "$rc" "show refuses a property it does not know"
sc status reporter --no-pager
assert_eq 0 "$rc" "status exits 0 for an active unit"
assert_contains "$out" "Active: active (running)" "status shows the state"
assert_contains "$out" "Main PID: $main_pid" "status shows the main pid"
sc cat reporter
assert_contains "$out" "# $FAKE_SYSTEMD_UNIT_DIR/reporter.service" "cat names the file"
assert_contains "$out" "AmbientCapabilities=CAP_SYS_PTRACE" "cat prints the unit"
sc list-unit-files 'reporter*'
assert_contains "$out" "reporter.service enabled" "list-unit-files"
journal="$("$JOURNALCTL" -u reporter --since "5 minutes ago" --no-pager)"
assert_contains "$journal" "Started Reporter for the fake systemctl test." "journalctl -u"

# A unit rewritten without daemon-reload keeps its old configuration, as in systemd.
write_reporter_unit "changed"
rm "$report"
sc restart reporter
assert_eq 0 "$rc" "restart exits 0"
assert_contains "$out" "changed on disk. Run 'systemctl daemon-reload'" \
  "restart warns about the unreloaded unit file"
wait_until 10 "the restarted reporter" test -f "$report"
assert_eq "hello world" "$(field env:GREETING=)" "restart without daemon-reload: old settings"
wait_until 10 "the first main process to end" gone "$main_pid"
rm "$report"
sc daemon-reload
sc restart reporter
wait_until 10 "the reporter after daemon-reload" test -f "$report"
assert_eq "changed" "$(field env:GREETING=)" "restart after daemon-reload: new settings"

main_pid="$(field pid=)"
child_pid="$(field child=)"
sc stop reporter
assert_eq 0 "$rc" "stop exits 0"
gone "$main_pid" || fail "the main process $main_pid outlived stop"
gone "$child_pid" || fail "the session member $child_pid outlived stop"
pass "stop ends the main process and the rest of its session"
sc is-active reporter
assert_eq "3 inactive" "$rc $out" "is-active after stop"
sc show -p MainPID -p Result reporter
assert_eq "$(printf 'MainPID=0\nResult=success')" "$out" "a stopped unit has no main pid"
sc disable reporter
assert_eq 0 "$rc" "disable exits 0"
sc is-enabled reporter
assert_eq "1 disabled" "$rc $out" "is-enabled after disable"

# --- how units end ---------------------------------------------------------------------------

unit() { # name, then [Service] lines
  local name="$1"
  shift
  printf '[Service]\n' >"$FAKE_SYSTEMD_UNIT_DIR/$name.service"
  printf '%s\n' "$@" >>"$FAKE_SYSTEMD_UNIT_DIR/$name.service"
}

unit exits3 'ExecStart=/bin/sh -c "exit 3"'
sc start exits3
assert_eq 0 "$rc" "start of a Type=simple unit succeeds even if it exits at once"
wait_until 10 "exits3 to fail" "$SYSTEMCTL" is-failed -q exits3
sc is-active exits3
assert_eq "3 failed" "$rc $out" "is-active of a unit whose process exited 3"
sc show -p Result -p ExecMainStatus exits3
assert_eq "$(printf 'Result=exit-code\nExecMainStatus=3')" "$out" "the exit status is recorded"

unit crashes "ExecStart=/bin/sh -c 'echo run >>$tmp/out/crash-runs; exit 1'" \
  Restart=on-failure RestartSec=10ms
sc start crashes
wait_until 20 "the start limit" "$SYSTEMCTL" is-failed -q crashes
assert_eq 5 "$(wc -l <"$tmp/out/crash-runs")" "Restart=on-failure restarts until StartLimitBurst=5"
sc show -p Result crashes
assert_eq "Result=start-limit-hit" "$out" "then the unit fails with start-limit-hit"

# $$$$ is the shell's $$ once systemd has turned each $$ into $.
ignores_term="trap \"\" TERM; echo \$\$\$\$ >$tmp/out/stubborn; exec sleep 600"
unit stubborn "ExecStart=/bin/sh -c '$ignores_term'" TimeoutStopSec=200ms
sc start stubborn
wait_until 10 "stubborn to record its pid" test -s "$tmp/out/stubborn"
sc stop stubborn
gone "$(cat "$tmp/out/stubborn")" || fail "stop did not SIGKILL a process that ignores SIGTERM"
sc show -p Result -p ActiveState stubborn
assert_eq "$(printf 'Result=timeout\nActiveState=failed')" "$out" "stop escalates to SIGKILL"

# --- loud refusals ---------------------------------------------------------------------------

unit prefixed 'ExecStart=-/bin/true'
sc start prefixed
assert_eq 1 "$rc" "an ExecStart= prefix is refused"
assert_contains "$out" "prefix '-' is not supported" "with a message naming it"
unit prestart 'ExecStart=/bin/true' 'ExecStartPre=/bin/true'
sc start prestart
assert_contains "$out" "ExecStartPre= is not supported" "a setting that changes what runs"
unit noenv 'ExecStart=/bin/true' 'EnvironmentFile=/nonexistent/daemon.env'
sc start noenv
assert_eq 1 "$rc" "a missing EnvironmentFile= without '-' fails the start"
assert_contains "$out" "/nonexistent/daemon.env" "naming the file"
sc frobnicate reporter
assert_eq 1 "$rc" "an unknown command fails"
sc start --frobnicate reporter
assert_eq 1 "$rc" "an unknown option fails"
sc start nosuch
assert_eq 5 "$rc" "start of a missing unit exits 5"
sc is-enabled nosuch
assert_eq 1 "$rc" "is-enabled of a missing unit exits 1"
rc=0
out="$(FAKE_SYSTEMD_BOOTED_MARKER="$tmp/absent" "$SYSTEMCTL" is-active reporter 2>&1)" || rc=$?
assert_eq 1 "$rc" "without /run/systemd/system it refuses to operate"
assert_contains "$out" "has not been booted with systemd" "as systemctl says it"

pass "all checks passed"
