// Compute → Add compute → SLURM: registers the compute, issues its install token (shown once,
// with its expiry), shows the deployment values and the filled-in install texts, then stays open
// and turns active when this exact compute's first authenticated heartbeat arrives.
import {api, path} from '../api.js';
import {orgHash, session} from '../app.js';
import {definitionList, errorBox, h, page} from '../dom.js';
import {dateTime} from '../format.js';
import {stateBadge} from './computes.js';

const DEFAULT_SHARED_PREFIX = '/srv/expanse';
const POLL_MS = 2000;

export function copyButton(label, getText) {
  const button = h('button', {type: 'button', class: 'small'}, label);
  button.addEventListener('click', async () => {
    try {
      await navigator.clipboard.writeText(getText());
      button.textContent = 'Copied';
    } catch {
      button.textContent = 'Select and copy by hand';
    }
    setTimeout(() => (button.textContent = label), 2000);
  });
  return button;
}

// The token block: shown once; the person copies it into the installer's hidden prompt.
export function tokenBlock(issued) {
  return h('section', {class: 'card token', 'aria-labelledby': 'token-heading'},
    h('h2', {id: 'token-heading'}, 'Install token'),
    h('p', {}, 'Shown only now. Paste it at the installer\'s hidden prompt; never put it in a command line, a file or a chat. ',
      `It is valid until ${dateTime(issued.expires_at_ms)}, can be used once, and issuing another one invalidates it.`),
    h('div', {class: 'token-row'},
      h('code', {id: 'install-token', class: 'secret'}, issued.token),
      copyButton('Copy token', () => issued.token)),
    definitionList([
      ['Control plane', h('code', {id: 'control-plane-url'}, issued.control_plane_url)],
      ['Data plane', h('code', {id: 'data-plane-url'}, issued.data_plane_url)],
      ['Daemon version', h('code', {id: 'daemon-version'}, issued.daemon_version)],
    ]));
}

// Step 1, getting the CLI: this server's one-line installer first when its release mirror has
// a signed CLI (cli_install_line), else how to check for one.
export function cliSteps(t) {
  if (t.cli_install_line) {
    return [
      h('h3', {}, '1. On the controller (the slurmctld host): get the CLI'),
      h('div', {class: 'pre-actions'}, copyButton('Copy command', () => t.cli_install_line)),
      h('pre', {id: 'cli-install-line', class: 'command'}, t.cli_install_line),
      h('p', {class: 'muted'}, 'It checks the CLI\'s signature with this server\'s release key before installing /usr/local/bin/expanse (PREFIX=… to install elsewhere). ' +
        'If this server uses a self-signed certificate, run export CURL_CA_BUNDLE=<its ca.pem> first. The expanse Debian package is the other way in.'),
    ];
  }
  return [
    h('h3', {}, '1. On the controller (the slurmctld host): check the CLI'),
    h('pre', {class: 'command'}, 'command -v expanse && expanse compute install --help'),
    h('p', {class: 'muted'}, 'Install it from the expanse Debian package or your Expanse release (docs/packages.md, docs/install.md). CLI and daemon are versioned separately.'),
  ];
}

// The install texts for a shared prefix the operator types in (validated by the server).
export function installTexts(computeId) {
  const prefix = h('input', {id: 'shared-prefix', type: 'text', value: DEFAULT_SHARED_PREFIX, spellcheck: 'false'});
  const out = h('div', {'aria-live': 'polite'});
  const load = async () => {
    try {
      const t = await api.get(path`/api/v1/computes/${computeId}/install-templates` +
                              `?shared_prefix=${encodeURIComponent(prefix.value.trim())}`);
      out.replaceChildren(...cliSteps(t),
        h('h3', {}, '2. Install the controller daemon'),
        h('p', {}, 'Save this script on the controller and run it with bash. It asks for the token at a hidden prompt and passes it to the installer through sudo\'s environment, never as an argument.'),
        h('div', {class: 'pre-actions'}, copyButton('Copy script', () => t.install_script)),
        h('pre', {id: 'install-script', class: 'command'}, t.install_script),
        h('h3', {}, 'Or delegate to an assistant'),
        h('p', {}, 'A prompt for an AI assistant with shell access to the cluster. It never needs the token: you type it into the prompt yourself.'),
        h('details', {}, h('summary', {}, 'Show the prompt'),
          h('div', {class: 'pre-actions'}, copyButton('Copy prompt', () => t.assistant_prompt)),
          h('pre', {id: 'assistant-prompt', class: 'command'}, t.assistant_prompt)));
    } catch (err) {
      out.replaceChildren(errorBox(err));
    }
  };
  prefix.addEventListener('change', load);
  load();
  return h('section', {class: 'card', 'aria-labelledby': 'install-heading'},
    h('h2', {id: 'install-heading'}, 'Install'),
    h('label', {for: 'shared-prefix'}, 'Shared prefix (mounted at the same path on the controller and every worker)'),
    prefix, out);
}

