// What the controller's diagnostics say about the daemon's own health, as lines the compute page
// shows in its summary: a crash loop (systemd restarting the daemon again and again) and records
// a worker wrote that the controller had to refuse. Both are otherwise buried in the raw
// diagnostics, and a restarted daemon looks like a fresh, healthy one.

// "" when every run ended cleanly; else how many did not, and the last reason.
export function runsProblem(runs) {
  if (!runs || !(runs.unclean_exits > 0)) return '';
  const times = runs.unclean_exits === 1 ? 'once' : `${runs.unclean_exits} times`;
  const reason = runs.last_unclean_reason ? `; last: ${runs.last_unclean_reason}` : '';
  return `ended without a clean stop ${times} in ${runs.starts} starts${reason}`;
}

// "" when no worker record was refused; else the count and the hosts, worst first.
export function refusedRecordsProblem(diagnostics) {
  const total = diagnostics?.bad_worker_records ?? 0;
  if (!(total > 0)) return '';
  const byHost = Object.entries(diagnostics.bad_worker_records_by_host || {})
    .sort((a, b) => (b[1].records ?? 0) - (a[1].records ?? 0));
  const hosts = byHost.slice(0, 3)
    .map(([host, t]) => `${host}: ${t.records} (${t.last_problem || t.last_reason || 'refused'})`);
  const more = byHost.length > 3 ? `; and ${byHost.length - 3} more hosts` : '';
  return `${total} refused${hosts.length ? ' — ' + hosts.join('; ') : ''}${more}`;
}

// How many of the workers that sampled (their reports are fresh) supply one capability, as the
// compute page's capability table sums each column up: "0 of 1 sampled worker nodes" under CUPTI
// means the one worker sends baseline samples but no CUPTI counters, not that GPU telemetry is
// missing. "ok" supplies it; degraded, absent or disabled do not.
export function workersSupplying(workers, key) {
  const reports = workers?.reports || [];
  const supplying = reports.filter((r) => r?.capabilities?.[key]?.state === 'ok').length;
  return `${supplying} of ${reports.length} sampled worker nodes`;
}
