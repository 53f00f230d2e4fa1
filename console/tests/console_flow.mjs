// The console in a real headless Chromium (Debian's, driven by playwright-core), against a real
// expanse-server and the real SLURM test cluster: sign in, add a compute, run the install the
// panel shows on the cluster's controller and watch the panel turn active, then find a job and
// its timeline. Run by tests/integration/cluster/console.sh, which sets the environment:
//
//   EXPANSE_CONSOLE_URL        the console (control plane) URL
//   EXPANSE_CONSOLE_EMAIL / EXPANSE_CONSOLE_PASSWORD   an owner's sign-in
//   EXPANSE_CONSOLE_VIEWER_EMAIL / EXPANSE_CONSOLE_VIEWER_PASSWORD   a viewer's sign-in
//   EXPANSE_CONSOLE_PREFIX     the shared prefix to type into the panel
//   EXPANSE_CONSOLE_HOOK       a shell command: `$HOOK install SCRIPT` runs the install script on
//                              the controller with the token on stdin; `$HOOK job COMPUTE` submits
//                              a GPU job, waits until the server has its samples, prints its id
//   EXPANSE_CONSOLE_ARTIFACTS  where screenshots go
//
// Prints one "ok - …" line per check; any failure exits non-zero with a screenshot.
import assert from 'node:assert/strict';
import {spawnSync} from 'node:child_process';
import {mkdirSync, writeFileSync} from 'node:fs';
import {join} from 'node:path';
import {chromium, request} from 'playwright-core';

const env = (name) => {
  const v = process.env[name];
  if (!v) throw new Error(`${name} is not set`);
  return v;
};
const URL = env('EXPANSE_CONSOLE_URL');
const ARTIFACTS = env('EXPANSE_CONSOLE_ARTIFACTS');
const HOOK = env('EXPANSE_CONSOLE_HOOK');
mkdirSync(ARTIFACTS, {recursive: true});

const ok = (what) => console.log(`ok - ${what}`);
const shot = (page, name) => page.screenshot({path: join(ARTIFACTS, `${name}.png`), fullPage: true});

function hook(args, input) {
  const r = spawnSync('bash', ['-c', `${HOOK} ${args}`], {input, encoding: 'utf8', timeout: 600_000});
  if (r.status !== 0) throw new Error(`hook "${args}" failed (${r.status}):\n${r.stdout}\n${r.stderr}`);
  return r.stdout;
}

// Every form control and button has a name a screen reader can announce.
async function assertLabelled(page, where) {
  const unnamed = await page.evaluate(() => [...document.querySelectorAll('input, select, textarea, button')]
    .filter((el) => el.offsetParent !== null)
    .filter((el) => !(el.labels && el.labels.length) && !el.getAttribute('aria-label') && !el.textContent.trim())
    .map((el) => el.outerHTML.slice(0, 80)));
  assert.deepEqual(unnamed, [], `unlabelled controls on ${where}`);
}

// How long a page takes from the click to its content (printed for docs/performance.md, not
// asserted: timing belongs in benchmarks).
async function timed(what, action) {
  const start = performance.now();
  await action();
  console.log(`timing - ${what}: ${Math.round(performance.now() - start)} ms`);
}

async function signIn(page, email, password) {
  await page.goto(URL + '/');
  await page.getByLabel('Email').fill(email);
  await page.getByLabel('Password').fill(password);
  await page.getByLabel('Password').press('Enter');  // the keyboard alone can sign in
  await page.locator('#topbar:not([hidden])').waitFor();
}

const browser = await chromium.launch({
  executablePath: process.env.EXPANSE_CHROMIUM || '/usr/bin/chromium',
  // The test cluster's CA is not in the browser's store; the server's TLS itself is covered by
  // the server tests. --no-sandbox: the tests run as root, where Chromium's sandbox cannot start.
  args: ['--no-sandbox'],
});
const context = await browser.newContext({ignoreHTTPSErrors: true, viewport: {width: 1366, height: 800}});
const page = await context.newPage();
const pageErrors = [];
page.on('pageerror', (e) => pageErrors.push(e.message));

