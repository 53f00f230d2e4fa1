// Jobs: requested against used for every job of the organisation, newest first, filterable by
// compute, state, user, account and partition (server side) and sortable by any column (here),
// with waste flagged: allocated GPUs that never worked, mostly idle GPU time, long idle tails.
import {api, path} from '../api.js';
import {orgHash} from '../app.js';
import {h, page} from '../dom.js';
import {duration, hours, mib, percent, ratioPercent, shortDateTime} from '../format.js';
import {wasteFlags} from '../waste.js';

const FILTERS = ['compute', 'state', 'user', 'account', 'partition'];
const LIMIT = 500;
function runtimeMs(j) {
  if (!j.start_ms) return null;
  return (j.end_ms || Date.now()) - j.start_ms;
}

const COLUMNS = [
  {key: 'job_id', label: 'Job', value: (j) => Number(j.job_id.split(/[+_]/)[0]) || j.job_id,
    cell: (j) => h('a', {href: orgHash(`computes/${encodeURIComponent(j.compute_id)}/jobs/${encodeURIComponent(j.job_id)}`)}, j.job_id)},
  {key: 'name', label: 'Name', value: (j) => j.name},
  {key: 'user', label: 'User/partition', value: (j) => j.user, cell: (j) => `${j.user || '—'} / ${j.partition || '—'}`},
  {key: 'state', label: 'State', value: (j) => j.state, cell: (j) => h('span', {class: `badge job-${j.state.toLowerCase()}`}, j.state)},
  {key: 'waste', label: 'Waste', value: (j) => wasteFlags(j).length,
    cell: (j) => wasteFlags(j).map((f) => h('span', {class: 'flag'}, f))},
  {key: 'start', label: 'Started', value: (j) => j.start_ms, cell: (j) => shortDateTime(j.start_ms)},
  {key: 'runtime', label: 'Runtime', value: runtimeMs, cell: (j) => duration(runtimeMs(j))},
  {key: 'gpus', label: 'GPUs req/active', value: (j) => j.requested.gpus,
    cell: (j) => `${j.requested.gpus} / ${j.used.has_gpu_samples ? j.used.gpus_active : '—'}`},
  {key: 'sm_mean', label: 'SM mean/peak', value: (j) => j.used.sm_mean,
    cell: (j) => j.used.has_gpu_samples ? `${percent(j.used.sm_mean)} / ${percent(j.used.sm_peak)}` : '—'},
  // Hardware counters (CUPTI, or DCGM's profiling fields where the helper did not count): how
  // much of the SMs and tensor pipes the job kept busy, where utilisation only says a kernel was
  // running. The source is named unless it is CUPTI alone.
  {key: 'sm_active', label: 'SM/tensor active', value: (j) => j.used.sm_active_mean ?? -1,
    cell: (j) => j.used.sm_active_mean == null ? '—'
      : `${ratioPercent(j.used.sm_active_mean)} / ${ratioPercent(j.used.tensor_active_mean)}` +
        (j.used.counters_source && j.used.counters_source !== 'cupti' ? ` (${j.used.counters_source.toUpperCase()})` : '')},
  {key: 'mem_peak', label: 'GPU mem peak', value: (j) => j.used.gpu_mem_peak_mib, cell: (j) => j.used.has_gpu_samples ? mib(j.used.gpu_mem_peak_mib) : '—'},
  {key: 'cpu_eff', label: 'CPU/mem eff.', value: (j) => j.used.cpu_efficiency ?? -1,
    cell: (j) => `${ratioPercent(j.used.cpu_efficiency)} / ${ratioPercent(j.used.mem_efficiency)}`},
  {key: 'idle_hours', label: 'Idle GPU', value: (j) => j.used.idle_gpu_hours, cell: (j) => j.used.allocated_gpu_hours > 0 ? hours(j.used.idle_gpu_hours) : '—'},
];

function compare(a, b) {
  if (a === b) return 0;
  if (a === null || a === undefined) return 1;
  if (b === null || b === undefined) return -1;
  return a < b ? -1 : 1;
}

