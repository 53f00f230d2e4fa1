// Alerts: the organisation's alert rules (a verdict lasting long enough, or a per-user digest,
// sent by webhook or mail), a form for admins to make one, and what the rules delivered
// (sent, throttled, retry, failed). Rules and states: docs/formats/alerts.md.
import {api, path} from '../api.js';
import {handleError, session} from '../app.js';
import {errorBox, h, page} from '../dom.js';
import {VERDICTS, ruleAction, ruleTrigger} from '../alert_rules.js';
import {dateTime} from '../format.js';

function isAdmin() {
  return session.org && (session.org.role === 'owner' || session.org.role === 'admin');
}

function ruleTable(org, rules, onChange) {
  if (rules.length === 0) return h('p', {class: 'muted', id: 'alert-rules'}, 'No alert rules: nothing is sent.');
  const rows = rules.map((r) => {
    let remove = null;
    let toggle = null;
    if (isAdmin()) {
      toggle = h('button', {type: 'button', class: 'small', 'aria-label': `${r.enabled ? 'Pause' : 'Resume'} rule ${r.name}`},
        r.enabled ? 'Pause' : 'Resume');
      toggle.addEventListener('click', async () => {
        toggle.disabled = true;
        try {
          await api.patch(path`/api/v1/orgs/${org}/alert-rules/${r.id}`, {enabled: !r.enabled});
          onChange();
        } catch (err) {
          if (!handleError(err)) toggle.replaceWith(errorBox(err));
        }
      });
      remove = h('button', {type: 'button', class: 'small', 'aria-label': `Delete rule ${r.name}`}, 'Delete');
      remove.addEventListener('click', async () => {
        remove.disabled = true;
        try {
          await api.del(path`/api/v1/orgs/${org}/alert-rules/${r.id}`);
          onChange();
        } catch (err) {
          if (!handleError(err)) remove.replaceWith(errorBox(err));
        }
      });
    }
    return h('tr', {'data-rule': r.id, 'data-enabled': String(r.enabled)},
      h('td', {}, r.name),
      h('td', {}, ruleTrigger(r)),
      h('td', {}, h('code', {}, r.channel), ' ', h('span', {class: 'target'}, r.target)),
      h('td', {class: 'num'}, String(r.max_per_hour)),
      h('td', {}, ruleAction(r) || '—'),
      h('td', {}, r.enabled ? 'on' : 'paused'),
      h('td', {}, toggle, ' ', remove));
  });
  return h('table', {class: 'data', id: 'alert-rules'},
    h('caption', {}, `${rules.length} alert rule${rules.length === 1 ? '' : 's'}`),
    h('thead', {}, h('tr', {}, ['Name', 'When', 'Sent to', 'Per hour', 'Action', 'Enabled', '']
      .map((t) => h('th', {scope: 'col'}, t)))),
    h('tbody', {}, rows));
}

function deliveryTable(org, deliveries, rules) {
  if (deliveries.length === 0) return h('p', {class: 'muted', id: 'alert-deliveries'}, 'Nothing delivered yet.');
  const names = new Map(rules.map((r) => [r.id, r.name]));
  const rows = deliveries.map((d) => {
    const about = d.job_id
      ? h('a', {href: `#/o/${encodeURIComponent(org)}/computes/${encodeURIComponent(d.compute_id)}/jobs/${encodeURIComponent(d.job_id)}`},
        `job ${d.job_id}`)
      : (d.user || d.subject);
    return h('tr', {'data-delivery': d.id, 'data-state': d.state},
      h('td', {}, dateTime(d.updated_at_ms)),
      h('td', {}, names.get(d.rule_id) || `rule ${d.rule_id}`),
      h('td', {}, about),
      h('td', {}, h('span', {class: `badge alert-${d.state}`}, d.state),
        d.attempts > 1 ? ` (${d.attempts} attempts)` : ''),
      h('td', {}, d.summary, d.error ? h('div', {class: 'muted'}, d.error) : null));
  });
  return h('table', {class: 'data', id: 'alert-deliveries'},
    h('caption', {}, 'Latest deliveries'),
    h('thead', {}, h('tr', {}, ['When', 'Rule', 'About', 'State', 'Message'].map((t) => h('th', {scope: 'col'}, t)))),
    h('tbody', {}, rows));
}

