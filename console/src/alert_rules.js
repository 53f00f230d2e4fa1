// How the alerts page words a rule (docs/formats/alerts.md): pure, for node's unit tests.

export const VERDICTS = ['stuck', 'no_process', 'over_allocated', 'host_bound', 'input_bound', 'io_wait',
  'communication_wait', 'sync_bound', 'memory_oversized', 'cpu_only'];

// A rule's whole-unit durations: "15 min", "2 h", "7 d", "90 s".
export function ruleSeconds(s) {
  if (s > 0 && s % 86400 === 0) return `${s / 86400} d`;
  if (s > 0 && s % 3600 === 0) return `${s / 3600} h`;
  if (s > 0 && s % 60 === 0) return `${s / 60} min`;
  return `${s} s`;
}

// What a rule listens for, in words: "stuck for 15 min", "weekly digest per user".
export function ruleTrigger(rule) {
  if (rule.kind === 'digest') {
    if (rule.period_s === 604800) return 'weekly digest per user';
    if (rule.period_s === 86400) return 'daily digest per user';
    return `digest per user every ${ruleSeconds(rule.period_s)}`;
  }
  const lasting = rule.min_duration_s > 0 ? ` for ${ruleSeconds(rule.min_duration_s)}` : '';
  return `${rule.verdict}${lasting}`;
}

// The action part of a rule: "" or "scancel after 15 min (dry run)".
export function ruleAction(rule) {
  if (!rule.action) return '';
  return `${rule.action} after ${ruleSeconds(rule.action_grace_s)}${rule.action_dry_run ? ' (dry run)' : ''}`;
}
