// The console's pure logic under node's own test runner (no browser): waste rules, flame graph
// folding, timeline columns, formats, the verdict ribbon's geometry, the efficiency table. Run by
// ctest as console.unit.
import assert from 'node:assert/strict';
import {test} from 'node:test';

import {VERDICTS, ruleAction, ruleSeconds, ruleTrigger} from '../src/alert_rules.js';
import {ApiError, api} from '../src/api.js';
import {bytes, captureRows, nanos, pcSamplingCell, segmentRows, shortKernel, stallName, windowRows} from '../src/capture.js';
import {refusedRecordsProblem, runsProblem, workersSupplying} from '../src/daemon_health.js';
import {COLUMNS, efficiencyChoices, efficiencyPath, efficiencyRows, efficiencyTotals, gpuHours, share,
  sortRows, truncationNotice} from '../src/efficiency.js';
import {DEEPER, MAX_DEPTH, buildTree, noStacksText, shortFrame} from '../src/flame.js';
import {visibleText} from '../src/dom.js';
import {duration, mib, percent, ratioPercent} from '../src/format.js';
import {METRICS, toColumns} from '../src/timeline.js';
import {MIN_BAND_PX, legendCodes, ribbonBands, verdictColor} from '../src/verdict_ribbon.js';
import {verdictLabel, verdictRows, verdictWhen} from '../src/verdicts.js';
import {wasteFlags} from '../src/waste.js';

const used = (u) => ({used: {has_gpu_samples: true, gpus_allocated: 2, gpus_active: 2,
                             allocated_gpu_hours: 2, idle_gpu_hours: 0, idle_tail_ms: 0, ...u}});

test('a job whose GPUs all worked and did not linger is not flagged', () => {
  assert.deepEqual(wasteFlags(used({})), []);
});

test('allocated GPUs that never worked are flagged by count', () => {
  assert.deepEqual(wasteFlags(used({gpus_active: 1, idle_gpu_hours: 1})), ['1 of 2 GPUs never active']);
});

test('without samples, inactive GPUs are not called idle', () => {
  assert.deepEqual(wasteFlags(used({has_gpu_samples: false, gpus_active: 0})), []);
});

test('half or more of the GPU time idle is flagged, less is not', () => {
  assert.deepEqual(wasteFlags(used({idle_gpu_hours: 1})), ['50 % of GPU time idle']);
  assert.deepEqual(wasteFlags(used({idle_gpu_hours: 0.9})), []);
});

test('an idle tail of ten minutes or more is flagged with its length', () => {
  assert.deepEqual(wasteFlags(used({idle_tail_ms: 9 * 60_000})), []);
  assert.deepEqual(wasteFlags(used({idle_tail_ms: 25 * 60_000})), ['idle for the last 25 min 0 s']);
});

test('folded stacks become a tree whose counts add up at every level', () => {
  const root = buildTree([
    {folded: 'main;train;step', count: 5},
    {folded: 'main;train;load', count: 3},
    {folded: 'main;eval', count: 2},
    {folded: 'worker', count: 1},
  ]);
  assert.equal(root.count, 11);
  const main = root.children.get('main');
  assert.equal(main.count, 10);
  assert.equal(main.children.get('train').count, 8);
  assert.equal(main.children.get('train').children.get('load').count, 3);
  assert.equal(root.children.get('worker').count, 1);
});

test('a frame name repeated at another depth is a different node', () => {
  const root = buildTree([{folded: 'f;f;f', count: 2}]);
  assert.equal(root.children.get('f').children.get('f').children.get('f').count, 2);
});

test('a stack deeper than the flame graph draws is folded below its last drawn frame', () => {
  const root = buildTree([{folded: Array(2048).fill('a').join(';'), count: 1},
    {folded: Array(300).fill('a').join(';') + ';b', count: 2}]);
  let depth = 0;
  let node = root;
  while (node.children.size) {
    assert.equal(node.children.size, 1);
    node = [...node.children.values()][0];
    depth++;
  }
  assert.equal(depth, MAX_DEPTH + 1);
  assert.equal(node.name, DEEPER);
  assert.equal(node.count, 3);
});

