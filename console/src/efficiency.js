// The efficiency page's logic (GET /api/v1/orgs/{org}/efficiency; docs/formats/idle-ledger.md):
// the query for a group-by, period and compute, the answer's groups as table rows in GPU-hours,
// sorting, and the totals. Pure functions, unit-tested in node (console/tests/unit.test.mjs).

export const GROUP_BYS = ['user', 'account', 'partition'];

// [value in the page's URL, label, length in ms]
export const PERIODS = [
  ['24h', 'Last 24 hours', 24 * 3600_000],
  ['7d', 'Last 7 days', 7 * 24 * 3600_000],
  ['30d', 'Last 30 days', 30 * 24 * 3600_000],
];
export const DEFAULT_PERIOD = '7d';

// The page's choices from its URL query, anything unknown replaced by the default.
export function efficiencyChoices(query) {
  const groupBy = GROUP_BYS.includes(query.get('group_by')) ? query.get('group_by') : 'user';
  const period = PERIODS.some(([p]) => p === query.get('period')) ? query.get('period') : DEFAULT_PERIOD;
  const limit = /^[1-9][0-9]{0,4}$/.test(query.get('limit') || '') ? query.get('limit') : '';
  return {groupBy, period, compute: query.get('compute') || '', limit};
}

// The API path for these choices over the period ending at `nowMs`; `format` 'csv' for the
// download. The window is fixed here so that the table and its CSV count the same jobs.
export function efficiencyPath(org, choices, nowMs, format = '') {
  const [, , length] = PERIODS.find(([p]) => p === choices.period);
  const params = new URLSearchParams({group_by: choices.groupBy, from: String(nowMs - length), to: String(nowMs)});
  if (choices.compute) params.set('compute', choices.compute);
  if (choices.limit) params.set('limit', choices.limit);
  if (format) params.set('format', format);
  return `/api/v1/orgs/${encodeURIComponent(org)}/efficiency?${params.toString()}`;
}

const hoursOf = (seconds) => (typeof seconds === 'number' && Number.isFinite(seconds) ? seconds / 3600 : null);

// A group (or the totals) as a row: GPU-seconds become GPU-hours; idle_share stays null where
// nothing was allocated.
function toRow(g, key) {
  return {
    key,
    jobs: g.jobs ?? 0,
    gpus: g.gpus ?? 0,
    allocated_h: hoursOf(g.allocated_gpu_s),
    active_h: hoursOf(g.active_gpu_s),
    idle_h: hoursOf(g.idle_gpu_s),
    idle_share: typeof g.idle_share === 'number' ? g.idle_share : null,
    never_used_gpus: g.never_used_gpus ?? 0,
  };
}

// The groups in the server's order (most idle first).
export function efficiencyRows(answer) {
  return ((answer && answer.groups) || []).map((g) => toRow(g, g.key ?? ''));
}

// The totals row: the server's, which counts every job once.
export function efficiencyTotals(answer) {
  return toRow((answer && answer.totals) || {}, null);
}

// The table's columns: [row field, heading]. The first one's heading is the group-by.
export const COLUMNS = [
  ['key', null],
  ['jobs', 'Jobs'],
  ['gpus', 'GPUs'],
  ['allocated_h', 'Allocated GPU-h'],
  ['active_h', 'Active GPU-h'],
  ['idle_h', 'Idle GPU-h'],
  ['idle_share', 'Idle share'],
  ['never_used_gpus', 'Never-used GPUs'],
];

// Sorted copy; missing values (null) last in either direction, names by code point so the
// order does not depend on the browser's locale.
export function sortRows(rows, key, dir) {
  return [...rows].sort((a, b) => {
    const x = a[key];
    const y = b[key];
    if (x === y) return 0;
    if (x === null || x === undefined) return 1;
    if (y === null || y === undefined) return -1;
    return dir * (x < y ? -1 : 1);
  });
}

// GPU-hours for the table: two decimals below 10, one below 1000, whole hours above; a small
// non-zero figure never reads as zero.
export function gpuHours(value) {
  if (value === null || value === undefined || !Number.isFinite(value)) return '—';
  if (value === 0) return '0';
  if (value < 0.005) return '< 0.01';
  if (value < 10) return value.toFixed(2);
  if (value < 1000) return value.toFixed(1);
  return String(Math.round(value)).replace(/\B(?=(\d{3})+(?!\d))/g, ',');
}

// What the page says when the server counted only part of the jobs (null when it counted all):
// the server's own reason, or one made from its limit.
export function truncationNotice(answer) {
  if (!answer || answer.truncated !== true) return null;
  if (typeof answer.truncated_reason === 'string' && answer.truncated_reason) return answer.truncated_reason;
  return `only the ${answer.job_limit} most recently started jobs were counted.`;
}

export function share(value) {
  if (value === null || value === undefined || !Number.isFinite(value)) return '—';
  return `${Math.round(value * 100)} %`;
}
