// Which jobs waste GPUs, from a job's `used` summary (GET /api/v1/orgs/{org}/jobs). Pure
// functions, so the rules are unit-tested in node (console/tests/unit.test.mjs).
import {duration} from './format.js';

// Waste thresholds, chosen to flag what an operator would act on, not noise.
const IDLE_SHARE_FLAG = 0.5;  // at least half the allocated GPU time idle
const IDLE_TAIL_FLAG_MS = 10 * 60 * 1000;  // GPUs idle for the last 10 minutes or more

export function wasteFlags(job) {
  const u = job.used || {};
  const flags = [];
  if (u.has_gpu_samples && u.gpus_allocated > u.gpus_active) {
    flags.push(`${u.gpus_allocated - u.gpus_active} of ${u.gpus_allocated} GPUs never active`);
  } else if (u.allocated_gpu_hours > 0 && u.idle_gpu_hours / u.allocated_gpu_hours >= IDLE_SHARE_FLAG) {
    flags.push(`${Math.round((100 * u.idle_gpu_hours) / u.allocated_gpu_hours)} % of GPU time idle`);
  }
  if (u.idle_tail_ms >= IDLE_TAIL_FLAG_MS) flags.push(`idle for the last ${duration(u.idle_tail_ms)}`);
  return flags;
}

