// One job: requested against used, its GPUs and hosts, its verdicts (a table, and a ribbon of
// their intervals over the timeline), per-GPU timelines of a chosen metric (downsampled by the
// server to about one point per pixel), its Prolog/Epilog events, what its processes did on
// their GPUs (the capture agent's kernels, copies, syncs and NVTX ranges), and its Python stacks
// (top frames and a flame graph) when it has any.
import {api, path} from '../api.js';
import {orgHash} from '../app.js';
import {definitionList, errorBox, h, page} from '../dom.js';
import {dateTime, duration, hours, mib, percent, ratioPercent, timeLimit} from '../format.js';
import {captureRows, segmentRows, windowRows} from '../capture.js';
import {flameGraph, noStacksText, shortFrame} from '../flame.js';
import {METRICS, drawTimeline} from '../timeline.js';
import {drawRibbon} from '../verdict_ribbon.js';
import {verdictRows} from '../verdicts.js';
import {wasteFlags} from '../waste.js';

function requestedVsUsed(j) {
  const u = j.used;
  const r = j.requested;
  const samples = u.has_gpu_samples;
  return h('table', {class: 'data compact', id: 'requested-used'},
    h('caption', {}, 'Requested and used'),
    h('thead', {}, h('tr', {}, ['', 'Requested', 'Used'].map((t) => h('th', {scope: 'col'}, t)))),
    h('tbody', {},
      h('tr', {}, h('th', {scope: 'row'}, 'GPUs'), h('td', {}, r.gpus), h('td', {}, samples ? `${u.gpus_active} active of ${u.gpus_allocated} allocated` : `${u.gpus_allocated} allocated, no samples`)),
      h('tr', {}, h('th', {scope: 'row'}, 'GPU utilisation'), h('td', {}, '—'), h('td', {}, samples ? `mean ${percent(u.sm_mean)}, peak ${percent(u.sm_peak)}` : '—')),
      h('tr', {}, h('th', {scope: 'row'}, 'GPU memory'), h('td', {}, '—'), h('td', {}, samples ? `peak ${mib(u.gpu_mem_peak_mib)}` : '—')),
      h('tr', {}, h('th', {scope: 'row'}, 'GPU time'), h('td', {}, '—'), h('td', {}, `${hours(u.allocated_gpu_hours)} allocated, ${hours(u.idle_gpu_hours)} idle`)),
      h('tr', {}, h('th', {scope: 'row'}, 'CPUs'), h('td', {}, r.cpus || '—'), h('td', {}, `efficiency ${ratioPercent(u.cpu_efficiency)}`)),
      h('tr', {}, h('th', {scope: 'row'}, 'Memory'), h('td', {}, r.mem_mib ? mib(r.mem_mib) : '—'), h('td', {}, `peak / requested ${ratioPercent(u.mem_efficiency)}`)),
      h('tr', {}, h('th', {scope: 'row'}, 'Nodes'), h('td', {}, r.nodes || '—'), h('td', {}, (j.hosts || []).join(', ') || '—')),
      h('tr', {}, h('th', {scope: 'row'}, 'Time'), h('td', {}, timeLimit(r.time_limit_s)), h('td', {}, j.start_ms ? duration((j.end_ms || Date.now()) - j.start_ms) : 'not started'))));
}

