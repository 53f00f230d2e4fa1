#!/usr/bin/env bash
# The scale-out tier's budgets (docs/scaling.md), measured side by side in one run on one
# machine against the real peer:
#   1. ingest through two `expanse-server serve` replicas on one PostgreSQL into
#      VictoriaMetrics (--telemetry-store remote: authentication, the batch claim in
#      PostgreSQL, relabelling, remote-write), against VictoriaMetrics' own /api/v1/import of
#      the same samples into a fresh VictoriaMetrics, run just before and just after the tier
#      and averaged; the budget is a ratio >= 0.8;
#   2. the timeline of a 24 h, 8-GPU job (1,000 points) through a replica, read from
#      VictoriaMetrics with PromQL; budget 200 ms;
#   3. the job list (1,000 jobs) with 1,000,000 jobs in PostgreSQL: the store's query as
#      PostgreSQL runs it (EXPLAIN ANALYZE, with the index it used) and the API end to end;
#      budget 100 ms.
# Prints one table. The loads come from bench/ingest_load.cc.
#
#   bench/replicas_vs_victoriametrics.sh [build dir] (default build/h-bench, a Release build
#   with -DEXPANSE_BUILD_BENCH=ON; `ninja expanse-server ingest_load` first)
#   HOURS=4 NODES=16 CONNS=16 JOBS=1000000 REPEAT=3 BATCHES=16 environment knobs; the defaults
#   are the budget's configuration (docs/performance.md): 16 requests in flight of 16 batches,
#   36.9 M samples a run, long enough that a replica's start (first allocations, first
#   statements, first connections) is not a visible share of it. A node's batches go over one
#   connection, in order (as one daemon sends them), so min(NODES, CONNS) requests are in
#   flight at once, in both runs. BATCHES: batches per request, as a controller sends queued
#   batches in one envelope; VictoriaMetrics then gets the same batches' lines in one import
#   body.
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
build="${1:-build/h-bench}"
server="$build/bin/expanse-server"
load="$build/bin/ingest_load"
hours="${HOURS:-4}" nodes="${NODES:-16}" conns="${CONNS:-16}" jobs="${JOBS:-1000000}"
batches="${BATCHES:-16}"
repeat="${REPEAT:-3}"
[[ "$repeat" =~ ^[1-9][0-9]*$ ]] || { echo "REPEAT must be a whole number of runs, 1 or more" >&2; exit 1; }
for f in "$server" "$load"; do
  [[ -x "$f" ]] || { echo "missing $f: ninja -C $build expanse-server ingest_load" >&2; exit 1; }
done
source "$here/../tests/integration/lib/postgres.sh"
source "$here/../tests/integration/lib/victoriametrics.sh"

dir="$(mktemp -d /tmp/replicas_vs_vm.XXXXXX)"
pids=()
declare -A vm_dirs  # VictoriaMetrics pid -> its directory, while it runs
cleanup() {
  for p in "${pids[@]}"; do kill "$p" 2>/dev/null || true; done
  for p in "${pids[@]}"; do wait "$p" 2>/dev/null || true; done
  pg_stop
  for p in "${!vm_dirs[@]}"; do VM_DIR="${vm_dirs[$p]}" VM_PID="$p" vm_stop; done
  rm -rf "$dir"
}
# A fresh VictoriaMetrics on CPUS ("" = any), and one to stop.
start_vm() { VM_CPUS="$1" vm_start; vm_dirs[$VM_PID]="$VM_DIR"; }
stop_vm() { VM_DIR="${vm_dirs[$1]}" VM_PID="$1" vm_stop; unset "vm_dirs[$1]"; }
trap cleanup EXIT
cpu_s() { awk -v hz="$(getconf CLK_TCK)" '{ printf "%.3f", ($14 + $15) / hz }' "/proc/$1/stat"; }
# CPU seconds of PostgreSQL: the postmaster and the processes it runs now (the replicas'
# backends live as long as their connections).
pg_cpu_s() {
  local postmaster p sum=0
  postmaster="$(head -1 "$PG_DIR/data/postmaster.pid")"
  for p in "$postmaster" $(pgrep -P "$postmaster"); do
    sum="$(awk -v a="$sum" -v b="$(cpu_s "$p" 2>/dev/null || echo 0)" 'BEGIN { print a + b }')"
  done
  echo "$sum"
}
kv() { grep -oP "(^| )$1=\K\S+" <<<"$2"; }
# Per-CPU busy and total jiffies, "cpuN busy total" per line, to tell after a run whether a
# CPU sat idle (the run then waited on round trips, not on that CPU).
# user nice system idle iowait irq softirq steal; guest time is counted in user and nice already.
cpu_ticks() { awk '/^cpu[0-9]/ { t = 0; for (i = 2; i <= 9; ++i) t += $i; print $1, t - $5 - $6, t }' /proc/stat; }
# busy_between BEFORE AFTER: "cpu0 97% cpu1 88%" from two cpu_ticks outputs.
busy_between() {
  join <(echo "$1") <(echo "$2") |
    awk '{ d = $5 - $3; printf "%s%s %.0f%%", (NR > 1 ? " " : ""), $1, (d > 0 ? ($4 - $2) * 100 / d : 0) }'
}

