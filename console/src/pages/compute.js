// One compute: state, identity, heartbeat, nodes and GPUs, capability health with reasons,
// outbox and drop counters, diagnostics; re-issue install token and deprovision for the roles
// allowed to. Refreshes itself while open.
import {api, path} from '../api.js';
import {handleError, orgHash, session} from '../app.js';
import {definitionList, errorBox, h, page} from '../dom.js';
import {runsProblem, refusedRecordsProblem, workersSupplying} from '../daemon_health.js';
import {age, dateTime, mib} from '../format.js';
import {installTexts, tokenBlock} from './add_compute.js';
import {stateBadge} from './computes.js';

const REFRESH_MS = 10000;
const CAPABILITIES = [
  ['nvml', 'NVML'], ['nvidia_smi', 'nvidia-smi'], ['cupti', 'CUPTI'], ['dcgm', 'DCGM'],
  ['py_stacks', 'Python stacks'], ['profiling_permissions', 'profiling_permissions'],
];

function capabilityCell(cap) {
  if (!cap) return h('td', {class: 'muted'}, 'not reported');
  return h('td', {}, h('span', {class: `badge cap-${cap.state}`}, cap.state),
    cap.reason ? h('div', {class: 'reason'}, cap.reason) : null);
}

function capabilityTable(hb) {
  const sources = [['controller', hb.capabilities || {}]];
  for (const r of (hb.workers && hb.workers.reports) || []) sources.push([r.host, r.capabilities || {}]);
  return h('table', {class: 'data', id: 'capabilities'},
    h('caption', {}, 'Capability health'),
    h('thead', {}, h('tr', {}, h('th', {scope: 'col'}, 'Host'), CAPABILITIES.map(([, label]) => h('th', {scope: 'col'}, label)))),
    h('tbody', {}, sources.map(([host, caps]) => h('tr', {}, h('th', {scope: 'row'}, host),
      CAPABILITIES.map(([key]) => capabilityCell(caps[key]))))),
    h('tfoot', {}, h('tr', {id: 'workers-supplying'}, h('th', {scope: 'row'}, 'Workers supplying it'),
      CAPABILITIES.map(([key]) => h('td', {'data-capability': key}, workersSupplying(hb.workers, key))))));
}

function gpuTable(hb) {
  const rows = [];
  for (const node of hb.nodes || []) {
    const gpus = node.gpus || [];
    if (gpus.length === 0) rows.push(h('tr', {}, h('th', {scope: 'row'}, node.name), h('td', {colspan: 6, class: 'muted'}, 'no GPUs')));
    for (const g of gpus) {
      rows.push(h('tr', {},
        h('th', {scope: 'row'}, node.name), h('td', {}, g.index), h('td', {}, g.model || '—'),
        h('td', {}, mib(g.memory_total_mib)), h('td', {}, g.driver || '—'),
        h('td', {}, g.use ? h('span', {class: `badge use-${g.use.state}`}, g.use.state.replace(/_/g, ' ')) : '—',
          g.use && g.use.jobs && g.use.jobs.length ? ` job ${g.use.jobs.join(', ')}` : ''),
        h('td', {}, h('code', {}, g.uuid))));
    }
  }
  const gpuCount = (hb.nodes || []).reduce((n, node) => n + (node.gpus || []).length, 0);
  return h('table', {class: 'data', id: 'gpus'},
    h('caption', {}, `${(hb.nodes || []).length} nodes, ${gpuCount} GPUs`),
    h('thead', {}, h('tr', {}, ['Node', 'GPU', 'Model', 'Memory', 'Driver', 'Use', 'UUID'].map((t) => h('th', {scope: 'col'}, t)))),
    h('tbody', {}, rows));
}

function counters(obj) {
  const entries = Object.entries(obj || {});
  if (entries.length === 0) return h('p', {class: 'muted'}, 'none reported');
  return definitionList(entries.map(([k, v]) => [k.replace(/_/g, ' '), String(v)]));
}

