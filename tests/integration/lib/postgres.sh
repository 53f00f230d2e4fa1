# A real PostgreSQL server from Debian's package for a test: initdb in a fresh directory, a
# Unix socket there only (no TCP port), fsync off, one database "expanse". Stopped and removed
# by pg_stop. PG_DURABLE=1 keeps PostgreSQL's own durability (fsync, synchronous commit),
# as a site runs it: for benchmarks, where the WAL's flushes are part of what is measured.
# Under root the cluster belongs to the postgres account the package made (PostgreSQL refuses
# to run as root).
#
#   pg_start   sets PG_DIR and PG_URI (postgresql://postgres@/expanse?host=$PG_DIR)
#   pg_stop    stops it (fast shutdown) and removes its directory
#   pg_pause   stops it, keeping its data, until pg_resume starts it again

pg_as() {
  if [[ "$(id -u)" == 0 ]]; then
    setpriv --reuid=postgres --regid=postgres --init-groups -- "$@"
  else
    "$@"
  fi
}

pg_start() {
  PG_BIN="$(pg_config --bindir 2>/dev/null || echo /usr/lib/postgresql/15/bin)"
  PG_DIR="$(mktemp -d "${TMPDIR:-/tmp}/expanse-pg.XXXXXX")"
  [[ "$(id -u)" == 0 ]] && chown postgres: "$PG_DIR"
  pg_as "$PG_BIN/initdb" -D "$PG_DIR/data" -U postgres --auth=trust -E UTF8 --locale=C \
    --no-sync >"$PG_DIR/initdb.log" 2>&1 || { cat "$PG_DIR/initdb.log" >&2; return 1; }
  pg_resume
  pg_as "$PG_BIN/createdb" -h "$PG_DIR" -U postgres expanse
  PG_URI="postgresql://postgres@/expanse?host=$PG_DIR"
}

pg_resume() {
  local durability="-c fsync=off -c synchronous_commit=off"
  [[ "${PG_DURABLE:-}" == 1 ]] && durability=""
  pg_as "$PG_BIN/pg_ctl" start -w -t 60 -D "$PG_DIR/data" -l "$PG_DIR/log" \
    -o "-c listen_addresses='' -k $PG_DIR $durability" >/dev/null
}

pg_pause() {
  pg_as "$PG_BIN/pg_ctl" stop -w -D "$PG_DIR/data" -m fast >/dev/null
}

pg_stop() {
  [[ -n "${PG_DIR:-}" && -d "$PG_DIR" ]] || return 0
  pg_as "$PG_BIN/pg_ctl" stop -w -D "$PG_DIR/data" -m immediate >/dev/null 2>&1 || true
  rm -rf "$PG_DIR"
  PG_DIR=""
}