function table(jobs, sort, onSort) {
  const column = COLUMNS.find((c) => c.key === sort.key) || COLUMNS[0];
  const sorted = [...jobs].sort((a, b) => sort.dir * compare(column.value(a), column.value(b)));
  return h('table', {class: 'data jobs', id: 'jobs'},
    h('caption', {}, `${jobs.length} job${jobs.length === 1 ? '' : 's'}`),
    h('thead', {}, h('tr', {}, COLUMNS.map((c) => h('th', {
      scope: 'col',
      'aria-sort': c.key === sort.key ? (sort.dir > 0 ? 'ascending' : 'descending') : 'none',
    }, h('button', {type: 'button', class: 'sort', onclick: () => onSort(c.key)}, c.label))))),
    h('tbody', {}, sorted.map((j) => h('tr', {'data-job': j.job_id, 'data-compute': j.compute_id, class: wasteFlags(j).length ? 'wasteful' : null},
      COLUMNS.map((c) => h('td', {class: c.key === 'waste' ? 'waste' : null}, c.cell ? c.cell(j) : (c.value(j) || '—')))))));
}

export async function render({org, query}) {
  const params = new URLSearchParams();
  for (const f of FILTERS) if (query.get(f)) params.set(f, query.get(f));
  params.set('limit', String(LIMIT));
  const [{jobs}, {computes}] = await Promise.all([
    api.get(path`/api/v1/orgs/${org}/jobs` + '?' + params.toString()),
    api.get(path`/api/v1/orgs/${org}/computes`),
  ]);
  const inputs = {};
  const form = h('form', {class: 'filters', 'aria-label': 'Filter jobs'});
  const computeSelect = h('select', {id: 'filter-compute', name: 'compute'},
    h('option', {value: ''}, 'all'), computes.map((c) => h('option', {value: c.id, selected: query.get('compute') === c.id}, c.name)));
  inputs.compute = computeSelect;
  form.append(h('label', {}, 'Compute ', computeSelect));
  const stateSelect = h('select', {id: 'filter-state', name: 'state'}, ['', 'PENDING', 'RUNNING', 'COMPLETED', 'FAILED', 'CANCELLED', 'TIMEOUT']
    .map((s) => h('option', {value: s, selected: query.get('state') === s}, s || 'all')));
  inputs.state = stateSelect;
  form.append(h('label', {}, 'State ', stateSelect));
  for (const f of ['user', 'account', 'partition']) {
    inputs[f] = h('input', {id: `filter-${f}`, name: f, type: 'text', value: query.get(f) || '', size: 10});
    form.append(h('label', {}, `${f[0].toUpperCase()}${f.slice(1)} `, inputs[f]));
  }
  form.append(h('button', {type: 'submit'}, 'Apply'));
  form.addEventListener('submit', (e) => {
    e.preventDefault();
    const next = new URLSearchParams();
    for (const f of FILTERS) if (inputs[f].value.trim()) next.set(f, inputs[f].value.trim());
    const qs = next.toString();
    location.hash = orgHash('jobs') + (qs ? `?${qs}` : '');
  });

  const sort = {key: 'start', dir: -1};
  const holder = h('div', {class: 'scroll'});
  const redraw = () => holder.replaceChildren(jobs.length ? table(jobs, sort, (key) => {
    sort.dir = sort.key === key ? -sort.dir : -1;
    sort.key = key;
    redraw();
  }) : h('p', {class: 'muted'}, 'No jobs match.'));
  redraw();
  const wasted = jobs.reduce((sum, j) => sum + (j.used.idle_gpu_hours || 0), 0);
  const omitted = jobs.filter((j) => j.used_omitted).length;
  page('Jobs', form,
    h('p', {id: 'waste-summary'}, `Idle allocated GPU time in this list: ${hours(wasted)}.`),
    omitted ? h('p', {id: 'usage-omitted', class: 'muted'},
      `Usage not computed for the last ${omitted} jobs of this list: its jobs have more GPUs than ` +
      'one page reads. Filter the list, or open a job.') : null,
    holder);
}
