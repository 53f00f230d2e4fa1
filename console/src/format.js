// Number, time and size formats shared by the pages. Missing values show as an em dash.

const DASH = '—';

export function percent(value, digits = 0) {
  if (value === null || value === undefined || Number.isNaN(value)) return DASH;
  return `${Number(value).toFixed(digits)} %`;
}

export function ratioPercent(value) {
  if (value === null || value === undefined || value < 0) return DASH;
  return `${Math.round(value * 100)} %`;
}

export function mib(value) {
  if (value === null || value === undefined || value < 0) return DASH;
  if (value >= 1024) return `${(value / 1024).toFixed(1)} GiB`;
  return `${Math.round(value)} MiB`;
}

export function hours(value) {
  if (value === null || value === undefined) return DASH;
  if (value < 0.1) return `${Math.round(value * 60)} min`;
  return `${value.toFixed(1)} h`;
}

export function duration(ms) {
  if (ms === null || ms === undefined || ms < 0) return DASH;
  const s = Math.round(ms / 1000);
  if (s < 60) return `${s} s`;
  if (s < 3600) return `${Math.floor(s / 60)} min ${s % 60} s`;
  const h = Math.floor(s / 3600);
  if (h < 48) return `${h} h ${Math.floor((s % 3600) / 60)} min`;
  return `${Math.floor(h / 24)} d ${h % 24} h`;
}

export function age(ms) {
  if (ms === null || ms === undefined) return 'never';
  return `${duration(ms)} ago`;
}

export function dateTime(ms) {
  if (!ms) return DASH;
  return new Date(ms).toLocaleString(undefined, {hour12: false});
}

// Month, day, hours and minutes: enough to tell jobs apart in a list.
export function shortDateTime(ms) {
  if (!ms) return DASH;
  return new Date(ms).toLocaleString(undefined, {month: 'short', day: 'numeric', hour: '2-digit', minute: '2-digit', hour12: false});
}

export function timeLimit(seconds) {
  if (!seconds) return DASH;
  return duration(seconds * 1000);
}