// The chart and, over it, the verdict ribbon on the same x axis: the verdicts' time range (the
// job's, from its first allocation to its end), which the chart is set to once drawn.
// `verdictsReply` resolves to {answer} or {error}; the ribbon waits for it.
function timelineSection(compute, job, j, verdictsReply) {
  const select = h('select', {id: 'timeline-metric'}, METRICS.map(([m, label]) => h('option', {value: m}, label)));
  const chart = h('div', {class: 'chart', id: 'timeline'});
  const ribbonHolder = h('div', {class: 'ribbon-holder'});
  const load = async () => {
    const [metric, , unit, scale] = METRICS.find(([m]) => m === select.value);
    const width = Math.max(320, Math.min(1200, chart.clientWidth || 900));
    // About a point per two pixels, but no bucket shorter than 2 s: samples come at about 1 Hz,
    // and shorter buckets would be mostly empty.
    const span = (j.end_ms || Date.now()) - (j.start_ms || Date.now());
    const points = Math.max(2, Math.min(Math.round(width / 2), Math.ceil(span / 2000)));
    chart.setAttribute('aria-busy', 'true');
    let plot = null;
    try {
      const t = await api.get(path`/api/v1/computes/${compute}/jobs/${job}/timeline` +
                              `?metric=${encodeURIComponent(metric)}&points=${points}`);
      plot = drawTimeline(chart, t, unit, width, scale);
      chart.dataset.series = String(t.series.length);
      chart.dataset.points = String(t.series.reduce((n, s) => n + s.points.length, 0));
    } catch (err) {
      chart.replaceChildren(errorBox(err));
    }
    const {answer} = await verdictsReply;
    let left = 0;
    let plotWidth = width;
    const ribbon = (range) => ribbonHolder.replaceChildren(...[drawRibbon(answer, range, left, plotWidth)].filter(Boolean));
    if (answer && answer.to_ms > answer.from_ms && plot) {
      // The plot area (inside the y axis), in CSS pixels from the holder's left edge.
      const area = plot.over.getBoundingClientRect();
      left = Math.max(0, area.left - ribbonHolder.getBoundingClientRect().left);
      plotWidth = area.width;
      // The ribbon follows the chart's x axis, also when the user zooms in (drag) or out (double click).
      plot.hooks.setScale = [...(plot.hooks.setScale || []), (u, key) => {
        if (key === 'x') ribbon({from_ms: u.scales.x.min * 1000, to_ms: u.scales.x.max * 1000});
      }];
      plot.setScale('x', {min: answer.from_ms / 1000, max: answer.to_ms / 1000});
    }
    ribbon(answer ? {from_ms: answer.from_ms, to_ms: answer.to_ms} : {from_ms: 0, to_ms: 0});
    chart.removeAttribute('aria-busy');
  };
  select.addEventListener('change', load);
  return {element: h('section', {'aria-labelledby': 'timeline-heading'},
    h('h2', {id: 'timeline-heading'}, 'Timeline'), h('label', {}, 'Metric ', select), ribbonHolder, chart), load};
}

function gpuTable(gpus) {
  if (!gpus.length) return h('p', {class: 'muted'}, 'No GPUs were allocated to this job.');
  return h('table', {class: 'data', id: 'job-gpus'},
    h('thead', {}, h('tr', {}, ['Host', 'GPU index', 'Minor', 'UUID', 'From', 'To'].map((t) => h('th', {scope: 'col'}, t)))),
    h('tbody', {}, gpus.map((g) => h('tr', {}, h('td', {}, g.host), h('td', {}, g.gpu_index), h('td', {}, g.gpu_minor),
      h('td', {}, h('code', {}, g.gpu_uuid)), h('td', {}, dateTime(g.from_ms)), h('td', {}, g.to_ms ? dateTime(g.to_ms) : 'open')))));
}

function eventList(events) {
  if (!events.length) return h('p', {class: 'muted'}, 'No Prolog/Epilog events recorded.');
  return h('ul', {class: 'events', id: 'job-events'},
    events.map((e) => h('li', {}, `${dateTime(e.at_ms)} — ${e.kind} on ${e.host}`)));
}

async function stacksSection(compute, job, j) {
  const s = await api.get(path`/api/v1/computes/${compute}/jobs/${job}/stacks?limit=2000`);
  if (!s.total_count) return h('section', {}, h('h2', {}, 'Python stacks'), h('p', {class: 'muted'}, noStacksText(s, j)));
  const idle = s.stacks.reduce((n, x) => n + (x.gpu_idle_count || 0), 0);
  return h('section', {id: 'stacks', 'aria-labelledby': 'stacks-heading'},
    h('h2', {id: 'stacks-heading'}, 'Python stacks'),
    h('p', {}, `${s.total_count} samples, ${s.distinct_stacks} distinct stacks; ${idle} taken while the job's GPUs were idle.`),
    h('table', {class: 'data compact', id: 'top-frames'},
      h('caption', {}, 'Top frames'),
      h('thead', {}, h('tr', {}, ['Frame', 'Self', 'Total'].map((t) => h('th', {scope: 'col'}, t)))),
      h('tbody', {}, s.top_frames.slice(0, 15).map((f) => h('tr', {}, h('td', {}, h('code', {title: f.frame}, shortFrame(f.frame))),
        h('td', {}, `${f.self_count} (${percent((100 * f.self_count) / s.total_count)})`),
        h('td', {}, `${f.total_count} (${percent((100 * f.total_count) / s.total_count)})`))))),
    h('h3', {}, 'Flame graph'), flameGraph(s.stacks));
}

