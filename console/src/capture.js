// The capture agent's evidence for the job page (docs/capture-agent.md): the summary of
// GET /api/v1/computes/{id}/jobs/{job}/capture and the list of …/segments turned into rows.
// Pure, so node's test runner checks it; pages/job.js draws the rows.
import {duration, shortDateTime} from './format.js';

// Nanoseconds as a short duration: "850 µs", "12.5 ms", "3.2 s", "1 h 4 min".
export function nanos(ns) {
  if (ns === null || ns === undefined || ns < 0) return '—';
  if (ns < 1e6) return `${Math.round(ns / 1e3)} µs`;
  if (ns < 1e9) return `${(ns / 1e6).toFixed(1)} ms`;
  const s = ns / 1e9;
  if (s < 3600) return `${s.toFixed(1)} s`;
  return `${Math.floor(s / 3600)} h ${Math.floor((s % 3600) / 60)} min`;
}

export function bytes(n) {
  if (n === null || n === undefined || n < 0) return '—';
  const units = ['B', 'KiB', 'MiB', 'GiB', 'TiB'];
  let v = n;
  let i = 0;
  while (v >= 1024 && i < units.length - 1) {
    v /= 1024;
    i++;
  }
  return i === 0 ? `${v} B` : `${v.toFixed(1)} ${units[i]}`;
}

// A CUDA kernel name shortened for a table cell: a template's arguments and a long mangled
// name are cut; the cell's title keeps the whole name.
export function shortKernel(name) {
  const angle = name.indexOf('<');
  const base = angle > 0 ? `${name.slice(0, angle)}<…>` : name;
  return base.length > 60 ? `${base.slice(0, 57)}…` : base;
}

const DIRECTIONS = {htod: 'host → device', dtoh: 'device → host', dtod: 'device → device',
  htoh: 'host → host', ptop: 'peer → peer', other: 'other'};
const SYNCS = {device: 'cudaDeviceSynchronize', stream: 'stream synchronize',
  event: 'event synchronize', stream_wait_event: 'stream wait event', other: 'other'};

// {empty, headline, kernels, copies, syncs, ranges}: each a list of table rows (arrays of
// cell texts, the first cell {text, title} for names); shares are of the kernels' GPU time.
export function captureRows(s) {
  if (!s || !s.windows) return {empty: true};
  const gpu = s.kernels.gpu_ns || 0;
  const share = (ns) => (gpu ? `${((100 * ns) / gpu).toFixed(1)} %` : '—');
  const hosts = new Set((s.processes || []).map((p) => p.host));
  const kernels = s.kernels.top.map((k) => [{text: shortKernel(k.name), title: k.name},
    String(k.count), nanos(k.gpu_ns), share(k.gpu_ns)]);
  if (s.kernels.other && s.kernels.other.count) {
    kernels.push([{text: 'other kernels', title: 'kernels outside each window’s top 20'},
      String(s.kernels.other.count), nanos(s.kernels.other.gpu_ns), share(s.kernels.other.gpu_ns)]);
  }
  const copies = Object.entries(s.memcpy || {}).map(([dir, c]) => [{text: DIRECTIONS[dir] || dir, title: dir},
    String(c.count), bytes(c.bytes), nanos(c.gpu_ns)]);
  if (s.memset && s.memset.count) copies.push([{text: 'memset', title: 'memset'}, String(s.memset.count), bytes(s.memset.bytes), nanos(s.memset.gpu_ns)]);
  const syncs = Object.entries(s.sync || {}).map(([type, x]) => [{text: SYNCS[type] || type, title: type},
    String(x.count), nanos(x.wall_ns)]);
  const ranges = (s.nvtx && s.nvtx.ranges || []).map((r) => [{text: r.name, title: r.name}, String(r.count), nanos(r.wall_ns)]);
  const headline = `${s.kernels.count} kernels, ${nanos(gpu)} of GPU time, from ${s.processes.length} ` +
    `process${s.processes.length === 1 ? '' : 'es'} on ${hosts.size} host${hosts.size === 1 ? '' : 's'}` +
    ` (${s.windows} windows${s.truncated ? ', the oldest only' : ''})` +
    (s.dropped_records ? `; ${s.dropped_records} records dropped by CUPTI` : '');
  return {empty: false, headline, kernels, copies, syncs, ranges};
}

const TRIGGERS = {gpu_idle: 'a GPU went idle', throughput_drop: 'throughput dropped'};