test('bidirectional controls in data are shown, not obeyed', () => {
  assert.equal(visibleText('ab\u202Ecd\u2066e'), 'ab<U+202E>cd<U+2066>e');
  assert.equal(visibleText('שלום train.py'), 'שלום train.py');
  assert.equal(visibleText(7), '7');
});

test('timeline series with different buckets share a union x axis with gaps', () => {
  const {data, empty} = toColumns({series: [
    {host: 'a', gpu_uuid: 'GPU-1', points: [[1000, 0, 10, 5], [3000, 0, 10, 7]]},
    {host: 'b', gpu_uuid: 'GPU-2', points: [[2000, 1, 1, 1], [3000, 2, 2, 2]]},
  ]});
  assert.equal(empty, false);
  assert.deepEqual(data, [[1, 2, 3], [5, null, 7], [null, 1, 2]]);
  assert.equal(toColumns({series: []}).empty, true);
});

test('counter ratios are drawn in percent', () => {
  const {data} = toColumns({series: [{host: 'a', gpu_uuid: 'GPU-1', points: [[1000, 0.5, 0.9, 0.71]]}]}, 100);
  assert.deepEqual(data, [[1], [71]]);
  const tensor = METRICS.find(([m]) => m === 'gpu.tensor_active');
  assert.equal(tensor[2], '%');
  assert.equal(tensor[3], 100);
  assert.match(tensor[1], /CUPTI/);
  // The same measurement from DCGM is its own choice, labelled with its source.
  const dcgm = METRICS.find(([m]) => m === 'gpu.dcgm.tensor_active');
  assert.equal(dcgm[3], 100);
  assert.match(dcgm[1], /DCGM/);
  assert.doesNotMatch(dcgm[1], /CUPTI/);
});

test('formats show missing values as a dash and pick readable units', () => {
  assert.equal(percent(null), '—');
  assert.equal(percent(42.4), '42 %');
  assert.equal(ratioPercent(-1), '—');
  assert.equal(ratioPercent(0.256), '26 %');
  assert.equal(mib(512), '512 MiB');
  assert.equal(mib(143771), '140.4 GiB');
  assert.equal(duration(59_000), '59 s');
  assert.equal(duration(3 * 3600_000 + 5 * 60_000), '3 h 5 min');
  assert.equal(duration(50 * 3600_000), '2 d 2 h');
});

test('frames lose their directories for display, nothing else', () => {
  assert.equal(shortFrame('/var/tmp/x/train.py:load_batch:4'), 'train.py:load_batch:4');
  assert.equal(shortFrame('train.py:<module>:1'), 'train.py:<module>:1');
  assert.equal(shortFrame('<built-in>:read:0'), '<built-in>:read:0');
  assert.equal(shortFrame('/a/b.py:f:1;not split'), 'b.py:f:1;not split');
});

test('a daemon whose runs all ended cleanly shows nothing; a crash loop shows count and reason', () => {
  assert.equal(runsProblem(undefined), '');
  assert.equal(runsProblem({starts: 3, unclean_exits: 0}), '');
  assert.equal(runsProblem({starts: 9, unclean_exits: 8, last_unclean_reason: 'fatal signal SIGABRT (abort)'}),
    'ended without a clean stop 8 times in 9 starts; last: fatal signal SIGABRT (abort)');
  assert.equal(runsProblem({starts: 2, unclean_exits: 1}), 'ended without a clean stop once in 2 starts');
});

test('refused worker records are shown by host, worst first', () => {
  assert.equal(refusedRecordsProblem({}), '');
  assert.equal(refusedRecordsProblem({bad_worker_records: 0}), '');
  const diagnostics = {bad_worker_records: 12, bad_worker_records_by_host: {
    w1: {records: 2, last_reason: 'bad_record', last_problem: 'gpu_series[0].t0 must be an integer'},
    w2: {records: 10, last_reason: 'invalid_json'},
  }};
  assert.equal(refusedRecordsProblem(diagnostics),
    '12 refused — w2: 10 (invalid_json); w1: 2 (gpu_series[0].t0 must be an integer)');
});

