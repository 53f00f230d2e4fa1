#!/usr/bin/env bash
# Telemetry ingest side by side, in one run on one machine: a real `expanse-server serve`
# (POST /dp/v1/ingest, zstd JSON batches, enrolled through its real API), Debian's
# VictoriaMetrics (/api/v1/import, gzip JSON lines) and plain SQLite rows, all fed the same
# samples by bench/ingest_load.cc. Then the timeline of a 24 h, 8-GPU job downsampled to
# 1,000 points through GET /api/v1/computes/{id}/jobs/{job}/timeline. Prints one table.
#
#   bench/ingest_vs_victoriametrics.sh [build dir] (default build/h-bench, a Release build
#   with -DEXPANSE_BUILD_BENCH=ON; `ninja expanse-server ingest_load` first)
#   HOURS=2 NODES=8 CONNS=4 VM_PORT=18428 SQLITE=1 environment knobs; KEEP=1 leaves the data
#   directories in place (printed) to look into what is at rest; NOSYNC=1 adds a diagnostic
#   run of expanse with its syncs made no-ops (see below).
# Figures and the machine they came from are recorded in docs/performance.md.
set -euo pipefail

build="${1:-build/h-bench}"
server="$build/bin/expanse-server"
load="$build/bin/ingest_load"
hours="${HOURS:-2}" nodes="${NODES:-8}" conns="${CONNS:-4}" vm_port="${VM_PORT:-18428}"
for f in "$server" "$load"; do
  [[ -x "$f" ]] || { echo "missing $f: ninja -C $build expanse-server ingest_load" >&2; exit 1; }
done
command -v victoria-metrics >/dev/null || apt-get install -y victoria-metrics >/dev/null
for tool in jq curl; do command -v "$tool" >/dev/null || { echo "needs $tool" >&2; exit 1; }; done

dir="$(mktemp -d /tmp/ingest_vs_vm.XXXXXX)"
pids=()
cleanup() {
  for p in "${pids[@]}"; do kill "$p" 2>/dev/null || true; done
  wait 2>/dev/null || true
  if [[ "${KEEP:-0}" == 1 ]]; then echo "kept: $dir" >&2; else rm -rf "$dir"; fi
}
trap cleanup EXIT
kv() { grep -oP "(^| )$1=\K\S+" <<<"$2"; }
# CPU seconds (user + system) a process has used so far, from /proc/<pid>/stat.
cpu_s() { awk -v hz="$(getconf CLK_TCK)" '{ printf "%.3f", ($14 + $15) / hz }' "/proc/$1/stat"; }

# Data starts at a 2-hour boundary (the store's chunk windows) two days plus the load's
# length ago, so VictoriaMetrics accepts it and the job's day fits before it.
now_ms=$(($(date +%s) * 1000))
start_ms=$(((now_ms - hours * 3600000 - 3 * 86400000) / 7200000 * 7200000 + 2 * 86400000))

# --- expanse-server -------------------------------------------------------------------
# --credential-rate: the default 250 requests/s per credential suits one controller sending
# in real time; this replays hours in seconds and measures the store, not the limiter.
# $preload, when set, is put in LD_PRELOAD (the no-sync diagnostic below).
preload=""
serve() {
  LD_PRELOAD="$preload" "$server" serve --db "$db" --control-listen 127.0.0.1:0 \
    --credential-rate 100000 >"$dir/serve.log" 2>&1 &
  server_pid=$!
  pids+=("$server_pid")
  for _ in $(seq 1 100); do grep -q 'console API' "$dir/serve.log" && break; sleep 0.1; done
  url="$(grep -oP 'control plane \K\S+' "$dir/serve.log")"
  port="${url##*:}"
}
stop_server() {  # SIGTERM: graceful stop, which flushes the telemetry store
  kill -TERM "$server_pid"
  wait "$server_pid"
}
# A fresh database in $1 with an organisation, a compute and its credential, through the
# real API; leaves the server running and sets db, api_token, compute and credential.
enrol() {
  db="$1/db.sqlite"
  mkdir -p "$1"
  local boot
  boot="$(EXPANSE_ADMIN_PASSWORD='bench pass' "$server" admin bootstrap --db "$db" --org bench \
    --org-name Bench --email bench@example.com)"
  api_token="$(jq -r .api_token <<<"$boot")"
  serve
  local auth=(-H "Authorization: Bearer $api_token") install_token
  compute="$(curl -sS "${auth[@]}" -d '{"name":"bench","type":"slurm"}' \
    "$url/api/v1/orgs/bench/computes" | jq -r .id)"
  install_token="$(curl -sS "${auth[@]}" -H 'Content-Length: 0' -X POST \
    "$url/api/v1/computes/$compute/install-tokens" | jq -r .token)"
  credential="$(curl -sS -d "{\"token\":\"$install_token\",\"hostname\":\"ctl\",\
\"daemon_version\":\"0.1.0\",\"role\":\"controller\"}" \
    "$url/cp/v1/install-tokens/exchange" | jq -r .credential)"
  [[ "$credential" == exp_cc_* ]] || { echo "no credential: $credential" >&2; exit 1; }
}
enrol "$dir/expanse"