# PostgreSQL as a site runs it (fsync and synchronous commit on), unlike the tests' throwaway
# server: its WAL flushes are part of what a replica's ingest costs.
PG_DURABLE=1 pg_start

now_ms=$(($(date +%s) * 1000))
start_ms=$(((now_ms - hours * 3600000 - 3 * 86400000) / 7200000 * 7200000 + 2 * 86400000))

boot="$(EXPANSE_ADMIN_PASSWORD='bench pass' "$server" admin bootstrap --db "$PG_URI" --org bench \
  --org-name Bench --email bench@example.com)"
api_token="$(jq -r .api_token <<<"$boot")"
auth=(-H "Authorization: Bearer $api_token")
common=(--nodes "$nodes" --hours "$hours" --start-ms "$start_ms" --conns "$conns"
  --batches-per-request "$batches")

# pin CPUS PID: every thread of PID on CPUS ("" leaves it be).
pin() { [[ -z "$1" ]] || taskset -a -pc "$1" "$2" >/dev/null; }
# pin_postgres CPUS: PostgreSQL's postmaster and every process it has started; the backends
# it starts later (a replica's connections) inherit its CPUs.
pin_postgres() {
  local postmaster p
  postmaster="$(head -1 "$PG_DIR/data/postmaster.pid")"
  for p in "$postmaster" $(pgrep -P "$postmaster"); do pin "$1" "$p"; done
}
on_cpus() { if [[ -n "$1" ]]; then taskset -c "$1" "${@:2}"; else "${@:2}"; fi; }

# start_replicas TELEMETRY_URL CPUS: two replicas on the one PostgreSQL; sets port[] and
# replica_pid[] (replica 0 and 1). stop_replicas: those two.
declare -a port replica_pid
stop_replicas() {
  local p
  for p in "${replica_pid[@]}"; do kill "$p" 2>/dev/null || true; wait "$p" 2>/dev/null || true; done
}
start_replicas() {
  local n log
  for n in 0 1; do
    log="$dir/serve$n.$RANDOM.log"
    "$server" serve --db "$PG_URI" --telemetry-store remote --telemetry-url "$1" \
      --control-listen 127.0.0.1:0 --credential-rate 100000 >"$log" 2>&1 &
    replica_pid[$n]=$!
    pids+=($!)
    for _ in $(seq 1 100); do grep -q 'console API' "$log" && break; sleep 0.1; done
    url="$(grep -oP 'control plane \K\S+' "$log")"
    port[$n]="${url##*:}"
    pin "$2" "${replica_pid[$n]}"
  done
  url="http://127.0.0.1:${port[0]}"
}

# new_credential NAME: a compute registered through replica 0 and its daemon credential.
all_computes=()
new_credential() {
  compute="$(curl -sS "${auth[@]}" -d "{\"name\":\"$1\",\"type\":\"slurm\"}" "$url/api/v1/orgs/bench/computes" | jq -r .id)"
  local install_token
  install_token="$(curl -sS "${auth[@]}" -H 'Content-Length: 0' -X POST \
    "$url/api/v1/computes/$compute/install-tokens" | jq -r .token)"
  credential="$(curl -sS -d "{\"token\":\"$install_token\",\"hostname\":\"ctl\",\"daemon_version\":\"0.1.0\",\"role\":\"controller\"}" \
    "$url/cp/v1/install-tokens/exchange" | jq -r .credential)"
  [[ "$credential" == exp_cc_* ]] || { echo "no credential: $credential" >&2; exit 1; }
  all_computes+=("$compute")
}