test('each capability counts the sampled workers that supply it (only ok supplies)', () => {
  const workers = {sampled: 3, expected: 4, reports: [
    {host: 'w1', capabilities: {cupti: {state: 'ok'}, dcgm: {state: 'absent', reason: 'dcgmi not found'}}},
    {host: 'w2', capabilities: {cupti: {state: 'degraded', reason: 'CUPTI PM sampling unavailable'}}},
    {host: 'w3'},
  ]};
  assert.equal(workersSupplying(workers, 'cupti'), '1 of 3 sampled worker nodes');
  assert.equal(workersSupplying(workers, 'dcgm'), '0 of 3 sampled worker nodes');
  assert.equal(workersSupplying({sampled: 1, reports: [{host: 'w1', capabilities: {cupti: {state: 'disabled'}}}]}, 'cupti'),
    '0 of 1 sampled worker nodes');
  assert.equal(workersSupplying(undefined, 'cupti'), '0 of 0 sampled worker nodes');
});

test('verdicts read as label, interval from the job start, confidence and evidence', () => {
  const answer = {from_ms: 1000, to_ms: 601_000, verdicts: [
    {code: 'over_allocated', from_ms: 1000, to_ms: 601_000, confidence: 0.9, gpus: ['a', 'b'],
     evidence: {gpus_allocated: 2, gpus_active: 1}, suggestion: 'ask for 1 GPU, not 2 (--gres=gpu:1)'},
    {code: 'input_bound', from_ms: 301_000, to_ms: 601_000, confidence: 0.85, gpus: ['a'],
     evidence: {stacks: {samples: 240}}, suggestion: 'raise num_workers'}]};
  const rows = verdictRows(answer);
  assert.equal(rows.length, 2);
  assert.equal(rows[0].label, 'More GPUs than used');
  assert.equal(rows[0].when, 'whole job');
  assert.equal(rows[0].confidence, '90 %');
  assert.equal(rows[0].gpus, 2);
  assert.equal(rows[1].when, '+5 min 0 s – +10 min 0 s (5 min 0 s)');
  assert.match(rows[1].evidence, /"samples": 240/);
  assert.equal(verdictWhen({from_ms: 1000, to_ms: 61_000}, 1000, 601_000), 'start – +1 min 0 s (1 min 0 s)');
  assert.equal(verdictLabel('future_code'), 'future_code');
  assert.deepEqual(verdictRows({}), []);
});

// A job from 0 to 1000 s on a 1000-pixel ribbon: one pixel per second.
const RANGE = {from_ms: 0, to_ms: 1_000_000};
const at = (code, fromS, toS) => ({code, from_ms: fromS * 1000, to_ms: toS * 1000});

test('a verdict interval becomes a band at its place on the job\'s time range', () => {
  const {bands, lanes} = ribbonBands({verdicts: [at('input_bound', 100, 400)]}, RANGE, 1000);
  assert.deepEqual(bands, [{index: 0, code: 'input_bound', whole: false, x: 100, width: 300, lane: 0}]);
  assert.equal(lanes, 1);
  // The same on a narrower ribbon, scaled.
  assert.deepEqual(ribbonBands({verdicts: [at('input_bound', 100, 400)]}, RANGE, 500).bands[0],
    {index: 0, code: 'input_bound', whole: false, x: 50, width: 150, lane: 0});
});

test('whole-job verdicts span the ribbon whatever their bounds, each in its own lane first', () => {
  const answer = {verdicts: [at('input_bound', 0, 300), at('over_allocated', 10, 20), at('memory_oversized', 0, 1000),
    at('cpu_only', 0, 1000)]};
  const {bands, lanes} = ribbonBands(answer, RANGE, 800);
  assert.equal(lanes, 4);
  assert.deepEqual(bands.map((b) => [b.code, b.x, b.width, b.lane]), [
    ['input_bound', 0, 240, 3], ['over_allocated', 0, 800, 0], ['memory_oversized', 0, 800, 1], ['cpu_only', 0, 800, 2]]);
});

test('intervals are clipped to the range; one wholly outside is left out', () => {
  const answer = {verdicts: [at('stuck', -100, 200), at('no_process', 900, 1500), at('io_wait', 1200, 1300),
    at('host_bound', -50, -10)]};
  const {bands} = ribbonBands(answer, RANGE, 1000);
  assert.deepEqual(bands.map((b) => [b.index, b.code, b.x, b.width]), [[0, 'stuck', 0, 200], [1, 'no_process', 900, 100]]);
});