// The admins' form: kind, verdict and duration (or digest period), channel and target, cap.
function ruleForm(org, canEmail, onMade) {
  const field = (id, label, input) => [h('label', {for: id}, label), input];
  const name = h('input', {id: 'rule-name', type: 'text', required: true, maxlength: 64, placeholder: 'e.g. stuck jobs'});
  const kind = h('select', {id: 'rule-kind'},
    h('option', {value: 'verdict'}, 'a verdict lasting'), h('option', {value: 'digest'}, 'a digest per user'));
  const verdict = h('select', {id: 'rule-verdict'}, VERDICTS.map((v) => h('option', {value: v}, v)));
  const minutes = h('input', {id: 'rule-minutes', type: 'number', min: 0, max: 10080, value: 15});
  const period = h('select', {id: 'rule-period'},
    h('option', {value: 604800}, 'weekly'), h('option', {value: 86400}, 'daily'));
  const channel = h('select', {id: 'rule-channel'}, h('option', {value: 'webhook'}, 'webhook (Slack, Mattermost)'),
    h('option', {value: 'email', disabled: !canEmail}, canEmail ? 'email' : 'email (the server has no SMTP server)'));
  const target = h('input', {id: 'rule-target', type: 'text', required: true, maxlength: 2048,
    placeholder: 'https://hooks.slack.com/services/… or {user}@example.org'});
  const cap = h('input', {id: 'rule-cap', type: 'number', min: 1, max: 10000, value: 20});
  const verdictPart = h('div', {}, ...field('rule-verdict', 'Verdict', verdict), ...field('rule-minutes', 'For at least (minutes)', minutes));
  const digestPart = h('div', {hidden: true}, ...field('rule-period', 'Every', period));
  kind.addEventListener('change', () => {
    verdictPart.hidden = kind.value !== 'verdict';
    digestPart.hidden = kind.value !== 'digest';
  });
  const submit = h('button', {type: 'submit', id: 'make-rule'}, 'Make alert rule');
  const status = h('div', {'aria-live': 'polite'});
  const form = h('form', {class: 'card', 'aria-label': 'Make an alert rule'},
    ...field('rule-name', 'Rule name', name), ...field('rule-kind', 'When', kind), verdictPart, digestPart,
    ...field('rule-channel', 'Send by', channel), ...field('rule-target', 'To ({user} is the job\'s user)', target),
    ...field('rule-cap', 'At most per hour', cap), submit, status);
  form.addEventListener('submit', async (e) => {
    e.preventDefault();
    const rule = {name: name.value.trim(), kind: kind.value, channel: channel.value, target: target.value.trim(),
      max_per_hour: Number(cap.value)};
    if (kind.value === 'verdict') {
      rule.verdict = verdict.value;
      rule.min_duration_s = Math.round(Number(minutes.value) * 60);
    } else {
      rule.period_s = Number(period.value);
    }
    submit.disabled = true;
    status.replaceChildren();
    try {
      await api.post(path`/api/v1/orgs/${org}/alert-rules`, rule);
      name.value = '';
      target.value = '';
      await onMade();
    } catch (err) {
      if (!handleError(err)) status.replaceChildren(errorBox(err));
    } finally {
      submit.disabled = false;
    }
  });
  return form;
}

export async function render({org}) {
  const rulesBox = h('div', {id: 'alert-rule-list'});
  const deliveriesBox = h('div', {id: 'alert-delivery-list'});
  const formBox = h('div');
  let rules = [];
  const refresh = async () => {
    try {
      const [listed, delivered] = await Promise.all([
        api.get(path`/api/v1/orgs/${org}/alert-rules`),
        api.get(path`/api/v1/orgs/${org}/alert-deliveries?limit=${50}`),
      ]);
      rules = listed.alert_rules;
      rulesBox.replaceChildren(ruleTable(org, rules, refresh));
      deliveriesBox.replaceChildren(deliveryTable(org, delivered.alert_deliveries, rules));
      if (isAdmin() && !formBox.firstChild) formBox.replaceChildren(ruleForm(org, listed.email, refresh));
    } catch (err) {
      if (!handleError(err)) rulesBox.replaceChildren(errorBox(err));
    }
  };
  page('Alerts',
    h('p', {}, 'Rules tell people when a job has been stuck, idle or over-allocated for a while, and send each user a digest of their idle GPU-hours. Each job gets one message per rule; a rule over its hourly cap holds the rest back.'),
    isAdmin() ? formBox : h('p', {class: 'muted'}, 'Only the organisation\'s admins make and delete rules.'),
    rulesBox, deliveriesBox);
  await refresh();
  const timer = setInterval(refresh, 15000);
  return () => clearInterval(timer);
}
