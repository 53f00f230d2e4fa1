// The console's pure logic under node's own test runner (no browser): waste rules, flame graph
// folding, timeline columns, formats. Run by ctest as console.unit.
import assert from 'node:assert/strict';
import {test} from 'node:test';

import {refusedRecordsProblem, runsProblem} from '../src/daemon_health.js';
import {buildTree, shortFrame} from '../src/flame.js';
import {duration, mib, percent, ratioPercent} from '../src/format.js';
import {METRICS, toColumns} from '../src/timeline.js';
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
