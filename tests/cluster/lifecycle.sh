# start / stop / status of the test cluster (sourced by testcluster).
# shellcheck shell=bash

load_cluster_env() {
  TC_WORKERS=2
  TC_ACCOUNTING=0
  # shellcheck disable=SC1091
  [[ -f "$TC_STATE/cluster.env" ]] && source "$TC_STATE/cluster.env"
  export SLURM_CONF="$TC_STATE/etc/slurm.conf"
}

require_root_and_tools() {
  [[ $EUID -eq 0 ]] || die "must run as root (it creates namespaces, a bridge and cgroups)"
  local t missing=()
  for t in ip nsenter unshare munged munge slurmctld slurmd scontrol sinfo setsid mknod; do
    command -v "$t" >/dev/null || missing+=("$t")
  done
  if [[ "$TC_ACCOUNTING" == 1 ]]; then
    for t in slurmdbd sacctmgr mariadbd mariadb-install-db mariadb-admin; do
      command -v "$t" >/dev/null || missing+=("$t")
    done
  fi
  ((${#missing[@]} == 0)) || die "missing commands: ${missing[*]} (run scripts/setup)"
}

# Succeeds when every process of the recorded cluster is alive.
cluster_running() {
  [[ -f "$TC_STATE/cluster.env" ]] || return 1
  local name
  for name in munged slurmctld $(host_list | sed 's/^/anchor-/') $(host_list | sed 's/^/slurmd-/'); do
    alive "$name" || return 1
  done
  if [[ "$TC_ACCOUNTING" == 1 ]]; then alive mariadb && alive slurmdbd || return 1; fi
  return 0
}

# wait_for WHAT SECONDS CMD... — polls CMD (each try bounded to 5 s) until it succeeds.
wait_for() {
  local what="$1" seconds="$2" deadline
  shift 2
  deadline=$((SECONDS + seconds))
  while ((SECONDS < deadline)); do
    if timeout 5 "$@" >/dev/null 2>&1; then return 0; fi
    sleep 0.1
  done
  die "timed out after ${seconds}s waiting for $what; logs are in $TC_STATE/log"
}

tc_start() {
  local want_workers=2 want_accounting=0
  while (($#)); do
    case "$1" in
      --workers)
        want_workers="${2:?--workers needs a number}"
        shift
        ;;
      --workers=*) want_workers="${1#*=}" ;;
      --accounting) want_accounting=1 ;;
      --no-accounting) want_accounting=0 ;;
      *) die "start: unknown option '$1'" ;;
    esac
    shift
  done
  [[ "$want_workers" =~ ^[0-9]+$ && "$want_workers" -le 8 ]] || die "--workers must be 0..8"

  load_cluster_env
  if cluster_running && [[ "$TC_WORKERS" == "$want_workers" && "$TC_ACCOUNTING" == "$want_accounting" ]]; then
    log "already running"
    tc_wait_idle 60
    tc_hosts
    return 0
  fi
  # Whatever is left of an earlier or crashed run goes first.
  tc_stop quiet

  TC_WORKERS="$want_workers"
  TC_ACCOUNTING="$want_accounting"
  require_root_and_tools
  check_cgroups

  mkdir -p "$TC_STATE"/{etc,log,pids,run,ctld,munge,shared}
  chmod 755 "$TC_STATE"
  printf 'TC_WORKERS=%d\nTC_ACCOUNTING=%d\n' "$TC_WORKERS" "$TC_ACCOUNTING" >"$TC_STATE/cluster.env"
  chown "$TC_SLURM_USER" "$TC_STATE/ctld" "$TC_STATE/log" "$TC_STATE/run"
  chmod 1777 "$TC_STATE/shared"
  local host
  while read -r host; do mkdir -p "$TC_STATE/hosts/$host/spool"; done < <(host_list)

  write_devices
  write_slurm_conf
  net_setup

  log "starting munged"
  (umask 077 && head -c 1024 /dev/urandom >"$TC_STATE/munge/munge.key")
  spawn daemons munged munged --foreground --force \
    --socket="$TC_STATE/munge/munge.socket" --key-file="$TC_STATE/munge/munge.key" \
    --pid-file="$TC_STATE/munge/munged.pid" --log-file="$TC_STATE/log/munged.log" \
    --seed-file="$TC_STATE/munge/munged.seed"
  wait_for "munged" 10 bash -c "munge -n -S '$TC_STATE/munge/munge.socket' | unmunge -S '$TC_STATE/munge/munge.socket'"

  [[ "$TC_ACCOUNTING" == 1 ]] && start_accounting

  log "starting slurmctld on $(controller_name) ($(controller_addr))"
  spawn daemons slurmctld slurmctld -D -i -f "$SLURM_CONF"
  wait_for "slurmctld" 30 scontrol ping

  while read -r host; do
    start_anchor "$host"
  done < <(host_list)
  while read -r host; do
    wait_anchor "$host"
    log "starting slurmd on $host"
    host_spawn "$host" "slurmd-$host" slurmd -D -f "$SLURM_CONF"
  done < <(host_list)

  tc_wait_idle 90
  tc_hosts
}