// Polls the compute until its first heartbeat; returns the cleanup that stops polling.
export function enrolmentWatch(computeId, onActive) {
  const status = h('section', {id: 'enrolment', class: 'card enrolment', 'data-state': 'waiting', 'aria-live': 'polite'},
    h('h2', {}, 'Status'), h('p', {}, 'Waiting for this compute\'s first heartbeat…'));
  let timer = null;
  let stopped = false;
  const poll = async () => {
    try {
      const c = await api.get(path`/api/v1/computes/${computeId}`);
      if (c.state === 'active') {
        status.dataset.state = 'active';
        status.replaceChildren(h('h2', {}, 'Status'),
          h('p', {}, stateBadge('active'), ` First heartbeat received from ${c.controller_host || 'the controller'}`,
            ` (daemon ${c.daemon_version || '?'}, ${dateTime(c.last_heartbeat_ms)}). This compute is enrolled.`));
        if (onActive) onActive(c);
        return;
      }
      status.dataset.state = c.state === 'registered' ? 'waiting' : c.state;
      status.querySelector('p').replaceChildren(
        c.state === 'registered' ? 'Waiting for this compute\'s first heartbeat… ' : 'State: ', stateBadge(c.state));
    } catch (err) {
      status.querySelector('p').replaceChildren(errorBox(err));
    }
    if (!stopped) timer = setTimeout(poll, POLL_MS);
  };
  poll();
  return {element: status, stop: () => { stopped = true; clearTimeout(timer); }};
}

export function render({org}) {
  if (!session.org.can_register_compute) {
    page('Add compute', h('p', {}, 'Your role in this organisation cannot register computes. Ask an owner or admin for the permission.'));
    return;
  }
  const name = h('input', {id: 'compute-name', type: 'text', required: true, maxlength: 128, placeholder: 'e.g. della-gpu'});
  const submit = h('button', {type: 'submit', id: 'create-compute'}, 'Register and generate install token');
  const status = h('div', {'aria-live': 'polite'});
  const form = h('form', {class: 'card', 'aria-label': 'Register a compute'},
    h('fieldset', {}, h('legend', {}, 'Type'),
      h('label', {class: 'inline'}, h('input', {type: 'radio', name: 'type', value: 'slurm', checked: true}), ' SLURM')),
    h('label', {for: 'compute-name'}, 'Name'), name, submit, status);
  let watch = null;
  form.addEventListener('submit', async (e) => {
    e.preventDefault();
    submit.disabled = true;
    try {
      const compute = await api.post(path`/api/v1/orgs/${org}/computes`, {name: name.value.trim(), type: 'slurm'});
      const issued = await api.post(path`/api/v1/computes/${compute.id}/install-tokens`);
      watch = enrolmentWatch(compute.id);
      form.replaceWith(
        h('section', {class: 'card'},
          definitionList([
            ['Organisation', `${session.org.name} (${session.org.slug})`],
            ['Compute', compute.name],
            ['Compute ID', h('code', {id: 'compute-id'}, compute.id)],
          ]),
          h('p', {}, h('a', {href: orgHash(`computes/${encodeURIComponent(compute.id)}`)}, 'Open the compute page'))),
        watch.element, tokenBlock(issued), installTexts(compute.id));
    } catch (err) {
      status.replaceChildren(errorBox(err));
      submit.disabled = false;
    }
  });
  page('Add compute', h('p', {}, 'Keep this panel open while you install: it turns active when this exact compute\'s first heartbeat arrives.'), form);
  name.focus();
  return () => watch && watch.stop();
}