// CUPTI's stall reason names, shortened: "smsp__pcsamp_warps_issue_stalled_long_scoreboard"
// reads "long scoreboard" (the full name stays in the cell's title).
export function stallName(name) {
  return String(name).replace(/^smsp__pcsamp_warps_issue_stalled_/, '').replace(/^smsp__pcsamp_/, '')
    .replace(/_/g, ' ');
}

// What PC sampling found in the window (the server's brief of otherData.pc_sampling): where the
// warps stood, as shares of the samples of the five main stall reasons the brief lists, and
// the busiest kernel with its main stall; or why the node did not sample. null when the
// segment says nothing about it.
export function pcSamplingCell(pc) {
  if (!pc || !pc.state) return null;
  if (pc.state !== 'sampled') {
    return {text: pc.state === 'restricted' ? 'not allowed on this node' : 'unavailable',
      title: pc.reason || '', muted: true};
  }
  const total = (pc.stall_reasons || []).reduce((sum, [, n]) => sum + n, 0);
  if (!total) return {text: 'no samples', title: '', muted: true};
  const shares = (pc.stall_reasons || []).slice(0, 3)
    .map(([name, n]) => `${stallName(name)} ${Math.round(100 * n / total)} %`);
  const top = (pc.functions || [])[0];
  const title = (pc.stall_reasons || []).map(([name, n]) => `${name}: ${n}`).join('\n') +
    (top ? `\nbusiest: ${top.name} (${top.samples} samples, mostly ${top.stall})` : '');
  return {text: shares.join(', ') + (top ? `; busiest ${shortKernel(top.name)}` : ''), title, muted: false};
}

// The job's trace segments (GET …/jobs/{job}/segments), one row each: where and when the window
// was, why it was recorded, its size, where the warps stalled (PC sampling), and the link that
// downloads it as the Chrome trace file Perfetto opens (the server's own name for it, which the
// link's download attribute keeps).
export function segmentRows(answer) {
  return ((answer && answer.segments) || []).map((s) => ({
    host: s.host,
    pid: String(s.pid),
    window: `${shortDateTime(s.window_start_ms)}, ${duration(s.window_end_ms - s.window_start_ms)}`,
    reason: TRIGGERS[s.trigger_reason] || s.trigger_reason,
    size: bytes(s.bytes),
    events: String(s.events),
    stalls: pcSamplingCell(s.pc_sampling),
    href: s.download,
    filename: s.file_name || `seg-${s.host}-${s.pid}-${s.window_start_ms}.json`,
  }));
}

// A time of day to the second, for windows ten seconds apart.
function clock(ms) {
  return new Date(ms).toLocaleTimeString(undefined, {hour: '2-digit', minute: '2-digit', second: '2-digit', hour12: false});
}

// The agent's windows one by one (the summary's timeline: each process's aggregate over one
// window), newest first, at most `limit`: when, which process, its kernels and their GPU time
// (with the share of the window's length: above 100 % when kernels overlapped, on several
// streams or GPUs), the window's longest kernel, bytes copied and time waited in
// synchronisation. {rows, note}: the note says when there were more windows than rows.
export function windowRows(s, limit = 100) {
  const timeline = (s && s.timeline) || [];
  const rows = timeline.slice(-limit).reverse().map((w) => {
    const ms = w.end_ms - w.start_ms;
    const share = ms > 0 ? ` (${Math.round(w.kernel_ns / (ms * 1e4))} %)` : '';
    const top = w.top_kernel;
    return {
      window: {text: `${new Date(w.start_ms).toLocaleDateString(undefined, {month: 'short', day: 'numeric'})}, ${clock(w.start_ms)}–${clock(w.end_ms)}`,
        title: `${new Date(w.start_ms).toISOString()} to ${new Date(w.end_ms).toISOString()}`},
      process: `${w.host} · ${w.pid}`,
      kernels: `${w.kernel_count ?? '—'} · ${nanos(w.kernel_ns)}${share}`,
      top: top ? {text: `${shortKernel(top.name)} · ${nanos(top.gpu_ns)}`, title: `${top.name}: ${top.count} launches`}
        : {text: '—', title: 'no kernel in this window'},
      copied: bytes(w.memcpy_bytes),
      sync: nanos(w.sync_ns),
    };
  });
  const total = Math.max((s && s.windows) || 0, timeline.length);
  const note = total > rows.length ? `The newest ${rows.length} of ${total} windows.` : '';
  return {rows, note};
}
