// The console shell: hash routes, the signed-in user and their organisations, the top bar with
// the organisation switcher, and the page modules. Each page's render() may return a cleanup
// function (to stop its polling) that runs when the route changes.
import {ApiError, api} from './api.js';
import {errorBox, page} from './dom.js';
import * as addCompute from './pages/add_compute.js';
import * as compute from './pages/compute.js';
import * as computes from './pages/computes.js';
import * as alerts from './pages/alerts.js';
import * as efficiency from './pages/efficiency.js';
import * as job from './pages/job.js';
import * as jobs from './pages/jobs.js';
import * as signin from './pages/signin.js';
import * as tokens from './pages/tokens.js';

const ORG_KEY = 'expanse.org';

const routes = [
  [/^#\/signin$/, signin.render, []],
  [/^#\/o\/([^/]+)\/computes$/, computes.render, ['org']],
  [/^#\/o\/([^/]+)\/computes\/new$/, addCompute.render, ['org']],
  [/^#\/o\/([^/]+)\/computes\/([^/]+)$/, compute.render, ['org', 'compute']],
  [/^#\/o\/([^/]+)\/jobs$/, jobs.render, ['org']],
  [/^#\/o\/([^/]+)\/efficiency$/, efficiency.render, ['org']],
  [/^#\/o\/([^/]+)\/tokens$/, tokens.render, ['org']],
  [/^#\/o\/([^/]+)\/alerts$/, alerts.render, ['org']],
  [/^#\/o\/([^/]+)\/computes\/([^/]+)\/jobs\/([^/]+)$/, job.render, ['org', 'compute', 'job']],
];

export const session = {
  me: null,  // GET /api/v1/me
  org: null,  // the selected organisation's entry of me.organizations
};

let cleanup = null;
let routeSeq = 0;  // counts route() calls, so a render that finishes after a newer one started can stop

export function go(hash) {
  if (location.hash === hash) route();
  else location.hash = hash;
}

export function orgHash(suffix) {
  return `#/o/${encodeURIComponent(session.org.slug)}/${suffix}`;
}

// Unauthenticated answers send the user to the sign-in page; others are the page's to show.
export function handleError(err) {
  if (err instanceof ApiError && err.status === 401) {
    api.forgetSession();
    session.me = null;
    go('#/signin');
    return true;
  }
  return false;
}

async function loadMe() {
  session.me = await api.get('/api/v1/me');
  return session.me;
}

function selectOrg(slug) {
  const orgs = session.me.organizations;
  session.org = orgs.find((o) => o.slug === slug) || null;
  if (session.org) localStorage.setItem(ORG_KEY, session.org.slug);
  return session.org;
}

function defaultOrg() {
  const orgs = session.me.organizations;
  const saved = localStorage.getItem(ORG_KEY);
  return orgs.find((o) => o.slug === saved) || orgs[0] || null;
}

// The top bar's section of the current page: a job page is under Jobs.
function section() {
  const [hash] = location.hash.split('?');
  if (/^#\/o\/[^/]+\/efficiency$/.test(hash)) return 'efficiency';
  if (/^#\/o\/[^/]+\/tokens$/.test(hash)) return 'tokens';
  if (/^#\/o\/[^/]+\/alerts$/.test(hash)) return 'alerts';
  return hash.includes('/jobs') ? 'jobs' : 'computes';
}

function renderTopbar() {
  const bar = document.getElementById('topbar');
  bar.hidden = !session.me;
  if (!session.me) return;
  const switcher = document.getElementById('org-switcher');
  switcher.replaceChildren(...session.me.organizations.map((o) => {
    const opt = document.createElement('option');
    opt.value = o.slug;
    opt.textContent = `${o.name} (${o.role})`;
    opt.selected = session.org && o.slug === session.org.slug;
    return opt;
  }));
  document.getElementById('who').textContent = session.me.email || '';
  if (session.org) {
    document.getElementById('nav-computes').href = orgHash('computes');
    document.getElementById('nav-jobs').href = orgHash('jobs');
    document.getElementById('nav-efficiency').href = orgHash('efficiency');
    document.getElementById('nav-tokens').href = orgHash('tokens');
    document.getElementById('nav-alerts').href = orgHash('alerts');
  }
  const current = `nav-${section()}`;
  for (const id of ['nav-computes', 'nav-jobs', 'nav-efficiency', 'nav-alerts', 'nav-tokens']) {
    const link = document.getElementById(id);
    if (id === current) link.setAttribute('aria-current', 'page');
    else link.removeAttribute('aria-current');
  }
}

async function route() {
  const seq = ++routeSeq;
  if (cleanup) {
    cleanup();
    cleanup = null;
  }
  const [hash, queryText] = (location.hash || '#/').split('?');
  if (hash !== '#/signin' && !session.me) {
    try {
      await loadMe();
    } catch (err) {
      if (!handleError(err)) page('Expanse', errorBox(err));
      return;
    }
  }
  if (hash === '#/signin') {
    session.me = null;
    renderTopbar();
    cleanup = signin.render({}) || null;
    return;
  }
  for (const [pattern, render, names] of routes) {
    const m = hash.match(pattern);
    if (!m) continue;
    const params = {query: new URLSearchParams(queryText || '')};
    names.forEach((name, i) => (params[name] = decodeURIComponent(m[i + 1])));
    if (!selectOrg(params.org)) {
      renderTopbar();
      page('Not found', errorBox({code: 'not_found', message: `You are not a member of organisation "${params.org}".`}));
      return;
    }
    renderTopbar();
    try {
      const stop = (await render(params)) || null;
      // The user moved on while this page loaded: its polling must not outlive it.
      if (seq !== routeSeq) {
        if (stop) stop();
        return;
      }
      cleanup = stop;
    } catch (err) {
      if (!handleError(err) && seq === routeSeq) page('Something went wrong', errorBox(err));
    }
    document.getElementById('main').focus({preventScroll: true});
    return;
  }
  const org = defaultOrg();
  if (!org) {
    renderTopbar();
    page('No organisation', 'Your account is not a member of any organisation yet. Ask an administrator to add you.');
    return;
  }
  session.org = org;
  go(orgHash('computes'));
}

document.getElementById('org-switcher').addEventListener('change', (e) => {
  selectOrg(e.target.value);
  go(orgHash(section()));
});
document.getElementById('sign-out').addEventListener('click', async () => {
  try {
    await api.signOut();
  } catch {
    // Signed out locally either way; the cookie expires on its own.
  }
  session.me = null;
  go('#/signin');
});
window.addEventListener('hashchange', route);
route();