function actions(c, area) {
  const canManage = session.org.can_manage_compute;
  const canReissue = canManage || session.org.can_register_compute;
  if (c.state === 'deprovisioned' || (!canReissue && !canManage)) return null;
  const bar = h('div', {class: 'actions'});
  if (canReissue) {
    bar.append(h('button', {type: 'button', id: 'reissue-token', onclick: async () => {
      try {
        const issued = await api.post(path`/api/v1/computes/${c.id}/install-tokens`);
        area.replaceChildren(tokenBlock(issued),
          h('p', {}, 'On the controller, run the install again with --reinstall and give this token the same way. The previous credential stops working once the new token is exchanged.'),
          installTexts(c.id));
      } catch (err) {
        if (!handleError(err)) area.replaceChildren(errorBox(err));
      }
    }}, 'Re-issue install token'));
  }
  if (canManage) {
    const confirmBox = h('div', {class: 'confirm', hidden: true, role: 'alertdialog', 'aria-labelledby': 'deprovision-question'},
      h('p', {id: 'deprovision-question'}, `Deprovision ${c.name}? Its credential and unused install tokens are revoked at once and its daemon stops reporting. Its history stays.`),
      h('button', {type: 'button', class: 'danger', id: 'confirm-deprovision', onclick: async () => {
        try {
          await api.post(path`/api/v1/computes/${c.id}/deprovision`);
          location.reload();
        } catch (err) {
          if (!handleError(err)) area.replaceChildren(errorBox(err));
        }
      }}, `Yes, deprovision ${c.name}`),
      h('button', {type: 'button', onclick: () => (confirmBox.hidden = true)}, 'Cancel'));
    bar.append(h('button', {type: 'button', class: 'danger', id: 'deprovision', onclick: () => {
      confirmBox.hidden = false;
      confirmBox.querySelector('.danger').focus();
    }}, 'Deprovision…'), confirmBox);
  }
  return bar;
}

// Rows only when something is wrong: a daemon in a crash loop, or workers writing bad records.
function healthRows(diagnostics) {
  const rows = [];
  const runs = runsProblem(diagnostics?.runs);
  if (runs) rows.push(['Daemon restarts', h('span', {id: 'daemon-restarts', class: 'warning-text'}, runs)]);
  const refused = refusedRecordsProblem(diagnostics);
  if (refused) rows.push(['Refused worker records', h('span', {id: 'refused-records', class: 'warning-text'}, refused)]);
  return rows;
}

async function draw(id, actionArea) {
  const c = await api.get(path`/api/v1/computes/${id}`);
  const hb = c.heartbeat || {};
  const workers = hb.workers || {};
  const sections = [
    definitionList([
      ['State', stateBadge(c.state)],
      ['Compute ID', h('code', {id: 'compute-id'}, c.id)],
      ['Last heartbeat', h('span', {id: 'heartbeat-age'}, age(c.heartbeat_age_ms))],
      ['Daemon version', `${c.daemon_version || '—'} (pinned ${c.pinned_daemon_version})`],
      ['Controller host', c.controller_host || '—'],
      ['Worker nodes', h('span', {id: 'sampled-workers'}, c.heartbeat ? `${workers.sampled ?? 0} of ${workers.expected ?? 0} sampled worker nodes` : '—')],
      ['Registered', dateTime(c.created_at_ms)],
      ...healthRows(hb.diagnostics),
    ]),
    h('p', {}, h('a', {href: orgHash(`jobs?compute=${encodeURIComponent(c.id)}`)}, 'Jobs on this compute')),
    actions(c, actionArea), actionArea,
  ];
  if (c.heartbeat) {
    sections.push(h('h2', {}, 'Nodes and GPUs'), gpuTable(hb), h('h2', {}, 'Health'), capabilityTable(hb),
      h('h2', {}, 'Outbox'), counters(hb.outbox),
      h('h2', {}, 'Diagnostics'),
      h('details', {}, h('summary', {}, 'Daemon diagnostics'), h('pre', {class: 'command'}, JSON.stringify(hb.diagnostics || {}, null, 2))));
  } else {
    sections.push(h('p', {class: 'muted'}, 'No heartbeat yet: nodes, GPUs and health appear once the controller daemon reports.'));
  }
  page(c.name, sections);
}

export async function render({compute}) {
  const actionArea = h('div', {id: 'action-area', 'aria-live': 'polite'});
  await draw(compute, actionArea);
  // Refresh only while no action output is open, so a re-issued token is not wiped.
  const timer = setInterval(async () => {
    if (actionArea.childElementCount > 0) return;
    try {
      await draw(compute, actionArea);
    } catch (err) {
      handleError(err);
    }
  }, REFRESH_MS);
  return () => clearInterval(timer);
}