# import_once VM_CPUS TIER_CPUS: VictoriaMetrics' own import of the samples into a fresh
# instance on VM_CPUS, the load on TIER_CPUS ("" = anywhere), stopped afterwards. Sets
# import_rate, import_cpu (VictoriaMetrics' CPU seconds), import_send_cpu (the load's) and
# import_busy.
import_once() {
  local vm_cpus="$1" tier_cpus="$2" cv2 out ticks0
  start_vm "$vm_cpus"
  cv2="$(cpu_s "$VM_PID")"
  ticks0="$(cpu_ticks)"
  out="$(on_cpus "$tier_cpus" "$load" vm --port "${VM_URL##*:}" "${common[@]}")"
  import_busy="$(busy_between "$ticks0" "$(cpu_ticks)")"
  import_cpu="$(awk -v a="$cv2" -v b="$(cpu_s "$VM_PID")" 'BEGIN { print b - a }')"
  import_rate="$(kv samples_per_s "$out")" import_send_cpu="$(kv send_cpu_s "$out")"
  stop_vm "$VM_PID"
}

# ingest_pair LAYOUT VM_CPUS TIER_CPUS: VictoriaMetrics' own import of the samples into a fresh
# instance, then the same samples through two replicas into another fresh one, then the import
# again; VictoriaMetrics on VM_CPUS, the replicas and the load on TIER_CPUS ("" = anywhere).
# The tier is compared with the mean of the two imports around it, so that the machine's
# speed drifting during a pair (the import's own rate varies by half between runs) falls on
# both sides. Each run has its VictoriaMetrics alone: none still merging what it took beside
# another's run. Appends one line of figures to $dir/ingest; stops everything it started.
ingest_pair() {
  local layout="$1" vm_cpus="$2" tier_cpus="$3"
  echo "[$layout] VictoriaMetrics /api/v1/import: $nodes nodes x 8 GPUs x 20 fields x ${hours} h ..." >&2
  import_once "$vm_cpus" "$tier_cpus"
  local rate_before="$import_rate" cpu_before="$import_cpu" send_before="$import_send_cpu"
  local vm_busy="$import_busy" rep_busy ticks0

  start_vm "$vm_cpus"
  local tier_vm_url="$VM_URL" tier_vm_pid="$VM_PID"
  pin_postgres "$tier_cpus"  # part of the tier: never on VictoriaMetrics' CPU in the split
  start_replicas "$tier_vm_url" "$tier_cpus"
  new_credential "bench-${layout//#/-}"
  echo "[$layout] two replicas -> VictoriaMetrics: the same samples ..." >&2
  local c0 c1 cv cp rep_out rep_cpu rep_vm_cpu pg_cpu stored
  c0="$(cpu_s "${replica_pid[0]}")" c1="$(cpu_s "${replica_pid[1]}")" cv="$(cpu_s "$tier_vm_pid")"
  cp="$(pg_cpu_s)"
  ticks0="$(cpu_ticks)"
  rep_out="$(on_cpus "$tier_cpus" "$load" expanse --port "${port[0]}" --port2 "${port[1]}" --credential "$credential" "${common[@]}")"
  rep_busy="$(busy_between "$ticks0" "$(cpu_ticks)")"
  rep_cpu="$(awk -v a="$c0" -v b="$c1" -v x="$(cpu_s "${replica_pid[0]}")" -v y="$(cpu_s "${replica_pid[1]}")" 'BEGIN { print x - a + y - b }')"
  rep_vm_cpu="$(awk -v a="$cv" -v b="$(cpu_s "$tier_vm_pid")" 'BEGIN { print b - a }')"
  pg_cpu="$(awk -v a="$cp" -v b="$(pg_cpu_s)" 'BEGIN { print b - a }')"
  # The same samples must be in VictoriaMetrics, once each.
  curl -fsS "$tier_vm_url/internal/force_flush" >/dev/null
  stored="$(curl -fsS "$tier_vm_url/api/v1/query" --data-urlencode \
    "query=sum(count_over_time({compute=\"$compute\"}[$((hours * 3600 + 60))s]))" \
    --data-urlencode "time=$(((start_ms + hours * 3600000) / 1000))" --data-urlencode nocache=1 |
    jq -r '.data.result[0].value[1]')"
  [[ "$stored" == "$(kv samples "$rep_out")" ]] ||
    { echo "VictoriaMetrics holds $stored samples, the load sent $(kv samples "$rep_out")" >&2; exit 1; }
  # Nothing of the tier's run may keep a CPU busy during the second import (VictoriaMetrics
  # merges for a while).
  stop_replicas
  stop_vm "$tier_vm_pid"

  echo "[$layout] VictoriaMetrics /api/v1/import again ..." >&2
  import_once "$vm_cpus" "$tier_cpus"
  local vm_rate vm_cpu vm_send
  vm_rate="$(awk -v a="$rate_before" -v b="$import_rate" 'BEGIN { print (a + b) / 2 }')"
  vm_cpu="$(awk -v a="$cpu_before" -v b="$import_cpu" 'BEGIN { print (a + b) / 2 }')"
  vm_send="$(awk -v a="$send_before" -v b="$import_send_cpu" 'BEGIN { print (a + b) / 2 }')"
  echo "$layout $(kv samples_per_s "$rep_out") $vm_rate $(kv samples "$rep_out") $rep_cpu $rep_vm_cpu $vm_cpu $pg_cpu $(kv send_cpu_s "$rep_out") $vm_send $rate_before $import_rate" >>"$dir/ingest"
  echo "$layout|$rep_busy|$vm_busy" >>"$dir/busy"
}

# Everything on every CPU (how two programs share one machine), then VictoriaMetrics given CPU 0
# alone in both runs and the replicas and the load the rest (whether the tier in front keeps
# VictoriaMetrics as busy as its own import does).
: >"$dir/ingest"
: >"$dir/busy"
# The CPUs this script may use: the first for VictoriaMetrics, the rest for the tier.
read -r first_cpu other_cpus < <(python3 -c 'import os; c = sorted(os.sched_getaffinity(0)); print(c[0], ",".join(map(str, c[1:])))')
# The layouts take turns, REPEAT times, so that a slow spell of the machine (its figures vary
# by a quarter from run to run) falls on both; the report gives every run and the median.
for run in $(seq 1 "$repeat"); do
  ingest_pair "shared#$run" "" ""
  [[ -z "$other_cpus" ]] || ingest_pair "split#$run" "$first_cpu" "$other_cpus"
done
# The job and list queries below: two fresh replicas on a fresh VictoriaMetrics, on every CPU.
[[ -z "$other_cpus" ]] || pin_postgres "$first_cpu,$other_cpus"
start_vm ""
vm_url="$VM_URL" vm_pid="$VM_PID"
start_replicas "$vm_url" ""
new_credential "bench-queries"

# The 24 h job through replica 0, its timeline read through replica 1.
"$load" job --port "${port[0]}" --credential "$credential" --start-ms "$start_ms" >/dev/null
curl -fsS "$vm_url/internal/force_flush" >/dev/null
query_out="$("$load" query --port "${port[1]}" --api-token "$api_token" --compute "$compute" \
  --start-ms "$start_ms")"

# A million jobs in PostgreSQL (straight into the table: the API would take hours), then the
# first page of 1,000 as the store asks for it and as the API answers it.
echo "PostgreSQL: $jobs jobs ..." >&2
psql_q() { pg_as "$PG_BIN/psql" -h "$PG_DIR" -U postgres -d expanse -Atqc "$1"; }
psql_q "INSERT INTO jobs (compute_id, job_id, name, \"user\", account, partition, state, nodes,
  submit_ms, start_ms, end_ms, req_nodes, req_cpus, req_gpus, req_mem_mib, time_limit_s, observed_ms)
  SELECT '$compute', 'b' || i, 'train', 'u' || (i % 500), 'acct' || (i % 50), 'gpu', 'COMPLETED', 'n1',
    $start_ms - i * 1000, $start_ms - i * 1000, $start_ms - i * 1000 + 600000, 1, 8, 1, 1000, 3600,
    $start_ms FROM generate_series(1, $jobs) AS i; ANALYZE jobs"
# The store's list query (src/store/sqlite_store_jobs.cc) for one compute, newest first.
# The organisation has a compute per layout measured above, so the list is the store's merge
# of one ordered, limited read per compute.
arms=""
for c in "${all_computes[@]}"; do
  arms+="${arms:+ UNION ALL }SELECT * FROM (SELECT ctid AS row_id, sort_ms, job_id, compute_id FROM jobs
    WHERE compute_id = '$c' ORDER BY sort_ms DESC, job_id LIMIT 1000) AS arm_${#arms}"
done
plan="$(psql_q "EXPLAIN (ANALYZE, FORMAT JSON) SELECT compute_id, job_id FROM jobs WHERE ctid IN
  (SELECT row_id FROM ($arms ORDER BY sort_ms DESC, job_id, compute_id LIMIT 1000 OFFSET 0) AS page)
  ORDER BY sort_ms DESC, job_id, compute_id")"
store_ms="$(jq '.[0]["Execution Time"]' <<<"$plan")"
index="$(jq -r '[.. | objects | select(has("Index Name")) | .["Index Name"]] | first // "none"' <<<"$plan")"
api_ms=()
for _ in 1 2 3 4 5; do
  t="$(curl -sS -o "$dir/list.json" -w '%{time_total}' "${auth[@]}" "$url/api/v1/orgs/bench/jobs?limit=1000")"
  api_ms+=("$(awk -v t="$t" 'BEGIN { printf "%.1f", t * 1000 }')")
done
listed="$(jq '.jobs | length' "$dir/list.json")"
api_median="$(printf '%s\n' "${api_ms[@]}" | sort -n | sed -n 3p)"

# One line per run, then the median ratio of each layout.
report_layout() {
  local layout="$1" what="$2" run_line rep_busy vm_busy
  echo "ingest, $what (ratio budget >= 0.8x; $(((nodes < conns ? nodes : conns))) requests in flight, $batches batches per request):"
  while read -r run_line; do
    read -r name r v n rc rvc vc pc lr lv vb va <<<"$run_line"
    IFS='|' read -r _ rep_busy vm_busy < <(grep "^$name|" "$dir/busy")
    awk -v name="${name#*#}" -v r="$r" -v v="$v" -v n="$n" -v rc="$rc" -v rvc="$rvc" -v vc="$vc" \
      -v pc="$pc" -v lr="$lr" -v lv="$lv" -v rb="$rep_busy" -v vb="$vm_busy" -v before="$vb" \
      -v after="$va" 'BEGIN {
      printf "  run %s: 2 replicas -> VictoriaMetrics %.0f samples/s, VictoriaMetrics /api/v1/import %.0f samples/s (%.0f before, %.0f after): %.2fx (%d samples)\n", name, r, v, before, after, r / v, n
      printf "    CPU s per million samples: replicas %.2f + PostgreSQL %.2f + their VictoriaMetrics %.2f (load %.2f); VictoriaMetrics import %.2f (load %.2f)\n",
             rc / n * 1e6, pc / n * 1e6, rvc / n * 1e6, lr / n * 1e6, vc / n * 1e6, lv / n * 1e6
      printf "    CPUs busy: %s through the replicas; %s in the import\n", rb, vb
    }'
  done < <(grep "^$layout#" "$dir/ingest")
  grep "^$layout#" "$dir/ingest" | awk '{ print $2 / $3 }' | sort -n |
    awk -v l="$layout" '{ r[NR] = $1 } END { printf "  median ratio, %s: %.2fx of %d runs\n", l, (NR % 2 ? r[(NR + 1) / 2] : (r[NR / 2] + r[NR / 2 + 1]) / 2), NR }'
}
report_layout shared "all on every CPU"
if [[ -n "$other_cpus" ]]; then
  report_layout split "VictoriaMetrics on one CPU alone in both runs, replicas and load on the rest"
fi
awk -v qf="$(kv query_first_ms "$query_out")" -v qm="$(kv query_median_ms "$query_out")" \
  -v pts="$(kv points "$query_out")" -v ser="$(kv series "$query_out")" \
  -v sm="$store_ms" -v idx="$index" -v am="$api_median" -v listed="$listed" -v jobs="$jobs" 'BEGIN {
  printf "timeline of a 24 h 8-GPU job through a replica from VictoriaMetrics: first %.1f ms, median %.1f ms (budget 200 ms); %d series x %d points\n",
         qf, qm, ser, pts
  printf "PostgreSQL job list, 1000 of %d jobs: store query %.1f ms (index %s), API end to end median %.1f ms (%d listed; budget 100 ms)\n",
         jobs, sm, idx, am, listed
}'