function captureTable(id, caption, headings, rows) {
  return h('table', {class: 'data compact', id},
    h('caption', {}, caption),
    h('thead', {}, h('tr', {}, headings.map((t) => h('th', {scope: 'col'}, t)))),
    h('tbody', {}, rows.map(([name, ...cells]) => h('tr', {},
      h('td', {}, h('code', {title: name.title}, name.text)), ...cells.map((c) => h('td', {}, c))))));
}

// The agent's windows one by one, newest first: where the GPU time went in each and what the
// process waited for.
function windowsTable(windows) {
  if (!windows.rows.length) return null;
  return h('div', {},
    h('table', {class: 'data compact', id: 'capture-windows'},
      h('caption', {}, 'Per window'),
      h('thead', {}, h('tr', {}, ['Window', 'Process', 'Kernels · GPU time', 'Longest kernel', 'Copied', 'Waited in sync']
        .map((t) => h('th', {scope: 'col'}, t)))),
      h('tbody', {}, windows.rows.map((r) => h('tr', {},
        h('td', {title: r.window.title}, r.window.text), h('td', {}, r.process), h('td', {}, r.kernels),
        h('td', {}, h('code', {title: r.top.title}, r.top.text)), h('td', {}, r.copied), h('td', {}, r.sync))))),
    windows.note ? h('p', {class: 'muted'}, windows.note) : null);
}

// The trace windows the agent recorded when a GPU of the job went idle or slowed, each a file to
// download and open in Perfetto.
function segmentsBlock(rows) {
  const heading = h('h3', {}, 'Trace segments');
  if (!rows.length) {
    return h('div', {id: 'capture-segments'}, heading, h('p', {class: 'muted'},
      'No trace segments: the agent records one when a GPU of the job goes idle or its throughput drops.'));
  }
  return h('div', {id: 'capture-segments'}, heading,
    h('p', {}, 'Each is a Chrome trace file: open it in ', h('a', {href: 'https://ui.perfetto.dev', rel: 'noopener', target: '_blank'}, 'ui.perfetto.dev'),
      ' (Open trace file) or chrome://tracing.'),
    h('table', {class: 'data compact', id: 'segment-list'},
      h('thead', {}, h('tr', {}, ['Host', 'Process', 'Window', 'Why', 'Events', 'Warps stalled on', 'Size', ''].map((t) => h('th', {scope: 'col'}, t)))),
      h('tbody', {}, rows.map((r) => h('tr', {},
        h('td', {}, r.host), h('td', {}, r.pid), h('td', {}, r.window), h('td', {}, r.reason),
        h('td', {}, r.events),
        h('td', {class: 'segment-stalls' + (r.stalls && r.stalls.muted ? ' muted' : ''), title: r.stalls ? r.stalls.title : ''},
          r.stalls ? r.stalls.text : '—'),
        h('td', {}, r.size),
        h('td', {}, h('a', {href: r.href, download: r.filename, class: 'segment-download'}, 'Download')))))));
}

// What the job's processes did on their GPUs, from the in-process capture agent: the kernels
// that took the GPU time, copies, time waiting in synchronisation, NVTX ranges.
async function captureSection(compute, job) {
  const [summary, segments] = await Promise.all([
    api.get(path`/api/v1/computes/${compute}/jobs/${job}/capture`),
    api.get(path`/api/v1/computes/${compute}/jobs/${job}/segments`)]);
  const rows = captureRows(summary);
  const heading = h('h2', {id: 'capture-heading'}, 'GPU activity (capture agent)');
  const segmentList = segmentsBlock(segmentRows(segments));
  if (rows.empty) {
    return h('section', {id: 'capture', 'aria-labelledby': 'capture-heading'}, heading,
      h('p', {class: 'muted'}, 'No CUDA activity was captured for this job.'), segmentList);
  }
  return h('section', {id: 'capture', 'aria-labelledby': 'capture-heading'}, heading,
    h('p', {}, rows.headline), segmentList,
    captureTable('capture-kernels', 'Top kernels', ['Kernel', 'Launches', 'GPU time', 'Share'], rows.kernels),
    rows.copies.length ? captureTable('capture-copies', 'Copies', ['Direction', 'Count', 'Bytes', 'GPU time'], rows.copies) : null,
    rows.syncs.length ? captureTable('capture-syncs', 'Synchronisation', ['Kind', 'Count', 'Time waited'], rows.syncs) : null,
    rows.ranges.length ? captureTable('capture-nvtx', 'NVTX ranges', ['Range', 'Count', 'Time'], rows.ranges) : null,
    windowsTable(windowRows(summary)));
}

