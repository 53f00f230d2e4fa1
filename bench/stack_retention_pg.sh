#!/usr/bin/env bash
# What one stack-retention transaction costs on PostgreSQL (docs/scaling.md, the job_stacks
# row): a real PostgreSQL from Debian (durable: fsync and synchronous commit on), the store's own
# schema (made by `expanse-server admin bootstrap`), ROWS rows of ~1.2 KB folded stacks in
# job_stacks, then BATCHES deletes of 10,000 rows each, the statement ExpireStacks runs
# (src/store/sqlite_store_stacks.cc), oldest windows first. Prints the load, each delete's
# time and rows, and the plan. Figures only; nothing is asserted.
#
#   bench/stack_retention_pg.sh [build dir] (default build/h-bench; `ninja expanse-server`)
#   ROWS=1000000 BATCHES=40 environment knobs.
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
server="${1:-build/h-bench}/bin/expanse-server"
[[ -x "$server" ]] || { echo "missing $server: ninja -C ${1:-build/h-bench} expanse-server" >&2; exit 1; }
rows="${ROWS:-1000000}" batches="${BATCHES:-40}"
source "$here/../tests/integration/lib/postgres.sh"
trap pg_stop EXIT
PG_DURABLE=1 pg_start
EXPANSE_ADMIN_PASSWORD=bench "$server" admin bootstrap --db "$PG_URI" --org bench --org-name Bench \
  --email bench@example.com >/dev/null
q() { pg_as "$PG_BIN/psql" -h "$PG_DIR" -U postgres -d expanse -Atq -c "$1"; }
now() { date +%s.%N; }
q "INSERT INTO computes (id, org_id, name, type, state, created_at_ms, created_by_user,
     pinned_daemon_version, control_plane_url, data_plane_url)
   SELECT 'cmp_bench', o.id, 'bench', 'slurm', 'active', 1, u.id, '0.1', 'https://cp', 'https://dp'
   FROM organizations o, users u LIMIT 1"
# Ten stacks a one-minute window, 100 windows a job, on 64 hosts; each stack ~1.2 KB.
start="$(now)"
q "INSERT INTO job_stacks (compute_id, job_id, host, window_start_ms, window_end_ms, folded,
     thread_state, count, gpu_idle)
   SELECT 'cmp_bench', (i / 1000)::text, 'gpu' || (i % 64), 1700000000000 + (i / 10) * 60000,
          1700000000000 + (i / 10) * 60000 + 60000,
          'train.py:main:10;' || repeat(md5(i::text), 30) || ';torch.py:mm:' || i, 'gil',
          1 + i % 50, 0
   FROM generate_series(1::bigint, ${rows}::bigint) AS i"
q "VACUUM ANALYZE job_stacks"
echo "loaded $rows rows in $(awk -v a="$start" -v b="$(now)" 'BEGIN { printf "%.1f", b - a }') s;" \
  "job_stacks with its indexes: $(q "SELECT pg_size_pretty(pg_total_relation_size('job_stacks'))")"
cut=$((1700000000000 + rows / 10 * 60000))
oldest="SELECT ctid FROM job_stacks WHERE window_end_ms < $cut ORDER BY window_end_ms LIMIT 10000"
for i in $(seq 1 "$batches"); do
  start="$(now)"
  n="$(q "WITH d AS (DELETE FROM job_stacks WHERE ctid = ANY(ARRAY($oldest)) RETURNING 1)
          SELECT count(*) FROM d")"
  echo "delete $i: $n rows in $(awk -v a="$start" -v b="$(now)" 'BEGIN { printf "%.3f", b - a }') s"
done
q "EXPLAIN DELETE FROM job_stacks WHERE ctid = ANY(ARRAY($oldest))"