common=(--nodes "$nodes" --hours "$hours" --start-ms "$start_ms")
echo "expanse-server: ingesting $nodes nodes x 8 GPUs x 20 fields x ${hours} h ..." >&2
exp_cpu0="$(cpu_s "$server_pid")"
exp_out="$("$load" expanse --port "$port" --credential "$credential" --conns "$conns" "${common[@]}")"
exp_cpu="$(awk -v a="$exp_cpu0" -v b="$(cpu_s "$server_pid")" 'BEGIN { print b - a }')"
stop_server
exp_bytes="$(du -sb "$db.tsdb" | cut -f1)"

# The same load into a fresh store, answered on receipt (Expanse-Ack: received): the sender
# keeps each batch until the store reports it durable and ends with POST /dp/v1/sync, so
# nothing is acknowledged for good before its fdatasync; only the waiting moves off the
# sender's path (docs/formats/ingest-batch.md).
first=("$db" "$credential" "$compute" "$api_token")
enrol "$dir/expanse-received"
echo "expanse-server, answers on receipt: ingesting ..." >&2
rcv_cpu0="$(cpu_s "$server_pid")"
rcv_out="$("$load" expanse --ack received --port "$port" --credential "$credential" \
  --conns "$conns" "${common[@]}")"
rcv_cpu="$(awk -v a="$rcv_cpu0" -v b="$(cpu_s "$server_pid")" 'BEGIN { print b - a }')"
stop_server
rcv_bytes="$(du -sb "$db.tsdb" | cut -f1)"
db="${first[0]}" credential="${first[1]}" compute="${first[2]}" api_token="${first[3]}"

# The 24 h job, in a fresh run so the query reads flushed chunks, as it would a day later.
serve
"$load" job --port "$port" --credential "$credential" --start-ms "$start_ms" >/dev/null
stop_server
serve
query_out="$("$load" query --port "$port" --api-token "$api_token" --compute "$compute" \
  --start-ms "$start_ms")"
stop_server

# Diagnostic, NOSYNC=1: the same ingest into a fresh store whose fsync/fdatasync are no-ops
# (an LD_PRELOAD shim), i.e. acknowledging from memory as VictoriaMetrics does. expanse
# itself never runs like this; the figure shows what the per-acknowledgement sync costs.
nosync_out=""
if [[ "${NOSYNC:-0}" == 1 ]]; then
  printf 'int fsync(int fd) { (void)fd; return 0; }\nint fdatasync(int fd) { (void)fd; return 0; }\n' \
    >"$dir/nosync.c"
  cc -shared -fPIC -O2 -o "$dir/nosync.so" "$dir/nosync.c"
  preload="$dir/nosync.so"
  enrol "$dir/expanse-nosync"
  echo "expanse-server without syncs (diagnostic): ingesting ..." >&2
  nosync_out="$("$load" expanse --port "$port" --credential "$credential" --conns "$conns" "${common[@]}")"
  stop_server
  preload=""
fi

# --- VictoriaMetrics ------------------------------------------------------------------
vm_data="$dir/vm"
victoria-metrics -storageDataPath "$vm_data" -httpListenAddr "127.0.0.1:$vm_port" \
  -retentionPeriod 100y -loggerLevel ERROR >"$dir/vm.log" 2>&1 &
vm_pid=$!
pids+=("$vm_pid")
for _ in $(seq 1 100); do curl -sf "http://127.0.0.1:$vm_port/health" >/dev/null && break; sleep 0.1; done
echo "VictoriaMetrics: ingesting the same samples ..." >&2
vm_cpu0="$(cpu_s "$vm_pid")"
vm_out="$("$load" vm --port "$vm_port" --conns "$conns" "${common[@]}")"
vm_cpu="$(awk -v a="$vm_cpu0" -v b="$(cpu_s "$vm_pid")" 'BEGIN { print b - a }')"
# Rows are buffered in memory for up to a second; force them into parts, let the
# background merges settle, then measure what is at rest.
sleep 2
curl -sf "http://127.0.0.1:$vm_port/internal/force_flush" >/dev/null
sleep 5
vm_rows="$(curl -sf "http://127.0.0.1:$vm_port/api/v1/series/count" | jq -r '.data[0]' || echo ?)"
vm_bytes="$(du -sb "$vm_data" | cut -f1)"
kill -TERM "$vm_pid"
wait "$vm_pid" || true
vm_bytes_stopped="$(du -sb "$vm_data" | cut -f1)"
# At its stop VictoriaMetrics also saves caches (cache/: metric-name lookups and the like,
# rebuilt on demand when missing). Its samples and their index alone are data/ and indexdb/.
vm_bytes_store="$(du -scb "$vm_data/data" "$vm_data/indexdb" | tail -1 | cut -f1)"