test('a tiny interval stays visible at the minimum width, inside the ribbon', () => {
  const answer = {verdicts: [at('communication_wait', 500, 500.5), at('stuck', 1000, 1000), at('sync_bound', 0, 0.1)]};
  const {bands} = ribbonBands(answer, RANGE, 1000);
  assert.equal(MIN_BAND_PX, 2);
  assert.deepEqual(bands.map((b) => [b.x, b.width]), [[500, 2], [998, 2], [0, 2]]);
  for (const b of bands) assert.ok(b.width >= MIN_BAND_PX && b.x >= 0 && b.x + b.width <= 1000);
});

test('overlapping intervals take separate lanes; disjoint and touching ones share one', () => {
  const answer = {verdicts: [at('input_bound', 0, 300), at('host_bound', 200, 500), at('stuck', 300, 400),
    at('io_wait', 600, 700), at('no_process', 250, 260)]};
  const {bands, lanes} = ribbonBands(answer, RANGE, 1000);
  assert.deepEqual(bands.map((b) => [b.code, b.lane]),
    [['input_bound', 0], ['host_bound', 1], ['stuck', 0], ['io_wait', 0], ['no_process', 2]]);
  assert.equal(lanes, 3);
  // Widened bands are placed by their drawn width: two 2-pixel bands a pixel apart overlap.
  const tiny = ribbonBands({verdicts: [at('stuck', 100, 100), at('no_process', 101, 101)]}, RANGE, 1000);
  assert.deepEqual(tiny.bands.map((b) => b.lane), [0, 1]);
});

test('no verdicts, no bands; a range without length shows every verdict across the ribbon', () => {
  assert.deepEqual(ribbonBands({verdicts: []}, RANGE, 1000), {bands: [], lanes: 0});
  assert.deepEqual(ribbonBands({}, RANGE, 1000), {bands: [], lanes: 0});
  const {bands} = ribbonBands({verdicts: [at('stuck', 5, 6)]}, {from_ms: 5000, to_ms: 5000}, 300);
  assert.deepEqual(bands.map((b) => [b.x, b.width]), [[0, 300]]);
});