start_accounting() {
  log "starting MariaDB and slurmdbd (accounting)"
  local db="$TC_STATE/mysql" pass
  mkdir -p "$db"
  mariadb-install-db --no-defaults --datadir="$db/data" --user=root \
    --auth-root-authentication-method=socket --skip-test-db >"$TC_STATE/log/mariadb-install.log" 2>&1 ||
    die "mariadb-install-db failed; see $TC_STATE/log/mariadb-install.log"
  spawn daemons mariadb mariadbd --no-defaults --datadir="$db/data" --socket="$db/mysqld.sock" \
    --port=$((TC_PORT_BASE + 3)) --bind-address=127.0.0.1 --user=root --skip-name-resolve \
    --pid-file="$db/mysqld.pid" --log-error="$TC_STATE/log/mariadb.log" --innodb-buffer-pool-size=256M --innodb-lock-wait-timeout=900
  wait_for "MariaDB" 60 mariadb-admin --no-defaults --socket="$db/mysqld.sock" ping
  pass="$(head -c 18 /dev/urandom | base64 | tr -d '/+=')"
  mariadb --no-defaults --socket="$db/mysqld.sock" -e \
    "CREATE USER 'slurm'@'127.0.0.1' IDENTIFIED BY '$pass';
     GRANT ALL ON slurm_acct_db.* TO 'slurm'@'127.0.0.1';" ||
    die "could not create the accounting database user"
  write_slurmdbd_conf "$pass"
  spawn daemons slurmdbd slurmdbd -D
  wait_for "slurmdbd" 60 sacctmgr -n list cluster
  sacctmgr -i add cluster "$TC_CLUSTER_NAME" >/dev/null
}

tc_wait_idle() {
  local seconds="${1:-60}" i states
  load_cluster_env
  local want
  want="$(host_list | wc -l)"
  for ((i = 0; i < seconds * 2; i++)); do
    states="$(sinfo -h -N -o '%N %t' 2>/dev/null | sort -u)"
    if [[ "$(grep -c ' idle$' <<<"$states")" == "$want" ]]; then return 0; fi
    sleep 0.5
  done
  die "nodes not idle after ${seconds}s: $(tr '\n' ' ' <<<"$states"); logs are in $TC_STATE/log"
}

# stop [quiet] — ends every process in our cgroup tree, then removes namespaces, bridge and state.
tc_stop() {
  local quiet="${1:-}" pids round
  load_cluster_env
  pids="$(cgroup_all_pids)"
  if [[ -n "$pids" ]]; then
    [[ "$quiet" == quiet ]] || log "stopping $(wc -w <<<"$pids") processes"
    # shellcheck disable=SC2086
    kill -TERM $pids 2>/dev/null || true
    for ((round = 0; round < 50; round++)); do
      pids="$(cgroup_all_pids)"
      [[ -z "$pids" ]] && break
      # Job processes and slow daemons get a moment, then SIGKILL.
      ((round > 20)) && kill -KILL $pids 2>/dev/null
      sleep 0.1
    done
    [[ -z "$(cgroup_all_pids)" ]] || die "processes survived: $(cgroup_all_pids | tr '\n' ' ')"
  fi
  cgroup_remove_all
  net_teardown
  if [[ -d "$TC_STATE" ]]; then
    if [[ -n "${EXPANSE_TC_ARTIFACTS:-}" ]]; then
      mkdir -p "$EXPANSE_TC_ARTIFACTS"
      cp -r "$TC_STATE/log" "$EXPANSE_TC_ARTIFACTS/" 2>/dev/null || true
    fi
    rm -rf "$TC_STATE"
  fi
  [[ "$quiet" == quiet ]] || log "stopped"
}

