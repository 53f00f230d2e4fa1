// Efficiency: the GPU time the organisation's jobs held over a period and how much of it sat
// idle, per user, account or partition (the idle ledger rolled up by the server), sortable, with
// the totals, the server's truncation notice and the same table as CSV.
import {api, path} from '../api.js';
import {orgHash} from '../app.js';
import {h, page} from '../dom.js';
import {dateTime} from '../format.js';
import {COLUMNS, GROUP_BYS, PERIODS, efficiencyChoices, efficiencyPath, efficiencyRows, efficiencyTotals,
  gpuHours, share, sortRows, truncationNotice} from '../efficiency.js';

const GROUP_LABELS = {user: 'User', account: 'Account', partition: 'Partition'};

function cell(key, row) {
  if (key === 'key') {
    if (row.key === null) return h('th', {scope: 'row'}, 'All');
    return h('th', {scope: 'row'}, row.key === '' ? h('span', {class: 'muted'}, '(none)') : row.key);
  }
  if (key.endsWith('_h')) return h('td', {class: 'num'}, gpuHours(row[key]));
  if (key === 'idle_share') return h('td', {class: 'num'}, share(row[key]));
  return h('td', {class: 'num'}, row[key]);
}

function table(answer, groupBy, sort, onSort) {
  const rows = sortRows(efficiencyRows(answer), sort.key, sort.dir);
  const totals = efficiencyTotals(answer);
  const heading = (key, label) => h('th', {
    scope: 'col',
    class: key === 'key' ? null : 'num',
    'aria-sort': key === sort.key ? (sort.dir > 0 ? 'ascending' : 'descending') : 'none',
  }, h('button', {type: 'button', class: 'sort', onclick: () => onSort(key)}, label));
  return h('table', {class: 'data efficiency', id: 'efficiency'},
    h('caption', {}, `${rows.length} ${GROUP_LABELS[groupBy].toLowerCase()}${rows.length === 1 ? '' : 's'}`),
    h('thead', {}, h('tr', {}, COLUMNS.map(([key, label]) => heading(key, label || GROUP_LABELS[groupBy])))),
    h('tbody', {}, rows.map((r) => h('tr', {'data-group': r.key}, COLUMNS.map(([key]) => cell(key, r))))),
    h('tfoot', {}, h('tr', {id: 'efficiency-totals'}, COLUMNS.map(([key]) => cell(key, totals)))));
}

export async function render({org, query}) {
  const choices = efficiencyChoices(query);
  const now = Date.now();
  const [answer, {computes}] = await Promise.all([
    api.get(efficiencyPath(org, choices, now)),
    api.get(path`/api/v1/orgs/${org}/computes`),
  ]);

  // Every choice reloads the page with it in the URL, so a view can be bookmarked and shared.
  const choose = (name, value) => {
    const next = new URLSearchParams({group_by: choices.groupBy, period: choices.period});
    if (choices.compute) next.set('compute', choices.compute);
    if (choices.limit) next.set('limit', choices.limit);
    if (value) next.set(name, value);
    else next.delete(name);
    location.hash = orgHash('efficiency') + `?${next.toString()}`;
  };
  const select = (id, name, label, options, current) => h('label', {}, `${label} `,
    h('select', {id, name, onchange: (e) => choose(name, e.target.value)},
      options.map(([value, text]) => h('option', {value, selected: value === current}, text))));
  const form = h('form', {class: 'filters', 'aria-label': 'Efficiency view', onsubmit: (e) => e.preventDefault()},
    select('efficiency-group-by', 'group_by', 'Group by', GROUP_BYS.map((g) => [g, GROUP_LABELS[g]]), choices.groupBy),
    select('efficiency-period', 'period', 'Period', PERIODS.map(([p, text]) => [p, text]), choices.period),
    select('efficiency-compute', 'compute', 'Compute', [['', 'all'], ...computes.map((c) => [c.id, c.name])], choices.compute));

  // A plain same-origin link: the browser sends the session cookie with the GET, and the server
  // answers with the file to save (Content-Disposition).
  const csv = h('a', {class: 'button', id: 'efficiency-csv', href: efficiencyPath(org, choices, now, 'csv'),
    download: `efficiency-${choices.groupBy}.csv`}, 'Download CSV');
  const partial = truncationNotice(answer);
  const notice = partial
    ? h('div', {class: 'warning', role: 'note', id: 'efficiency-truncated'}, h('strong', {}, 'Partial: '), partial)
    : null;

  const sort = {key: 'idle_h', dir: -1};
  const holder = h('div', {class: 'scroll'});
  const redraw = () => holder.replaceChildren((answer.groups || []).length
    ? table(answer, choices.groupBy, sort, (key) => {
      sort.dir = sort.key === key ? -sort.dir : (key === 'key' ? 1 : -1);
      sort.key = key;
      redraw();
    })
    : h('p', {class: 'muted'}, 'No job held GPUs in this period.'));
  redraw();

  page('Efficiency', form,
    h('p', {id: 'efficiency-window'},
      `GPU time held by jobs from ${dateTime(answer.from_ms)} to ${dateTime(answer.to_ms)}; ${answer.jobs_scanned} job${answer.jobs_scanned === 1 ? '' : 's'} read. ` +
      'A GPU counts from its allocation, not its first process, and time without samples counts as idle.'),
    notice, h('p', {}, csv), holder);
}
