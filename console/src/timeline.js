// Per-GPU timelines of one metric, drawn with uPlot from the server's downsampled buckets
// (`[t_ms, min, max, mean]`, one series per GPU or per host). Buckets of different series can
// differ where samples are missing; the x axis is their union and gaps stay gaps.

// [metric, label naming its source, unit, scale from the stored value to the unit]. The
// hardware counters are stored as ratios 0..1 (docs/formats/metrics.md) and drawn in percent.
export const METRICS = [
  ['gpu.sm_util', 'GPU utilisation (NVML: time a kernel ran)', '%', 1],
  ['gpu.sm_active', 'SM activity (CUPTI counters)', '%', 100],
  ['gpu.tensor_active', 'Tensor pipe activity (CUPTI counters)', '%', 100],
  ['gpu.dram_active', 'DRAM activity (CUPTI counters)', '%', 100],
  ['gpu.sm_inst_executed', 'SM instructions executed, of peak (CUPTI counters)', '%', 100],
  // DCGM's own readings keep their source in the name (docs/formats/dcgmi.md): profiling fields
  // appear where CUPTI does not hold the counters, health and interconnect ones always.
  ['gpu.dcgm.sm_active', 'SM activity (DCGM profiling)', '%', 100],
  ['gpu.dcgm.tensor_active', 'Tensor pipe activity (DCGM profiling)', '%', 100],
  ['gpu.dcgm.dram_active', 'DRAM activity (DCGM profiling)', '%', 100],
  ['gpu.dcgm.nvlink_bytes_per_s', 'NVLink bandwidth (DCGM)', 'MB/s', 1e-6],
  ['gpu.dcgm.pcie_replays', 'PCIe replays, cumulative (DCGM)', 'count', 1],
  ['gpu.dcgm.health', 'Health (DCGM: 0 pass, 1 warn, 2 fail)', 'level', 1],
  ['gpu.mem_used_mib', 'GPU memory used (NVML)', 'MiB', 1],
  ['gpu.mem_util', 'Memory bandwidth utilisation (NVML)', '%', 1],
  ['gpu.power_w', 'Power (NVML)', 'W', 1],
  ['job.cpu_used_cores', 'CPU cores used (per host)', 'cores', 1],
  ['job.mem_used_mib', 'Memory used (per host)', 'MiB', 1],
  ['job.io_pressure_some', 'Time stalled on I/O (cgroup v2 pressure, per host)', '%', 100],
  // Sampled once a second on any cgroup version: the v1 stand-in for the pressure above.
  ['job.uninterruptible_some', 'Samples with a thread in uninterruptible sleep (state D, per host)', '%', 100],
];

const COLORS = ['#1f6feb', '#d1242f', '#1a7f37', '#9a6700', '#8250df', '#bf3989', '#0a7b83', '#57606a'];

export function seriesLabel(s) {
  if (s.gpu_uuid) return `${s.host} ${s.gpu_uuid.length > 16 ? s.gpu_uuid.slice(0, 15) + '…' : s.gpu_uuid}`;
  return s.host;
}

// [xs (seconds), ys per series, each mean × scale] for uPlot, and whether any point exists.
export function toColumns(timeline, scale = 1) {
  const times = new Set();
  for (const s of timeline.series) for (const p of s.points) times.add(p[0]);
  const xs = [...times].sort((a, b) => a - b);
  const index = new Map(xs.map((t, i) => [t, i]));
  const ys = timeline.series.map((s) => {
    const column = new Array(xs.length).fill(null);
    for (const p of s.points) column[index.get(p[0])] = p[3] * scale;
    return column;
  });
  return {data: [xs.map((t) => t / 1000), ...ys], empty: xs.length === 0};
}

export function drawTimeline(target, timeline, unit, width, scale = 1) {
  const {data, empty} = toColumns(timeline, scale);
  target.replaceChildren();
  if (empty) {
    const p = document.createElement('p');
    p.className = 'muted';
    p.textContent = 'No samples of this metric for this job.';
    target.append(p);
    return null;
  }
  const opts = {
    width,
    height: 260,
    scales: {x: {time: true}, y: unit === '%' ? {range: [0, 100]} : {}},
    axes: [{}, {label: unit, size: 60}],
    series: [{label: 'time'}, ...timeline.series.map((s, i) => ({
      label: seriesLabel(s),
      stroke: COLORS[i % COLORS.length],
      width: 1.5,
      // Buckets without a sample (a late sample, a sampler restart) are bridged rather than
      // drawn as broken lines; the server's min/max per bucket keep real dips visible.
      spanGaps: true,
      value: (u, v) => (v === null ? '—' : `${v.toFixed(1)} ${unit}`),
    }))],
  };
  return new window.uPlot(opts, data, target);
}