# --- plain SQLite rows ----------------------------------------------------------------
sq_out="" sq_bytes=0
if [[ "${SQLITE:-1}" == 1 ]]; then
  echo "SQLite rows: inserting the same samples ..." >&2
  mkdir -p "$dir/sqlite"
  sq_out="$("$load" sqlite --dir "$dir/sqlite" "${common[@]}")"
  sq_bytes="$(du -sb "$dir/sqlite" | cut -f1)"
fi

# --- table ----------------------------------------------------------------------------
samples="$(kv samples "$exp_out")"
awk -v n="$samples" -v hours="$hours" -v nodes="$nodes" -v conns="$conns" \
  -v e_rate="$(kv samples_per_s "$exp_out")" -v e_bytes="$exp_bytes" \
  -v v_rate="$(kv samples_per_s "$vm_out")" -v v_bytes="$vm_bytes_stopped" -v v_flushed="$vm_bytes" \
  -v v_store="$vm_bytes_store" \
  -v s_rate="$(kv samples_per_s "$sq_out" || echo 0)" -v s_bytes="$sq_bytes" \
  -v n_rate="$(kv samples_per_s "$nosync_out" || echo 0)" \
  -v q_med="$(kv query_median_ms "$query_out")" -v q_first="$(kv query_first_ms "$query_out")" \
  -v q_series="$(kv series "$query_out")" -v q_points="$(kv points "$query_out")" \
  -v vm_series="$vm_rows" -v e_cpu="$exp_cpu" -v v_cpu="$vm_cpu" \
  -v r_rate="$(kv samples_per_s "$rcv_out")" -v r_bytes="$rcv_bytes" -v r_cpu="$rcv_cpu" \
  -v r_resent="$(kv resent "$rcv_out")" 'BEGIN {
  printf "samples: %d (%d nodes x 8 GPUs x 20 fields x %d h at 1 Hz), %d connections, batches of one node x 10 s\n",
         n, nodes, hours, conns
  printf "%-34s %12s %16s\n", "store", "samples/s", "bytes/sample"
  printf "%-34s %12.0f %16.3f  (Expanse-Ack: durable, an fdatasync before every answer)\n",
         "expanse-server /dp/v1/ingest", e_rate, e_bytes / n
  printf "%-34s %12.0f %16.3f  (Expanse-Ack: received, kept by the sender until synced; %d resent)\n",
         "expanse-server, on receipt", r_rate, r_bytes / n, r_resent
  printf "%-34s %12.0f %16.3f  (%.3f in data/ and indexdb/ without its saved caches; %.3f after force_flush, before stop; %s series)\n",
         "VictoriaMetrics /api/v1/import", v_rate, v_bytes / n, v_store / n, v_flushed / n, vm_series
  if (s_rate > 0) printf "%-34s %12.0f %16.3f\n", "SQLite, one row per sample", s_rate, s_bytes / n
  if (n_rate > 0) printf "%-34s %12.0f  (diagnostic: fsync and fdatasync made no-ops; %.2fx VictoriaMetrics)\n",
                         "expanse-server without syncs", n_rate, n_rate / v_rate
  printf "ratio expanse/VictoriaMetrics: speed %.2fx on receipt, %.2fx durable; size %.2fx of its whole directory, %.2fx of data/ and indexdb/ (<1 is smaller)\n",
         r_rate / v_rate, e_rate / v_rate, e_bytes / v_bytes, e_bytes / v_store
  printf "server CPU while ingesting (user + system), s per million samples: expanse %.2f durable, %.2f on receipt; VictoriaMetrics %.2f\n",
         e_cpu * 1e6 / n, r_cpu * 1e6 / n, v_cpu * 1e6 / n
  if (s_rate > 0) printf "ratio expanse/SQLite rows:       speed %.1fx, size %.3fx\n",
         e_rate / s_rate, (e_bytes / n) / (s_bytes / n)
  printf "timeline, 24 h job x 8 GPUs (8 x 86,400 points) -> %s series x %s points: median %s ms (first %s ms)\n",
         q_series, q_points, q_med, q_first
}'