try {
  // --- sign-in ---------------------------------------------------------------------------
  await page.goto(URL + '/');
  await page.getByLabel('Email').waitFor();
  assert.equal(await page.title(), 'Sign in to Expanse · Expanse');
  await page.getByLabel('Email').fill(env('EXPANSE_CONSOLE_EMAIL'));
  await page.getByLabel('Password').fill('not the password');
  await page.getByRole('button', {name: 'Sign in'}).click();
  await page.getByRole('alert').filter({hasText: 'Wrong email or password.'}).waitFor();
  ok('a wrong password is refused with a clear message');
  await assertLabelled(page, 'sign-in');
  await shot(page, '01-sign-in');

  await signIn(page, env('EXPANSE_CONSOLE_EMAIL'), env('EXPANSE_CONSOLE_PASSWORD'));
  await page.getByRole('heading', {name: 'Compute'}).waitFor();
  assert.match(await page.locator('#org-switcher').innerText(), /Acme/);
  ok('signed in as the owner; the organisation switcher shows the organisation');
  const orgs = await page.locator('#org-switcher option').allInnerTexts();
  assert.deepEqual(orgs.sort(), ['Acme (owner)', 'Beta Lab (viewer)']);
  await page.getByLabel('Organisation').selectOption('beta');
  await page.waitForURL(/#\/o\/beta\/computes$/);
  // The text names the organisation: Acme has no computes yet either, and its page must not pass.
  await page.getByText('No computes in Beta Lab yet.').waitFor();
  assert.equal(await page.getByRole('link', {name: 'Add compute'}).count(), 0);
  await page.getByLabel('Organisation').selectOption('acme');
  await page.waitForURL(/#\/o\/acme\/computes$/);
  await page.getByRole('link', {name: 'Add compute'}).waitFor();
  ok('the switcher changes organisation, and Add compute follows the role in each');

  // --- add compute ---------------------------------------------------------------------------
  await page.getByRole('link', {name: 'Add compute'}).click();
  await page.getByLabel('Name').fill('console-cluster');
  await page.getByRole('button', {name: /Register and generate install token/}).click();
  const token = (await page.locator('#install-token').innerText()).trim();
  assert.match(token, /^exp_it_[A-Za-z0-9_-]{20,}$/);
  const computeId = (await page.locator('#compute-id').innerText()).trim();
  assert.match(computeId, /^cmp_/);
  assert.equal(await page.locator('#enrolment').getAttribute('data-state'), 'waiting');
  for (const id of ['#control-plane-url', '#data-plane-url', '#daemon-version']) {
    assert.ok((await page.locator(id).innerText()).trim().length > 0, `${id} is shown`);
  }
  await page.getByLabel(/Shared prefix/).fill(env('EXPANSE_CONSOLE_PREFIX'));
  await page.getByLabel(/Shared prefix/).press('Tab');  // change event: the texts are re-rendered
  await page.locator('#install-script', {hasText: env('EXPANSE_CONSOLE_PREFIX')}).waitFor();
  const script = await page.locator('#install-script').innerText();
  // The mirror has a signed CLI and its key: the panel's first step is the one-line installer.
  assert.match(await page.locator('#cli-install-line').innerText(),
    /^curl -fsSL https:\/\/127\.0\.0\.1:\d+\/install \| sh$/);
  assert.ok(!script.includes(token), 'the install script must not contain the token');
  assert.match(script, /read -r -s -p/, "the script reads the token at a hidden prompt");
  ok(`compute ${computeId} registered; token shown once; the CLI's one-line installer first; install script for the prefix, without the token`);
  await assertLabelled(page, 'add compute');
  await shot(page, '02-add-compute-panel');

  // --- the install, as an operator runs it: the panel turns active -------------------------------
  const scriptFile = join(ARTIFACTS, 'install-expanse.sh');
  writeFileSync(scriptFile, script, {mode: 0o644});
  const installOut = hook(`install ${scriptFile}`, token + '\n');
  console.log(installOut.split('\n').map((l) => `    | ${l}`).join('\n'));
  await page.locator('#enrolment[data-state="active"]').waitFor({timeout: 120_000});
  assert.match(await page.locator('#enrolment').innerText(), /First heartbeat received/);
  ok('the open panel turned active on the compute\'s first heartbeat');
  await shot(page, '03-add-compute-active');

  // --- compute page ----------------------------------------------------------------------------
  await timed('compute page', async () => {
    await page.getByRole('link', {name: 'Open the compute page'}).click();
    await page.locator('#gpus').waitFor();
  });
  await assertLabelled(page, 'compute page');
  assert.match(await page.locator('#sampled-workers').innerText(), /\d+ of \d+ sampled worker nodes/);
  assert.match(await page.locator('#capabilities').innerText(), /controller/);
  // Each capability's column sums up how many of the sampled workers supply it.
  const supplyingRow = await page.locator('#workers-supplying td[data-capability="nvml"]').innerText();
  assert.match(supplyingRow, /^\d+ of \d+ sampled worker nodes$/);
  ok('the compute page shows nodes, GPUs, sampled workers and capability health');

  // --- a job and its timeline ---------------------------------------------------------------------
  const jobId = hook(`job ${computeId}`).trim().split('\n').pop();
  assert.match(jobId, /^\d+$/);
  const row = page.locator(`#jobs tr[data-job="${jobId}"][data-compute="${computeId}"]`);
  await timed('jobs list', async () => {
    await page.getByRole('link', {name: 'Jobs', exact: true}).click();
    await row.waitFor();
  });
  await assertLabelled(page, 'jobs');
  await shot(page, '04-jobs');
  // The job's hardware counters (the hook sent a CUPTI helper's series for one of its GPUs):
  // the SM/tensor column says what the API sums up.
  const jobPath = `/api/v1/computes/${encodeURIComponent(computeId)}/jobs/${encodeURIComponent(jobId)}`;
  const listedJob = await page.evaluate(async (p) => (await fetch(p)).json(), jobPath);
  assert.ok(listedJob.used.sm_active_mean > 0, `sm_active_mean ${listedJob.used.sm_active_mean}`);
  const smColumn = (await page.locator('#jobs thead th').allInnerTexts()).findIndex((t) => /SM\/tensor active/.test(t));
  assert.ok(smColumn >= 0, 'an SM/tensor active column');
  assert.equal(await row.locator('td, th').nth(smColumn).innerText(),
    `${Math.round(listedJob.used.sm_active_mean * 100)} % / ${Math.round(listedJob.used.tensor_active_mean * 100)} %`);
  ok(`job ${jobId} is listed with requested and used resources, its SM and tensor activity from the counters`);
  await page.locator('#jobs th button', {hasText: 'SM mean'}).click();
  assert.equal(await page.locator('#jobs th', {hasText: 'SM mean'}).getAttribute('aria-sort'), 'descending');
  ok('the jobs list sorts by a column');

  await timed('job page with its timeline', async () => {
    await row.getByRole('link', {name: jobId}).click();
    await page.locator('#timeline canvas').first().waitFor();
  });
  await assertLabelled(page, 'job');
  const points = Number(await page.locator('#timeline').getAttribute('data-points'));
  const series = Number(await page.locator('#timeline').getAttribute('data-series'));
  assert.ok(series >= 1 && points > 0, `timeline has ${series} series and ${points} points`);
  assert.match(await page.locator('#requested-used').innerText(), /GPUs/);
  ok(`job page draws the per-GPU timeline (${series} series, ${points} points)`);
  await shot(page, '05-job');

  // The verdicts come from their own API call; the section (a list or "nothing to report")
  // appears only when that call answered (a failure shows an error box instead).
  await page.locator('#verdicts').waitFor();
  assert.match(await page.locator('#verdicts').innerText(), /^Verdicts\n/);
  ok('the job page shows its verdicts section');

  // The verdict ribbon under the timeline: one band per verdict of the API's answer, in its
  // order. The job holds an idle GPU next to its busy one on each node, so it has at least
  // over_allocated. Samples flushed late can still change the answer just after the job:
  // compare again after a reload until the page and the API agree (three tries).
  const verdictsPath = `/api/v1/computes/${encodeURIComponent(computeId)}/jobs/${encodeURIComponent(jobId)}/verdicts`;
  let verdicts = await page.evaluate(async (p) => (await fetch(p)).json(), verdictsPath);
  assert.ok(verdicts.verdicts.some((v) => v.code === 'over_allocated'),
    `the job's verdicts include over_allocated: ${JSON.stringify(verdicts)}`);
  let bandCodes;
  for (let attempt = 1; ; ++attempt) {
    await page.locator('#verdict-ribbon .band').first().waitFor();
    await page.locator('#verdict-list').waitFor();
    bandCodes = await page.locator('#verdict-ribbon .band').evaluateAll((els) => els.map((e) => e.dataset.code));
    verdicts = await page.evaluate(async (p) => (await fetch(p)).json(), verdictsPath);
    if (JSON.stringify(bandCodes) === JSON.stringify(verdicts.verdicts.map((v) => v.code)) || attempt === 3) break;
    await page.reload();
  }
  assert.deepEqual(bandCodes, verdicts.verdicts.map((v) => v.code), 'one band per verdict, in the answer\'s order');
  const legend = await page.locator('#verdict-legend code').allInnerTexts();
  assert.deepEqual(legend, [...new Set(verdicts.verdicts.map((v) => v.code))]);
  const last = verdicts.verdicts.length - 1;
  assert.equal(await page.locator(`#verdict-${last} details`).getAttribute('open'), null, 'evidence starts closed');
  await page.locator(`#verdict-ribbon .band[data-index="${last}"]`).click();
  const evidence = page.locator(`#verdict-${last} details[open] pre`);
  await evidence.waitFor({state: 'visible'});
  assert.deepEqual(Object.keys(JSON.parse(await evidence.innerText())).sort(),
    Object.keys(verdicts.verdicts[last].evidence).sort());
  assert.match(await page.locator(`#verdict-${last}`).getAttribute('class'), /highlight/);
  ok(`the verdict ribbon has a band per verdict (${bandCodes.join(', ')}); a click opens that verdict's evidence`);
  await shot(page, '05b-job-verdicts');

  await page.locator('#top-frames').waitFor();
  assert.match(await page.locator('#top-frames').innerText(), /train\.py:load_batch/);
  assert.ok(await page.locator('.flame .flame-frame').count() >= 3, 'the flame graph has frames');
  ok('the job page shows the job\'s Python stacks: top frames and a flame graph');
  // The capture agent's two windows of this job (the hook sent them as the controller would):
  // the kernels by GPU time, then each window, newest first, with its longest kernel.
  await page.locator('#capture-kernels').waitFor();
  assert.match(await page.locator('#capture p').first().innerText(),
    /^52 kernels, 5\.0 s of GPU time, from 1 process on 1 host \(2 windows\)/);
  assert.deepEqual((await page.locator('#capture-kernels tbody tr').first().locator('td').allInnerTexts()),
    ['void gemm<…>', '50', '5.0 s', '100.0 %']);
  const windowCells = await page.locator('#capture-windows tbody tr').evaluateAll(
    (rows) => rows.map((r) => [...r.querySelectorAll('td')].slice(1).map((td) => td.innerText)));
  for (const cells of windowCells) assert.match(cells[0], / · 4242$/, 'the process: host and pid');
  assert.deepEqual(windowCells.map((cells) => cells.slice(1)), [
    ['31 · 3.0 s (30 %)', 'void gemm<…> · 3.0 s', '3.0 MiB', '4.0 ms'],
    ['21 · 2.0 s (20 %)', 'void gemm<…> · 2.0 s', '3.0 MiB', '4.0 ms']]);
  // The job's trace segment (the hook sent one as the controller would): listed, and its link
  // downloads the very bytes the server keeps under its SHA-256.
  const download = page.locator('#segment-list a.segment-download');
  await download.waitFor();
  assert.equal(await download.count(), 1);
  assert.match(await page.locator('#segment-list tbody tr').innerText(), /a GPU went idle/);
  const segmentsPath = `/api/v1/computes/${encodeURIComponent(computeId)}/jobs/${encodeURIComponent(jobId)}/segments`;
  const listedSegments = await page.evaluate(async (p) => (await fetch(p)).json(), segmentsPath);
  const downloadedSha = await page.evaluate(async (href) => {
    const digest = await crypto.subtle.digest('SHA-256', await (await fetch(href)).arrayBuffer());
    return [...new Uint8Array(digest)].map((b) => b.toString(16).padStart(2, '0')).join('');
  }, await download.getAttribute('href'));
  assert.equal(downloadedSha, listedSegments.segments[0].sha256);
  assert.equal(await download.getAttribute('download'), listedSegments.segments[0].file_name,
    'the link saves the file under the server\'s name for it');
  assert.match(listedSegments.segments[0].file_name, new RegExp(`^seg-${jobId}-.*\\.json$`));
  ok('the job page shows the capture agent\'s kernels and windows, and its trace segment, downloaded byte for byte');

  await page.getByLabel('Metric').selectOption('gpu.mem_used_mib');
  await page.waitForFunction(() => !document.querySelector('#timeline[aria-busy]'));
  await page.locator('#timeline canvas').first().waitFor();
  ok('another metric redraws the timeline');
  // The counters, named with their source: one GPU's ten seconds of SM activity.
  assert.equal(await page.locator('#timeline-metric option[value="gpu.sm_active"]').innerText(), 'SM activity (CUPTI counters)');
  await page.getByLabel('Metric').selectOption('gpu.sm_active');
  await page.waitForFunction(() => !document.querySelector('#timeline[aria-busy]'));
  await page.locator('#timeline canvas').first().waitFor();
  // Ten seconds of one GPU, in buckets of at least 2 s: 5 to 10 points (none before the hook sent them).
  const counterPoints = Number(await page.locator('#timeline').getAttribute('data-points'));
  assert.ok(counterPoints >= 5 && counterPoints <= 10, `${counterPoints} points of gpu.sm_active`);
  ok('the timeline draws the CUPTI counters under their source\'s name');

  // --- the compute page's capability health, per worker, as the heartbeat reports it -----------
  await page.getByRole('link', {name: 'Compute', exact: true}).click();
  await page.getByRole('link', {name: 'console-cluster', exact: true}).click();
  await page.locator('#capabilities').waitFor();
  const computePath = `/api/v1/computes/${encodeURIComponent(computeId)}`;
  const reports = (await page.evaluate(async (p) => (await fetch(p)).json(), computePath)).heartbeat.workers.reports;
  assert.ok(reports.length >= 1, 'worker reports in the heartbeat');
  const capabilityColumns = await page.locator('#capabilities thead th').allInnerTexts();
  for (const report of reports) {
    const cells = page.locator('#capabilities tbody tr', {has: page.locator('th', {hasText: new RegExp(`^${report.host}$`)})});
    for (const [key, label] of [['cupti', 'CUPTI'], ['dcgm', 'DCGM']]) {
      const cap = report.capabilities[key];
      const text = await cells.locator('th, td').nth(capabilityColumns.indexOf(label)).innerText();
      assert.ok(cap && text.startsWith(cap.state), `${report.host} ${label}: "${text}" against ${JSON.stringify(cap)}`);
      assert.ok(!cap.reason || text.includes(cap.reason.slice(0, 40)), `${report.host} ${label}'s reason: "${text}"`);
    }
  }
  ok(`the compute page shows each worker's CUPTI and DCGM state and reason (${reports.map((r) => r.host).join(', ')})`);

  // --- efficiency: idle GPU-hours per user, then per account, as the API counts them ---------------
  await page.getByRole('link', {name: 'Efficiency', exact: true}).click();
  await page.locator('#efficiency').waitFor();
  await assertLabelled(page, 'efficiency');
  assert.equal(await page.locator('#nav-efficiency').getAttribute('aria-current'), 'page');
  for (const groupBy of ['user', 'account']) {
    if (groupBy !== 'user') {
      await page.getByLabel('Group by').selectOption(groupBy);
      await page.locator('#efficiency-csv[href*="group_by=account"]').waitFor();
      await page.locator('#efficiency').waitFor();
    }
    // The CSV link asks for the table's own window; without format=csv it is the table's JSON.
    const csvHref = await page.locator('#efficiency-csv').getAttribute('href');
    assert.match(csvHref, new RegExp(`^/api/v1/orgs/acme/efficiency\\?group_by=${groupBy}&from=\\d+&to=\\d+&format=csv$`));
    const answer = await page.evaluate(async (p) => (await fetch(p)).json(), csvHref.replace('&format=csv', ''));
    assert.equal(answer.group_by, groupBy);
    assert.ok(answer.groups.length >= 1, `the job is counted: ${JSON.stringify(answer)}`);
    const shown = await page.locator('#efficiency tbody tr').evaluateAll((els) => els.map((e) => e.dataset.group));
    assert.deepEqual(shown, answer.groups.map((g) => g.key), `rows per ${groupBy}, most idle first`);
    const firstJobs = await page.locator('#efficiency tbody tr').first().locator('td').first().innerText();
    assert.equal(Number(firstJobs), answer.groups[0].jobs);
    const totalJobs = await page.locator('#efficiency-totals td').first().innerText();
    assert.equal(Number(totalJobs), answer.totals.jobs);
    const csv = await page.evaluate(async (p) => {
      const r = await fetch(p);
      return {status: r.status, type: r.headers.get('content-type'), body: await r.text()};
    }, csvHref);
    assert.equal(csv.status, 200);
    assert.match(csv.type, /^text\/csv/);
    const lines = csv.body.split('\r\n').filter(Boolean);
    assert.match(lines[0], new RegExp(`^${groupBy},jobs,gpus,never_used_gpus,`));
    assert.equal(lines.length, answer.groups.length + 1, 'the CSV has a line per group');
    ok(`the efficiency page per ${groupBy} shows the API's ${answer.groups.length} group(s) and totals; Download CSV is the same query`);
  }
  await page.locator('#efficiency th button', {hasText: 'Idle GPU-h'}).click();
  assert.equal(await page.locator('#efficiency th', {hasText: 'Idle GPU-h'}).getAttribute('aria-sort'), 'ascending');
  await page.getByLabel('Period').selectOption('24h');
  await page.locator('#efficiency-csv[href*="group_by=account"]').waitFor();
  await page.waitForURL(/efficiency\?group_by=account&period=24h$/);
  await page.locator('#efficiency').waitFor();
  ok('the efficiency table sorts by a column, and the period is a choice kept in the URL');
  await shot(page, '05c-efficiency');

  // --- re-issue and deprovision, on a second compute (the first one stays installed) -------------
  await page.getByRole('link', {name: 'Compute', exact: true}).click();
  await page.getByRole('link', {name: 'Add compute'}).click();
  await page.getByLabel('Name').fill('spare');
  await page.getByRole('button', {name: /Register and generate install token/}).click();
  const spareToken = (await page.locator('#install-token').innerText()).trim();
  const spareId = (await page.locator('#compute-id').innerText()).trim();
  await page.getByRole('link', {name: 'Open the compute page'}).click();
  await page.getByRole('button', {name: 'Re-issue install token'}).click();
  const reissued = (await page.locator('#install-token').innerText()).trim();
  assert.match(reissued, /^exp_it_/);
  assert.notEqual(reissued, spareToken);
  ok('re-issuing shows a new install token');
  await page.getByRole('button', {name: 'Deprovision…'}).click();
  await page.getByRole('button', {name: 'Yes, deprovision spare'}).click();
  await page.locator('.badge.state-deprovisioned').waitFor();
  assert.equal((await page.locator('#compute-id').innerText()).trim(), spareId);
  assert.equal(await page.getByRole('button', {name: /Deprovision|Re-issue/}).count(), 0);
  ok('deprovisioning, once confirmed, leaves the compute deprovisioned with no actions');

  // --- API tokens: made from the session, shown once, working until revoked ---------------------
  await page.getByRole('link', {name: 'API tokens', exact: true}).click();
  await page.getByRole('heading', {name: 'API tokens'}).waitFor();
  await assertLabelled(page, 'API tokens');
  assert.equal(await page.locator('#nav-tokens').getAttribute('aria-current'), 'page');
  const scopeBoxes = await page.locator('input[name="scope"]').evaluateAll((els) => els.map((e) => e.value));
  assert.deepEqual(scopeBoxes, ['read', 'compute:register', 'admin'], 'an owner may hand out every scope');
  await page.getByLabel('Token name').fill('console test');
  await page.getByRole('button', {name: 'Make API token'}).click();
  const apiToken = (await page.locator('#new-api-token').innerText()).trim();
  assert.match(apiToken, /^exp_at_[A-Za-z0-9_-]{40,}$/);
  const tokenRow = page.locator('#api-tokens tr[data-state="live"]', {hasText: 'console test'});
  await tokenRow.waitFor();
  // Another client with no cookies: the token alone reads, and stops at once when revoked.
  const bare = await request.newContext({ignoreHTTPSErrors: true});
  const withToken = () => bare.get(`${URL}/api/v1/orgs/acme/computes`, {headers: {Authorization: `Bearer ${apiToken}`}});
  assert.equal((await withToken()).status(), 200);
  await shot(page, '05d-api-tokens');
  await tokenRow.getByRole('button', {name: 'Revoke console test'}).click();
  await page.locator('#api-tokens tr[data-state="revoked"]', {hasText: 'console test'}).waitFor();
  assert.equal((await withToken()).status(), 401);
  await bare.dispose();
  ok('an API token made on its page is shown once, reads with no session, and is refused once revoked');

  // --- alerts: an admin makes a rule, it is listed as the API has it, and deleted -----------------
  await page.getByRole('link', {name: 'Alerts', exact: true}).click();
  await page.getByRole('heading', {name: 'Alerts'}).waitFor();
  assert.equal(await page.locator('#nav-alerts').getAttribute('aria-current'), 'page');
  await page.locator('#alert-deliveries').waitFor();
  await assertLabelled(page, 'alerts');
  await page.getByLabel('Rule name').fill('stuck for a quarter hour');
  await page.getByLabel('Verdict').selectOption('stuck');
  await page.getByLabel('For at least (minutes)').fill('15');
  await page.getByLabel(/^To/).fill('https://hooks.example.org/services/T0/B0/console');
  await page.getByRole('button', {name: 'Make alert rule'}).click();
  const ruleRow = page.locator('#alert-rules tr[data-rule]', {hasText: 'stuck for a quarter hour'});
  await ruleRow.waitFor();
  assert.match(await ruleRow.innerText(), /stuck for 15 min/);
  const rules = await page.evaluate(async () => (await (await fetch('/api/v1/orgs/acme/alert-rules')).json()).alert_rules);
  const made = rules.find((r) => r.name === 'stuck for a quarter hour');
  assert.deepEqual([made.verdict, made.min_duration_s, made.channel, made.target],
    ['stuck', 900, 'webhook', 'https://hooks.example.org/services/T0/B0/console']);
  // A webhook to another machine in clear text is refused, with the server's reason shown.
  await page.getByLabel('Rule name').fill('clear text');
  await page.getByLabel(/^To/).fill('http://hooks.example.org/x');
  await page.getByRole('button', {name: 'Make alert rule'}).click();
  await page.locator('form[aria-label="Make an alert rule"] .error', {hasText: /target/}).waitFor();
  await shot(page, '05e-alerts');
  await ruleRow.getByRole('button', {name: 'Pause rule stuck for a quarter hour'}).click();
  await page.locator('#alert-rules tr[data-enabled="false"]', {hasText: 'stuck for a quarter hour'}).waitFor();
  const paused = await page.evaluate(async () => (await (await fetch('/api/v1/orgs/acme/alert-rules')).json()).alert_rules);
  assert.equal(paused.find((r) => r.name === 'stuck for a quarter hour').enabled, false);
  await ruleRow.getByRole('button', {name: 'Delete rule stuck for a quarter hour'}).click();
  await page.locator('#alert-rules tr[data-rule]', {hasText: 'stuck for a quarter hour'}).waitFor({state: 'detached'});
  ok('the alerts page makes a rule the API then holds (stuck for 15 min to a webhook), shows a refusal\'s reason, pauses and deletes it');

  // --- sign out: the session is gone ---------------------------------------------------------------
  await page.getByRole('button', {name: 'Sign out'}).click();
  await page.getByLabel('Email').waitFor();
  const me = await page.evaluate(async () => (await fetch('/api/v1/me')).status);
  assert.equal(me, 401);
  ok('sign-out ends the session');

  // --- a viewer sees no actions it may not take -------------------------------------------------------
  await signIn(page, env('EXPANSE_CONSOLE_VIEWER_EMAIL'), env('EXPANSE_CONSOLE_VIEWER_PASSWORD'));
  await page.getByRole('heading', {name: 'Compute'}).waitFor();
  assert.equal(await page.getByRole('link', {name: 'Add compute'}).count(), 0);
  await page.locator(`a[href$="/computes/${computeId}"]`).click();
  await page.locator('#compute-id').waitFor();
  assert.equal(await page.getByRole('button', {name: /Deprovision|Re-issue/}).count(), 0);
  ok('a viewer is shown neither Add compute, Re-issue nor Deprovision');
  await page.getByRole('link', {name: 'API tokens', exact: true}).click();
  await page.getByRole('button', {name: 'Make API token'}).waitFor();
  // The operator mapped the viewer to SLURM user viewer1: a token for their own jobs is on offer.
  assert.deepEqual(await page.locator('input[name="scope"]').evaluateAll((els) => els.map((e) => e.value)),
    ['read', 'jobs:own'], 'a viewer may only make read and own-jobs tokens');
  await page.getByText('jobs:own: only your own jobs (SLURM user viewer1)').waitFor();
  ok('a viewer\'s token form offers only the read and jobs:own scopes, the latter naming their SLURM user');
  await page.getByRole('link', {name: 'Alerts', exact: true}).click();
  await page.getByText('Only the organisation\'s admins make and delete rules.').waitFor();
  assert.equal(await page.getByRole('button', {name: 'Make alert rule'}).count(), 0);
  ok('a viewer sees the alerts but no form to make them');
  await shot(page, '06-compute-viewer');

  assert.deepEqual(pageErrors, [], 'no script errors on any page');
  ok('no script errors');
} catch (err) {
  await shot(page, 'failure').catch(() => {});
  console.error(`not ok - ${err.stack || err}`);
  process.exitCode = 1;
} finally {
  await browser.close();
}