tc_status() {
  load_cluster_env
  if cluster_running; then
    echo "running: controller $(controller_name), $TC_WORKERS workers, accounting=$TC_ACCOUNTING"
    sinfo -N -o '%N %t %G'
  else
    echo "not running"
    return 1
  fi
}

tc_env() {
  load_cluster_env
  echo "export SLURM_CONF=$TC_STATE/etc/slurm.conf"
  echo "export EXPANSE_TC_INSTANCE=$TC_INSTANCE"
  echo "export EXPANSE_TC_STATE=$TC_STATE"
  echo "export EXPANSE_TC_SUBNET=$TC_SUBNET EXPANSE_TC_PORT_BASE=$TC_PORT_BASE"
  echo "export EXPANSE_TC_BRIDGE=$TC_BRIDGE EXPANSE_TC_NETNS_PREFIX=$TC_NETNS_PREFIX"
  echo "export EXPANSE_TC_CGROUP=$TC_CGROUP_NAME"
  echo "export EXPANSE_TC_SHARED=$TC_STATE/shared"
  echo "export EXPANSE_TC_CONTROLLER=$(controller_name)"
  echo "export EXPANSE_TC_ACCOUNTING=$TC_ACCOUNTING"
  echo "export EXPANSE_TC_WORKERS='$(host_list | tail -n +2 | tr '\n' ' ' | sed 's/ $//')'"
}

tc_hosts() {
  load_cluster_env
  local i
  printf '%-12s %-14s %s\n' HOST ADDRESS RUNS
  printf '%-12s %-14s %s\n' "$(controller_name)" "$(controller_addr)" \
    "munged slurmctld slurmd$([[ "$TC_ACCOUNTING" == 1 ]] && echo ' slurmdbd mariadb')"
  for ((i = 1; i <= TC_WORKERS; i++)); do
    printf '%-12s %-14s %s\n' "$(worker_name "$i")" "$(worker_addr "$i")" "slurmd"
  done
}

tc_exec() {
  load_cluster_env
  local host="${1:?exec needs a host}"
  shift
  [[ "${1:-}" == "--" ]] && shift
  (($#)) || die "exec needs a command"
  host_run "$host" "$@"
}

tc_resume() {
  load_cluster_env
  local node="${1:?resume needs a node name}"
  scontrol update nodename="$node" state=resume
  wait_for "$node to be idle" 30 bash -c "sinfo -h -n '$node' -o '%t' | grep -qx idle"
}

# reconfigure — `scontrol reconfigure`, then waits until every slurmd has taken the new
# configuration (each logs a line when it re-reads slurm.conf), so a job submitted next sees it.
tc_reconfigure() {
  load_cluster_env
  local host before=() i=0 n
  while read -r host; do
    before+=("$(grep -c 'reconfigured' "$TC_STATE/log/slurmd-$host.log" 2>/dev/null || true)")
  done < <(host_list)
  scontrol reconfigure || die "scontrol reconfigure failed"
  while read -r host; do
    for ((n = 0; n < 100; n++)); do
      (($(grep -c 'reconfigured' "$TC_STATE/log/slurmd-$host.log" 2>/dev/null || true) > ${before[$i]})) && break
      sleep 0.1
    done
    ((n < 100)) || log "slurmd on $host did not confirm the reconfiguration within 10s"
    i=$((i + 1))
  done < <(host_list)
}