// Why the GPUs were idle or not working, per interval, each with its evidence on demand. Row i
// is verdict i of the answer (the ribbon's bands open them by that index).
function verdictsSection(answer) {
  const rows = verdictRows(answer);
  const heading = h('h2', {id: 'verdicts-heading'}, 'Verdicts');
  if (!rows.length) {
    return h('section', {id: 'verdicts', 'aria-labelledby': 'verdicts-heading'}, heading,
      h('p', {class: 'muted'}, 'Nothing to report: no interval where the GPUs sat idle or spun for a reason the data shows.'));
  }
  return h('section', {id: 'verdicts', 'aria-labelledby': 'verdicts-heading'}, heading,
    h('table', {class: 'data compact', id: 'verdict-list'},
      h('thead', {}, h('tr', {}, ['Verdict', 'When', 'GPUs', 'Confidence', 'Suggestion'].map((t) => h('th', {scope: 'col'}, t)))),
      h('tbody', {}, rows.map((r, i) => h('tr', {'data-code': r.code, id: `verdict-${i}`},
        h('td', {}, r.label, h('br'), h('code', {}, r.code)), h('td', {}, r.when), h('td', {}, r.gpus),
        h('td', {}, r.confidence),
        h('td', {}, r.suggestion, h('details', {}, h('summary', {}, 'Evidence'), h('pre', {}, r.evidence))))))));
}

export async function render({compute, job}) {
  const j = await api.get(path`/api/v1/computes/${compute}/jobs/${job}`);
  const flags = wasteFlags(j);
  const verdictsReply = api.get(path`/api/v1/computes/${compute}/jobs/${job}/verdicts`)
    .then((answer) => ({answer}), (error) => ({error}));
  const timeline = timelineSection(compute, job, j, verdictsReply);
  const stacksHolder = h('div', {}, h('p', {class: 'muted'}, 'Loading stacks…'));
  const captureHolder = h('div', {}, h('p', {class: 'muted'}, 'Loading GPU activity…'));
  const verdictsHolder = h('div', {}, h('p', {class: 'muted'}, 'Loading verdicts…'));
  page(`Job ${j.job_id}${j.name ? ` · ${j.name}` : ''}`,
    h('p', {}, h('a', {href: orgHash(`jobs?compute=${encodeURIComponent(compute)}`)}, '← Jobs')),
    definitionList([
      ['State', h('span', {class: `badge job-${j.state.toLowerCase()}`}, j.state)],
      ['User', j.user], ['Account', j.account], ['Partition', j.partition],
      ['Submitted', dateTime(j.submit_ms)], ['Started', dateTime(j.start_ms)], ['Ended', dateTime(j.end_ms)],
    ]),
    flags.length ? h('div', {class: 'warning', role: 'note'}, h('strong', {}, 'Waste: '), flags.join('; ')) : null,
    requestedVsUsed(j), verdictsHolder, timeline.element,
    h('h2', {}, 'GPUs'), gpuTable(j.gpus || []),
    h('h2', {}, 'Events'), eventList(j.events || []),
    captureHolder, stacksHolder);
  await timeline.load();
  const {answer, error} = await verdictsReply;
  verdictsHolder.replaceChildren(error ? errorBox(error) : verdictsSection(answer));
  try {
    captureHolder.replaceChildren(await captureSection(compute, job));
  } catch (err) {
    captureHolder.replaceChildren(errorBox(err));
  }
  try {
    stacksHolder.replaceChildren(await stacksSection(compute, job, j));
  } catch (err) {
    stacksHolder.replaceChildren(errorBox(err));
  }
}
