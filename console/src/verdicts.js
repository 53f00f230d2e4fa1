// A job's verdicts (GET /api/v1/computes/{id}/jobs/{job}/verdicts; docs/formats/verdicts.md) as
// the job page shows them. Pure functions, unit-tested in node (console/tests/unit.test.mjs).
import {duration} from './format.js';

const LABELS = {
  no_process: 'GPUs held with nothing running',
  stuck: 'Stuck: kernels resident, no work done',
  communication_wait: 'Waiting on other ranks',
  input_bound: 'Waiting for input data',
  sync_bound: 'Waiting on device synchronisation',
  host_bound: 'CPU-bound: GPUs waiting on the host',
  io_wait: 'Waiting on I/O',
  over_allocated: 'More GPUs than used',
  memory_oversized: 'GPU memory mostly unused',
  cpu_only: 'GPUs never used',
};

export function verdictLabel(code) {
  return LABELS[code] || code;
}

// "+5 min 0 s – +10 min 0 s (5 min 0 s)" relative to the job's grid start; the whole job reads "whole job".
export function verdictWhen(v, from_ms, to_ms) {
  if (v.from_ms <= from_ms && v.to_ms >= to_ms) return 'whole job';
  const at = (ms) => (ms - from_ms < 1000 ? 'start' : `+${duration(ms - from_ms)}`);
  return `${at(v.from_ms)} – ${at(v.to_ms)} (${duration(v.to_ms - v.from_ms)})`;
}

// Rows for the verdicts table, in the server's order.
export function verdictRows(answer) {
  return (answer.verdicts || []).map((v) => ({
    code: v.code,
    label: verdictLabel(v.code),
    when: verdictWhen(v, answer.from_ms, answer.to_ms),
    confidence: `${Math.round(100 * v.confidence)} %`,
    gpus: (v.gpus || []).length,
    suggestion: v.suggestion,
    evidence: JSON.stringify(v.evidence, null, 2),
  }));
}
