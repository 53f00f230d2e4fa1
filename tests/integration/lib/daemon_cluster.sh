# Expanse wired into the real test cluster the way an install leaves it, for the daemon tests:
# a real expanse-server with a registered compute, Prolog/Epilog hooks calling
# `expanse-daemon hook` with sampler bootstrap, fake NVML scenarios on the workers, and a
# controller daemon run from the shared prefix. Source after testlib.sh; set BUILD first.
#
#   dc_setup                 everything above except the controller; sets DIR, prefix, w1, w2
#   dc_controller_start      starts the controller daemon (log appended to $DIR/controller.log)
#   dc_controller_kill9      SIGKILL, as a crash would
#   dc_cleanup               stops what the test started and restores slurm.conf (EXIT trap)
#   dc_finish                dc_cleanup, then removes $DIR (a passing test's last step)
#   dc_gpu_scenario HOST JSON_GPUS   writes HOST's fake NVML scenario
#   dc_job JOB               the server's record of JOB
#   dc_wait_job SECONDS JOB JQ WHAT  polls the record until `jq -e JQ` holds
# shellcheck shell=bash

SERVER="$BUILD/bin/expanse-server"
FAKE_NVML="$BUILD/fakes/nvml/libnvidia-ml.so.1"
source "$(dirname "${BASH_SOURCE[0]}")/expanse_server.sh"

DIR="$(shared_scratch)"
prefix="$DIR/prefix"
ctl_pid=""
read -r w1 w2 _ <<<"$EXPANSE_TC_WORKERS"

dc_controller_start() {
  "$prefix/bin/expanse-daemon" --role controller --config "$DIR/config.json" \
    --shared-prefix "$prefix" --interval 1s --flush-interval 2s --heartbeat-interval 2s \
    --env-file "$DIR/daemon.env" --state-dir "$DIR/ctl" --events-dir "$DIR/ctl/events" \
    --control-dir "$DIR/ctl/control" --nvml-library "$FAKE_NVML" \
    --gres-conf "$(dirname "$SLURM_CONF")/gres.conf" \
    >>"$DIR/controller.log" 2>&1 &
  ctl_pid=$!
}

dc_controller_kill9() {
  [[ -n "$ctl_pid" ]] || return 0
  kill -9 "$ctl_pid" 2>/dev/null || true
  wait "$ctl_pid" 2>/dev/null || true
  ctl_pid=""
}

# Runs from the EXIT trap under `set -e`: every step must tolerate what is already gone.
dc_cleanup() {
  if [[ -n "$ctl_pid" ]]; then
    kill "$ctl_pid" 2>/dev/null || true
    for _ in $(seq 1 50); do kill -0 "$ctl_pid" 2>/dev/null || break; sleep 0.2; done
    kill -9 "$ctl_pid" 2>/dev/null || true
  fi
  server_stop || true
  # The samplers the Prologs started run inside the worker namespaces.
  # ([e] keeps pkill from matching the command line of the shell that runs it.)
  # They are waited for: one still flushing would write into the spool while dc_finish removes
  # it ("rm: cannot remove ...: Directory not empty" failed a passing test).
  for w in $EXPANSE_TC_WORKERS; do
    "$TESTCLUSTER" exec "$w" -- bash -c '
      pkill -f "$1/bin/[e]xpanse-daemon" || exit 0
      for _ in $(seq 1 50); do pgrep -f "$1/bin/[e]xpanse-daemon" >/dev/null || exit 0; sleep 0.2; done
      pkill -9 -f "$1/bin/[e]xpanse-daemon"; sleep 0.2' _ "$prefix" 2>/dev/null || true
  done
  restore_slurm_conf
}

# The last step of a passing test: stop everything, then remove its scratch directory (kept on
# failure, for reading).
dc_finish() {
  dc_cleanup
  rm -rf "$DIR"
}

# The minors SLURM's gres.conf gives HOST's GPUs: "lo hi".
dc_minors() {
  grep "NodeName=$1 " "$(dirname "$SLURM_CONF")/gres.conf" | grep -oP 'nvidia\[\K[0-9]+-[0-9]+' | tr '-' ' '
}

dc_gpu_scenario() {
  "$TESTCLUSTER" exec "$1" -- bash -c "cat >/etc/expanse/fake-nvml.json.tmp && mv /etc/expanse/fake-nvml.json.tmp /etc/expanse/fake-nvml.json" <<<"{\"gpus\": $2}"
}

dc_job() {
  curl -sS --max-time 20 --cacert "$CA_FILE" -H "Authorization: Bearer $API_TOKEN" \
    "$CP_URL/api/v1/computes/$COMPUTE/jobs/$1"
}

dc_wait_job() {
  local seconds="$1" job="$2" expr="$3" what="$4"
  wait_until "$seconds" "$what" bash -c "curl -sS --max-time 20 --cacert '$CA_FILE' -H 'Authorization: Bearer $API_TOKEN' '$CP_URL/api/v1/computes/$COMPUTE/jobs/$job' | jq_holds '$expr' >/dev/null"
}

dc_setup() {
  trap dc_cleanup EXIT
  mkdir -p "$prefix/bin"
  cp "$BUILD/bin/expanse-daemon" "$prefix/bin/expanse-daemon"

  # Each worker's fake GPUs: NVML index order is the reverse of the minor-number order, so a
  # tool that maps SLURM's GPU to the NVML index picks the wrong GPU on every host.
  local w lo hi hook
  for w in $EXPANSE_TC_WORKERS; do
    read -r lo hi < <(dc_minors "$w")
    dc_gpu_scenario "$w" "[
      {\"uuid\": \"GPU-$w-minor$hi\", \"minor\": $hi, \"sm_util\": 91, \"memory_used_mib\": 2048},
      {\"uuid\": \"GPU-$w-minor$lo\", \"minor\": $lo, \"sm_util\": 7, \"memory_used_mib\": 0}]"
  done

  server_start || fail "expanse-server did not start"
  server_register cluster "$prefix" || fail "compute registration"
  printf 'SSL_CERT_FILE=%s\n' "$CA_FILE" >"$DIR/daemon.env"
  pass "server up, compute $COMPUTE registered"

  local hook_args="--shared-prefix $prefix --user root --gres-conf $(dirname "$SLURM_CONF")/gres.conf --nvml-library $FAKE_NVML --interval 500ms --flush-interval 2s"
  for hook in prolog epilog; do
    cat >"$DIR/$hook" <<HOOK
#!/bin/bash
# As the installer writes it: never fail the job, whatever happens to the daemon.
"$prefix/bin/expanse-daemon" hook $hook --sampler-bootstrap prolog $hook_args || true
exit 0
HOOK
    chmod 755 "$DIR/$hook"
  done
  save_slurm_conf
  trap dc_cleanup EXIT  # save_slurm_conf set its own; dc_cleanup restores slurm.conf too
  printf 'Prolog=%s\nEpilog=%s\n' "$DIR/prolog" "$DIR/epilog" >>"$SLURM_CONF"
  "$TESTCLUSTER" reconfigure
}

# No node may be drained or down.
dc_assert_no_drain() {
  local w state
  for w in $EXPANSE_TC_WORKERS; do
    state="$(sinfo -h -n "$w" -o %t)"
    [[ "$state" != *drain* && "$state" != drng && "$state" != down* ]] || fail "$w is $state"
  done
}
