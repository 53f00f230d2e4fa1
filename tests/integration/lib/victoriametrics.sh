# A real VictoriaMetrics single-node server from Debian's package for a test: its data in a
# fresh directory, a free loopback port, the flags docs/scaling.md asks of a site's store (one
# sample per series and timestamp; queries see the newest samples). Stopped and removed by
# vm_stop.
#
#   vm_start    sets VM_DIR, VM_URL (http://127.0.0.1:PORT) and VM_PID; with VM_CPUS set (a
#               taskset CPU list) it runs on those CPUs only, from its start (it sizes its
#               worker pools by the CPUs it may use)
#   vm_pause    stops it (SIGTERM: it saves what it holds in memory), keeping its data, until
#               vm_resume starts it again on the port. Not -9: what VictoriaMetrics loses in a
#               crash (its last second or so) is its own durability, not what the test checks
#   vm_count QUERY_SELECTOR FROM_S TO_S   samples of the selected series in [FROM_S, TO_S], summed
#   vm_stop     stops it and removes its directory

vm_start() {
  VM_DIR="$(mktemp -d "${TMPDIR:-/tmp}/expanse-vm.XXXXXX")"
  VM_PORT="$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')"
  VM_URL="http://127.0.0.1:$VM_PORT"
  vm_resume
}

vm_resume() {
  ${VM_CPUS:+taskset -c "$VM_CPUS"} victoria-metrics -storageDataPath="$VM_DIR/data" -httpListenAddr="127.0.0.1:$VM_PORT" \
    -retentionPeriod=100y -dedup.minScrapeInterval=1ms -search.latencyOffset=0s \
    -loggerLevel=ERROR >>"$VM_DIR/log" 2>&1 &
  VM_PID=$!
  local i
  for i in $(seq 1 200); do
    curl -fsS -o /dev/null "$VM_URL/health" 2>/dev/null && return 0
    sleep 0.05
  done
  cat "$VM_DIR/log" >&2
  return 1
}

vm_pause() {
  kill -TERM "$VM_PID" 2>/dev/null || true
  wait "$VM_PID" 2>/dev/null || true
}

vm_count() {
  local selector="$1" from="$2" to="$3"
  curl -fsS "$VM_URL/internal/force_flush" >/dev/null
  curl -fsS "$VM_URL/api/v1/query" --data-urlencode "query=sum(count_over_time(${selector}[$((to - from + 1))s]))" \
    --data-urlencode "time=$to" --data-urlencode nocache=1 | jq -r '.data.result[0].value[1] // "0"'
}

vm_stop() {
  [[ -n "${VM_DIR:-}" && -d "$VM_DIR" ]] || return 0
  vm_pause
  rm -rf "$VM_DIR"
  VM_DIR=""
}
