// The organisation's computes, with state and heartbeat age; Add compute for those allowed.
import {api, path} from '../api.js';
import {orgHash, session} from '../app.js';
import {h, page} from '../dom.js';
import {age} from '../format.js';

export function stateBadge(state) {
  return h('span', {class: `badge state-${state}`}, state);
}

export async function render({org}) {
  const {computes} = await api.get(path`/api/v1/orgs/${org}/computes`);
  const actions = session.org.can_register_compute
    ? h('p', {}, h('a', {class: 'button', href: orgHash('computes/new'), id: 'add-compute'}, 'Add compute'))
    : null;
  if (computes.length === 0) {
    page('Compute', actions, h('p', {class: 'muted'}, `No computes in ${session.org.name} yet.`));
    return;
  }
  const rows = computes.map((c) => h('tr', {},
    h('td', {}, h('a', {href: orgHash(`computes/${encodeURIComponent(c.id)}`)}, c.name)),
    h('td', {}, c.type.toUpperCase()),
    h('td', {}, stateBadge(c.state)),
    h('td', {}, h('code', {}, c.id)),
    h('td', {}, age(c.heartbeat_age_ms)),
    h('td', {}, c.daemon_version || '—'),
    h('td', {}, c.controller_host || '—')));
  page('Compute', actions,
    h('table', {class: 'data'},
      h('caption', {}, `${computes.length} compute${computes.length === 1 ? '' : 's'} in ${session.org.name}`),
      h('thead', {}, h('tr', {}, ['Name', 'Type', 'State', 'Compute ID', 'Last heartbeat', 'Daemon', 'Controller']
        .map((t) => h('th', {scope: 'col'}, t)))),
      h('tbody', {}, rows)));
}