test('each code has its own colour and the legend lists the codes present once, in order', () => {
  const codes = ['no_process', 'cpu_only', 'over_allocated', 'memory_oversized', 'stuck', 'communication_wait',
    'input_bound', 'sync_bound', 'host_bound', 'io_wait'];
  assert.equal(new Set(codes.map(verdictColor)).size, codes.length);
  assert.match(verdictColor('a_future_code'), /^#[0-9a-f]{6}$/);
  assert.deepEqual(legendCodes({verdicts: [at('stuck', 0, 1), at('input_bound', 1, 2), at('stuck', 3, 4)]}),
    ['stuck', 'input_bound']);
});

const ROLLUP = {
  group_by: 'user', from_ms: 0, to_ms: 86_400_000,
  groups: [
    {key: 'ana', jobs: 3, gpus: 5, never_used_gpus: 2, allocated_gpu_s: 36_000, active_gpu_s: 9_000, idle_gpu_s: 27_000, idle_share: 0.75},
    {key: '', jobs: 1, gpus: 1, never_used_gpus: 0, allocated_gpu_s: 7_200, active_gpu_s: 7_200, idle_gpu_s: 0, idle_share: 0},
    {key: 'bob', jobs: 1, gpus: 0, never_used_gpus: 0, allocated_gpu_s: 0, active_gpu_s: 0, idle_gpu_s: 0, idle_share: null},
  ],
  totals: {jobs: 5, gpus: 6, never_used_gpus: 2, allocated_gpu_s: 43_200, active_gpu_s: 16_200, idle_gpu_s: 27_000, idle_share: 0.625},
};

test('efficiency groups become rows in GPU-hours, in the server\'s order, with the server\'s totals', () => {
  const rows = efficiencyRows(ROLLUP);
  assert.deepEqual(rows[0], {key: 'ana', jobs: 3, gpus: 5, allocated_h: 10, active_h: 2.5, idle_h: 7.5, idle_share: 0.75,
    never_used_gpus: 2});
  assert.deepEqual(rows.map((r) => r.key), ['ana', '', 'bob']);
  assert.equal(rows[2].idle_share, null);
  const totals = efficiencyTotals(ROLLUP);
  assert.deepEqual(totals, {key: null, jobs: 5, gpus: 6, allocated_h: 12, active_h: 4.5, idle_h: 7.5, idle_share: 0.625,
    never_used_gpus: 2});
  assert.deepEqual(efficiencyRows({}), []);
  assert.equal(COLUMNS.length, 8);
});

test('efficiency rows sort by any column either way, missing values last', () => {
  const rows = efficiencyRows(ROLLUP);
  assert.deepEqual(sortRows(rows, 'key', 1).map((r) => r.key), ['', 'ana', 'bob']);
  assert.deepEqual(sortRows(rows, 'key', -1).map((r) => r.key), ['bob', 'ana', '']);
  assert.deepEqual(sortRows(rows, 'allocated_h', -1).map((r) => r.key), ['ana', '', 'bob']);
  assert.deepEqual(sortRows(rows, 'idle_share', 1).map((r) => r.key), ['', 'ana', 'bob']);
  assert.deepEqual(sortRows(rows, 'idle_share', -1).map((r) => r.key), ['ana', '', 'bob']);
  assert.deepEqual(rows.map((r) => r.key), ['ana', '', 'bob'], 'sorting copies');
});

test('GPU-hours read without losing small figures; shares in percent', () => {
  assert.equal(gpuHours(null), '—');
  assert.equal(gpuHours(0), '0');
  assert.equal(gpuHours(0.001), '< 0.01');
  assert.equal(gpuHours(0.0167), '0.02');
  assert.equal(gpuHours(7.5), '7.50');
  assert.equal(gpuHours(123.44), '123.4');
  assert.equal(gpuHours(1234567.4), '1,234,567');
  assert.equal(share(null), '—');
  assert.equal(share(0.625), '63 %');
  assert.equal(share(0), '0 %');
});

test('the efficiency view comes from the URL, and its table and CSV ask for the same window', () => {
  const q = (s) => new URLSearchParams(s);
  assert.deepEqual(efficiencyChoices(q('')), {groupBy: 'user', period: '7d', compute: '', limit: ''});
  assert.deepEqual(efficiencyChoices(q('group_by=account&period=24h&compute=cmp_1&limit=5')),
    {groupBy: 'account', period: '24h', compute: 'cmp_1', limit: '5'});
  assert.deepEqual(efficiencyChoices(q('group_by=qos&period=1y&limit=-1')), {groupBy: 'user', period: '7d', compute: '', limit: ''});
  const choices = efficiencyChoices(q('group_by=partition&period=24h&compute=c&d'));
  const now = 1_700_000_000_000;
  assert.equal(efficiencyPath('a b', choices, now),
    `/api/v1/orgs/a%20b/efficiency?group_by=partition&from=${now - 86_400_000}&to=${now}&compute=c`);
  assert.equal(efficiencyPath('a b', choices, now, 'csv'),
    `/api/v1/orgs/a%20b/efficiency?group_by=partition&from=${now - 86_400_000}&to=${now}&compute=c&format=csv`);
  assert.match(efficiencyPath('o', efficiencyChoices(q('period=30d')), now), new RegExp(`from=${now - 30 * 86_400_000}&`));
});

test('a truncated rollup says so with the server\'s reason; a complete one says nothing', () => {
  assert.equal(truncationNotice(ROLLUP), null);
  assert.equal(truncationNotice({truncated: false, truncated_reason: 'x'}), null);
  assert.equal(truncationNotice({truncated: true, job_limit: 2000, truncated_reason: 'more than 2000 jobs overlap the window'}),
    'more than 2000 jobs overlap the window');
  assert.equal(truncationNotice({truncated: true, job_limit: 5}), 'only the 5 most recently started jobs were counted.');
});

test('alert rules are worded as the operator set them', () => {
  assert.equal(ruleTrigger({kind: 'verdict', verdict: 'stuck', min_duration_s: 900}), 'stuck for 15 min');
  assert.equal(ruleTrigger({kind: 'verdict', verdict: 'over_allocated', min_duration_s: 0}), 'over_allocated');
  assert.equal(ruleTrigger({kind: 'verdict', verdict: 'no_process', min_duration_s: 5400}), 'no_process for 90 min');
  assert.equal(ruleTrigger({kind: 'digest', period_s: 604800}), 'weekly digest per user');
  assert.equal(ruleTrigger({kind: 'digest', period_s: 86400}), 'daily digest per user');
  assert.equal(ruleTrigger({kind: 'digest', period_s: 7200}), 'digest per user every 2 h');
  assert.equal(ruleSeconds(90), '90 s');
  assert.equal(ruleAction({action: null}), '');
  assert.equal(ruleAction({action: 'scancel', action_grace_s: 1800, action_dry_run: true}),
    'scancel after 30 min (dry run)');
  assert.equal(VERDICTS.length, 10);
});

test('capture window rows: newest first, each window\'s kernels, longest kernel, copies and sync', () => {
  const start = Date.UTC(2026, 11, 6, 9, 0, 0);
  const window = (i, extra) => ({host: 'w1', pid: 7, start_ms: start + i * 10000, end_ms: start + (i + 1) * 10000,
    kernel_count: 21, kernel_ns: 2.5e9, top_kernel: {name: 'void gemm<float, 128>(float*)', count: 20, gpu_ns: 2e9},
    memcpy_bytes: 3 * 1048576, sync_ns: 4e6, ...extra});
  const {rows, note} = windowRows({windows: 3, timeline: [window(0), window(1), window(2, {top_kernel: null, kernel_count: 0, kernel_ns: 0})]});
  assert.equal(rows.length, 3);
  assert.equal(note, '');
  assert.match(rows[0].window.title, /^2026-12-06T09:00:20\.000Z to 2026-12-06T09:00:30\.000Z$/, 'newest first');
  assert.deepEqual(rows[0].top, {text: '—', title: 'no kernel in this window'});
  assert.equal(rows[0].kernels, '0 · 0 µs (0 %)');
  assert.equal(rows[1].process, 'w1 · 7');
  assert.equal(rows[1].kernels, '21 · 2.5 s (25 %)', 'a quarter of the 10 s window');
  assert.deepEqual(rows[1].top, {text: 'void gemm<…> · 2.0 s', title: 'void gemm<float, 128>(float*): 20 launches'});
  assert.equal(rows[1].copied, '3.0 MiB');
  assert.equal(rows[1].sync, '4.0 ms');
  const many = windowRows({windows: 5000, timeline: Array.from({length: 2000}, (_, i) => window(i))}, 100);
  assert.equal(many.rows.length, 100);
  assert.equal(many.note, 'The newest 100 of 5000 windows.');
  assert.match(many.rows[0].window.title, new RegExp(`^${new Date(start + 1999 * 10000).toISOString()}`));
  assert.deepEqual(windowRows(null), {rows: [], note: ''});
});

test('capture summary rows: kernels with their share of GPU time, copies, syncs, NVTX', () => {
  const summary = {
    windows: 3, truncated: false, dropped_records: 0,
    processes: [{host: 'w1', pid: 1}, {host: 'w2', pid: 2}],
    kernels: {count: 63, gpu_ns: 150e6,
      top: [{name: 'void gemm<float, 128>(float*)', count: 60, gpu_ns: 120e6}, {name: 'relu', count: 1, gpu_ns: 500e3}],
      other: {count: 2, gpu_ns: 29.5e6}},
    memcpy: {htod: {count: 4, bytes: 4 * 1048576, gpu_ns: 4000}},
    memset: {count: 0, bytes: 0, gpu_ns: 0},
    sync: {device: {count: 6, wall_ns: 9e6}},
    nvtx: {ranges: [{name: 'step', count: 3, wall_ns: 27e6}], marks: 3},
  };
  const rows = captureRows(summary);
  assert.equal(rows.empty, false);
  assert.equal(rows.headline, '63 kernels, 150.0 ms of GPU time, from 2 processes on 2 hosts (3 windows)');
  assert.deepEqual(rows.kernels[0], [{text: 'void gemm<…>', title: 'void gemm<float, 128>(float*)'}, '60', '120.0 ms', '80.0 %']);
  assert.deepEqual(rows.kernels[1], [{text: 'relu', title: 'relu'}, '1', '500 µs', '0.3 %']);
  assert.equal(rows.kernels[2][0].text, 'other kernels');
  assert.deepEqual(rows.copies, [[{text: 'host → device', title: 'htod'}, '4', '4.0 MiB', '4 µs']]);
  assert.deepEqual(rows.syncs, [[{text: 'cudaDeviceSynchronize', title: 'device'}, '6', '9.0 ms']]);
  assert.deepEqual(rows.ranges, [[{text: 'step', title: 'step'}, '3', '27.0 ms']]);
  assert.equal(captureRows({windows: 0}).empty, true);
  assert.equal(captureRows({...summary, truncated: true, dropped_records: 5}).headline,
    '63 kernels, 150.0 ms of GPU time, from 2 processes on 2 hosts (3 windows, the oldest only); 5 records dropped by CUPTI');
});

test('capture formats: durations from nanoseconds, byte sizes, kernel names', () => {
  assert.equal(nanos(850e3), '850 µs');
  assert.equal(nanos(3.2e9), '3.2 s');
  assert.equal(nanos(3725e9), '1 h 2 min');
  assert.equal(nanos(undefined), '—');
  assert.equal(bytes(512), '512 B');
  assert.equal(bytes(1536), '1.5 KiB');
  assert.equal(shortKernel('x'.repeat(80)).length, 58);
});

test('segment rows: where and when each window was, why, its size and its download link', () => {
  const start = Date.UTC(2026, 11, 4, 6, 0, 0);
  const rows = segmentRows({segments: [
    {sha256: 'a'.repeat(64), host: 'w1', pid: 101, window_start_ms: start, window_end_ms: start + 10000,
      trigger_reason: 'gpu_idle', bytes: 3 * 1048576, events: 1234,
      download: '/api/v1/computes/c/jobs/77/segments/' + 'a'.repeat(64),
      file_name: `seg-77-w1-101-${start}.json`},
    {sha256: 'b'.repeat(64), host: 'w2', pid: 7, window_start_ms: start, window_end_ms: start + 90000,
      trigger_reason: 'unknown', bytes: 512, events: 3, download: '/x'}]});
  assert.equal(rows.length, 2);
  assert.equal(rows[0].host, 'w1');
  assert.equal(rows[0].pid, '101');
  assert.match(rows[0].window, /, 10 s$/);
  assert.equal(rows[0].reason, 'a GPU went idle');
  assert.equal(rows[0].size, '3.0 MiB');
  assert.equal(rows[0].events, '1234');
  assert.equal(rows[0].href, '/api/v1/computes/c/jobs/77/segments/' + 'a'.repeat(64));
  assert.equal(rows[0].filename, `seg-77-w1-101-${start}.json`, 'the server\'s name for it');
  assert.equal(rows[1].filename, `seg-w2-7-${start}.json`, 'from an older server without one');
  assert.match(rows[1].window, /, 1 min 30 s$/);
  assert.equal(rows[1].reason, 'unknown');
  assert.deepEqual(segmentRows({segments: []}), []);
  assert.deepEqual(segmentRows(null), []);
  assert.equal(rows[0].stalls, null, 'a segment without PC sampling says nothing of it');
});

test('a segment\'s PC sampling reads as the shares of its main stall reasons', () => {
  assert.equal(stallName('smsp__pcsamp_warps_issue_stalled_long_scoreboard'), 'long scoreboard');
  assert.equal(stallName('smsp__pcsamp_sample_count'), 'sample count');
  const cell = pcSamplingCell({state: 'sampled', total_samples: 1000, dropped_samples: 0,
    stall_reasons: [['smsp__pcsamp_warps_issue_stalled_long_scoreboard', 700],
      ['smsp__pcsamp_warps_issue_stalled_selected', 200], ['smsp__pcsamp_warps_issue_stalled_barrier', 100]],
    functions: [{name: '_Z9sgemm_128PfS_', samples: 800, stall: 'smsp__pcsamp_warps_issue_stalled_long_scoreboard'}]});
  assert.equal(cell.text, 'long scoreboard 70 %, selected 20 %, barrier 10 %; busiest _Z9sgemm_128PfS_');
  assert.match(cell.title, /busiest: _Z9sgemm_128PfS_ \(800 samples, mostly smsp__pcsamp_warps_issue_stalled_long_scoreboard\)/);
  assert.equal(cell.muted, false);
  const restricted = pcSamplingCell({state: 'restricted', reason: 'RmProfilingAdminOnly=1'});
  assert.deepEqual(restricted, {text: 'not allowed on this node', title: 'RmProfilingAdminOnly=1', muted: true});
  assert.equal(pcSamplingCell({state: 'unavailable', reason: 'x'}).text, 'unavailable');
  assert.equal(pcSamplingCell({state: 'sampled', stall_reasons: [], functions: []}).text, 'no samples');
  assert.equal(pcSamplingCell(undefined), null);
  const [row] = segmentRows({segments: [{host: 'w', pid: 1, window_start_ms: 1, window_end_ms: 2,
    trigger_reason: 'gpu_idle', bytes: 1, events: 1, download: '/d',
    pc_sampling: {state: 'restricted', reason: 'r'}}]});
  assert.equal(row.stalls.text, 'not allowed on this node');
});

test('a job without stacks says whether retention deleted them', () => {
  const day = 86400000;
  const now = 100 * day;
  const kept = {retained_from_ms: now - 30 * day, stack_retention_ms: 30 * day};
  assert.equal(noStacksText(kept, {end_ms: now - 31 * day}),
    'The server keeps Python stacks 30 d 0 h after they were sampled; any of this job\'s have been deleted.');
  assert.match(noStacksText({retained_from_ms: now - 6 * 3600000, stack_retention_ms: 6 * 3600000},
    {end_ms: now - day}), /keeps Python stacks 6 h 0 min after/);
  assert.equal(noStacksText(kept, {end_ms: now - 29 * day}), 'No Python stacks were collected for this job.');
  assert.equal(noStacksText(kept, {end_ms: 0}), 'No Python stacks were collected for this job.');
  assert.equal(noStacksText({retained_from_ms: 0, stack_retention_ms: 0}, {end_ms: 1}),
    'No Python stacks were collected for this job.');
});

// A stand-in for the browser's fetch: answers in turn from `replies` ({status, code, retryAfter}
// or {status: 200, body}), counting the calls.
function fakeFetch(replies) {
  const calls = [];
  globalThis.fetch = async (path, init) => {
    calls.push({path, method: init.method});
    const r = replies[Math.min(calls.length - 1, replies.length - 1)];
    const body = r.status === 200 ? r.body : {error: {code: r.code, message: 'busy'}};
    return new Response(JSON.stringify(body), {
      status: r.status, headers: r.retryAfter ? {'Retry-After': r.retryAfter} : {}});
  };
  return calls;
}

test('a read refused as queries_busy is asked again after Retry-After, a few times at most', async () => {
  const busy = {status: 503, code: 'queries_busy', retryAfter: '0.01'};
  let calls = fakeFetch([busy, busy, {status: 200, body: {jobs: []}}]);
  assert.deepEqual(await api.get('/api/v1/orgs/acme/jobs'), {jobs: []});
  assert.equal(calls.length, 3);

  calls = fakeFetch([busy]);
  await assert.rejects(api.get('/api/v1/orgs/acme/jobs'), (e) => e instanceof ApiError && e.code === 'queries_busy');
  assert.equal(calls.length, 6);  // the first and five more

  // Other refusals, and writes, are not repeated.
  calls = fakeFetch([{status: 503, code: 'unavailable', retryAfter: '0.01'}]);
  await assert.rejects(api.get('/api/v1/orgs/acme/jobs'), (e) => e.code === 'unavailable');
  assert.equal(calls.length, 1);
  globalThis.sessionStorage = {getItem: () => 'csrf'};
  calls = fakeFetch([busy]);
  await assert.rejects(api.post('/api/v1/orgs/acme/tokens', {}), (e) => e.code === 'queries_busy');
  assert.equal(calls.length, 1);
});
