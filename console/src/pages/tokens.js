// API tokens: the person's own tokens for scripts and `expanse job report` (an admin sees every
// token of the organisation), a form to make one with the scopes their role may hand out, the
// new token shown once, and revoke. Tokens are made only here, from a signed-in session: the
// server refuses a token that tries to make another (docs/api.md "API tokens").
import {api, path} from '../api.js';
import {handleError, session} from '../app.js';
import {errorBox, h, page} from '../dom.js';
import {dateTime} from '../format.js';
import {copyButton} from './add_compute.js';

// Each scope with what it lets a script do, and whether this role may hand it out.
function scopeChoices(org) {
  const admin = org.role === 'owner' || org.role === 'admin';
  return [
    ['read', 'read: computes, jobs, reports and verdicts', true],
    ['jobs:own', `jobs:own: only your own jobs (SLURM user ${org.slurm_user}), for expanse job report`, Boolean(org.slurm_user)],
    ['compute:register', 'compute:register: register computes and issue install tokens', org.can_register_compute],
    ['admin', 'admin: everything, including revoking others\' tokens', admin],
  ].filter(([, , allowed]) => allowed);
}

function tokenState(t, now) {
  if (t.revoked_at_ms) return ['revoked', `revoked ${dateTime(t.revoked_at_ms)}`];
  if (t.expires_at_ms && t.expires_at_ms <= now) return ['expired', `expired ${dateTime(t.expires_at_ms)}`];
  return ['live', `until ${dateTime(t.expires_at_ms)}`];
}

function tokenTable(org, tokens, onChange) {
  const now = Date.now();
  if (tokens.length === 0) return h('p', {class: 'muted', id: 'api-tokens'}, 'No API tokens yet.');
  const rows = tokens.map((t) => {
    const [state, when] = tokenState(t, now);
    const revoke = state === 'live'
      ? h('button', {type: 'button', class: 'small', 'aria-label': `Revoke ${t.name}`}, 'Revoke')
      : null;
    if (revoke) {
      revoke.addEventListener('click', async () => {
        revoke.disabled = true;
        try {
          await api.post(path`/api/v1/orgs/${org}/api-tokens/${t.id}/revoke`);
          onChange();
        } catch (err) {
          if (!handleError(err)) revoke.replaceWith(errorBox(err));
        }
      });
    }
    return h('tr', {'data-token': t.id, 'data-state': state},
      h('td', {}, t.name),
      h('td', {}, t.scopes.map((s) => h('code', {}, s)).flatMap((c, i) => (i ? [' ', c] : [c]))),
      h('td', {}, t.user_id === session.me.user_id ? 'you' : `user ${t.user_id}`),
      h('td', {}, dateTime(t.created_at_ms)),
      h('td', {}, h('span', {class: `badge token-${state}`}, state), ` ${when}`),
      h('td', {}, revoke));
  });
  return h('table', {class: 'data', id: 'api-tokens'},
    h('caption', {}, `${tokens.length} API token${tokens.length === 1 ? '' : 's'}`),
    h('thead', {}, h('tr', {}, ['Name', 'Scopes', 'Person', 'Made', 'State', ''].map((t) => h('th', {scope: 'col'}, t)))),
    h('tbody', {}, rows));
}

// The token just made: shown once, with how to keep it.
function newTokenBlock(made) {
  return h('section', {class: 'card token', 'aria-labelledby': 'new-token-heading'},
    h('h2', {id: 'new-token-heading'}, `API token "${made.name}"`),
    h('p', {}, 'Shown only now. Keep it in a file only you can read (umask 077) and pass it with ',
      h('code', {}, '--token-file'), `; it is valid until ${dateTime(made.expires_at_ms)}.`),
    h('div', {class: 'token-row'},
      h('code', {id: 'new-api-token', class: 'secret'}, made.token),
      copyButton('Copy token', () => made.token)));
}

export async function render({org}) {
  const list = h('div', {id: 'api-token-list'});
  const shown = h('div', {'aria-live': 'polite'});
  const refresh = async () => {
    try {
      const {api_tokens: tokens} = await api.get(path`/api/v1/orgs/${org}/api-tokens`);
      list.replaceChildren(tokenTable(org, tokens, refresh));
    } catch (err) {
      if (!handleError(err)) list.replaceChildren(errorBox(err));
    }
  };

  const name = h('input', {id: 'token-name', type: 'text', required: true, maxlength: 64, placeholder: 'e.g. job reports on my laptop'});
  const days = h('input', {id: 'token-days', type: 'number', min: 1, max: 365, value: 90, required: true});
  const scopes = scopeChoices(session.org).map(([scope, label]) => h('label', {class: 'inline'},
    h('input', {type: 'checkbox', name: 'scope', value: scope, checked: scope === 'read'}), ` ${label}`));
  const submit = h('button', {type: 'submit', id: 'make-token'}, 'Make API token');
  const status = h('div', {'aria-live': 'polite'});
  const form = h('form', {class: 'card', 'aria-label': 'Make an API token'},
    h('label', {for: 'token-name'}, 'Token name'), name,
    h('fieldset', {}, h('legend', {}, 'Scopes'), scopes),
    h('label', {for: 'token-days'}, 'Valid for (days)'), days,
    submit, status);
  form.addEventListener('submit', async (e) => {
    e.preventDefault();
    const chosen = [...form.querySelectorAll('input[name="scope"]:checked')].map((i) => i.value);
    submit.disabled = true;
    status.replaceChildren();
    try {
      const made = await api.post(path`/api/v1/orgs/${org}/api-tokens`,
        {name: name.value.trim(), scopes: chosen, expires_in_days: Number(days.value)});
      shown.replaceChildren(newTokenBlock(made));
      name.value = '';
      await refresh();
    } catch (err) {
      if (!handleError(err)) status.replaceChildren(errorBox(err));
    } finally {
      submit.disabled = false;
    }
  });

  page('API tokens',
    h('p', {}, 'Tokens let your scripts and ', h('code', {}, 'expanse job report'),
      ' read from Expanse as you, with no more than the scopes you choose. Revoke one the moment it may have leaked.'),
    form, shown, list);
  await refresh();
}
