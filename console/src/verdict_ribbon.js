// The verdict ribbon over the job's timeline: one coloured band per verdict interval on the
// timeline's own x axis (the job's time range), a legend of the codes shown, and a click on a
// band opens that verdict's evidence in the verdicts table. The geometry is a pure function,
// unit-tested in node (console/tests/unit.test.mjs); drawRibbon only turns it into elements.
import {h} from './dom.js';
import {verdictLabel, verdictWhen} from './verdicts.js';

// Codes that judge the whole job: their band spans the ribbon whatever their bounds say.
export const WHOLE_JOB_CODES = new Set(['over_allocated', 'memory_oversized', 'cpu_only']);

// A band narrower than this is widened so that a short interval on a long job stays visible
// and clickable.
export const MIN_BAND_PX = 2;

// One colour per code; similar causes get neighbouring hues, "nothing ran" is grey.
const COLORS = {
  no_process: '#6e7781',
  cpu_only: '#424a53',
  over_allocated: '#d4a72c',
  memory_oversized: '#8250df',
  stuck: '#cf222e',
  communication_wait: '#e16f24',
  input_bound: '#1f6feb',
  sync_bound: '#0a7b83',
  host_bound: '#1a7f37',
  io_wait: '#bf3989',
};
const OTHER_COLOR = '#57606a';

export function verdictColor(code) {
  return COLORS[code] || OTHER_COLOR;
}

// Bands for the verdicts of `answer` (GET …/verdicts) on a ribbon `width` pixels wide showing
// `range` ({from_ms, to_ms}). Each band keeps its verdict's index in the answer (the row of the
// verdicts table it opens). Intervals are clipped to the range; one wholly outside it is left
// out. Overlapping bands go to separate lanes: the whole-job ones first, one lane each, then
// the intervals, each in the first lane where it does not overlap a band already there (in
// pixels, after widening, so that no band hides another).
export function ribbonBands(answer, range, width) {
  const verdicts = (answer && answer.verdicts) || [];
  const from = range.from_ms;
  const span = range.to_ms - range.from_ms;
  const usable = Number.isFinite(span) && span > 0 && width > 0;
  const bands = [];
  verdicts.forEach((v, index) => {
    const whole = WHOLE_JOB_CODES.has(v.code) || !usable;
    if (whole) {
      bands.push({index, code: v.code, whole: true, x: 0, width: Math.max(0, width)});
      return;
    }
    if (!Number.isFinite(v.from_ms) || !Number.isFinite(v.to_ms)) return;
    const start = Math.max(v.from_ms, from);
    const end = Math.min(v.to_ms, range.to_ms);
    if (end < start) return;  // outside the range (or a reversed interval)
    let x = ((start - from) / span) * width;
    let w = ((end - start) / span) * width;
    if (w < MIN_BAND_PX) {
      w = Math.min(MIN_BAND_PX, width);
      x = Math.min(x, width - w);
    }
    bands.push({index, code: v.code, whole: false, x, width: w});
  });

  let lanes = 0;
  for (const b of bands) if (b.whole) b.lane = lanes++;
  const laneEnds = [];  // right edge of the last band in each interval lane
  const intervals = bands.filter((b) => !b.whole).sort((a, b) => a.x - b.x || a.index - b.index);
  for (const b of intervals) {
    let lane = laneEnds.findIndex((end) => end <= b.x);
    if (lane < 0) {
      lane = laneEnds.length;
      laneEnds.push(0);
    }
    laneEnds[lane] = b.x + b.width;
    b.lane = lanes + lane;
  }
  return {bands, lanes: lanes + laneEnds.length};
}

// The codes present, in order of first appearance, for the legend.
export function legendCodes(answer) {
  return [...new Set(((answer && answer.verdicts) || []).map((v) => v.code))];
}

const LANE_PX = 14;
const LANE_GAP_PX = 3;

// Opens the verdict's row in the verdicts table (its evidence disclosure) and brings it into view.
export function showVerdict(index) {
  const row = document.getElementById(`verdict-${index}`);
  if (!row) return;
  for (const other of document.querySelectorAll('#verdict-list tr.highlight')) other.classList.remove('highlight');
  row.classList.add('highlight');
  const details = row.querySelector('details');
  if (details) details.open = true;
  row.scrollIntoView({block: 'center'});
  const summary = row.querySelector('summary');
  if (summary) summary.focus({preventScroll: true});
}

// The ribbon and its legend for the time `range` the chart shows, `left` pixels in (where the
// chart's plot area starts) and `width` wide. Nothing when there are no verdicts.
export function drawRibbon(answer, range, left, width) {
  const verdicts = (answer && answer.verdicts) || [];
  if (!verdicts.length) return null;
  const {bands, lanes} = ribbonBands(answer, range, width);
  const ribbon = h('div', {class: 'ribbon', id: 'verdict-ribbon', role: 'group', 'aria-label': 'Verdicts over the job\'s time'});
  ribbon.style.marginLeft = `${left}px`;
  ribbon.style.width = `${width}px`;
  ribbon.style.height = `${lanes * (LANE_PX + LANE_GAP_PX)}px`;
  for (const b of bands) {
    const v = verdicts[b.index];
    const text = `${verdictLabel(v.code)} (${v.code}), ${verdictWhen(v, answer.from_ms, answer.to_ms)}: show the evidence`;
    const band = h('button', {type: 'button', class: 'band', 'data-code': v.code, 'data-index': b.index,
      'aria-label': text, title: text, onclick: () => showVerdict(b.index)});
    band.style.left = `${b.x}px`;
    band.style.width = `${b.width}px`;
    band.style.top = `${b.lane * (LANE_PX + LANE_GAP_PX)}px`;
    band.style.height = `${LANE_PX}px`;
    band.style.background = verdictColor(v.code);
    ribbon.append(band);
  }
  const legend = h('ul', {class: 'ribbon-legend', id: 'verdict-legend', 'aria-label': 'Verdict colours'},
    legendCodes(answer).map((code) => {
      const swatch = h('span', {class: 'swatch', 'aria-hidden': 'true'});
      swatch.style.background = verdictColor(code);
      return h('li', {}, swatch, verdictLabel(code), ' ', h('code', {}, code));
    }));
  legend.style.marginLeft = `${left}px`;
  ribbon.prepend(h('span', {class: 'ribbon-label', 'aria-hidden': 'true'}, 'Verdicts'));
  return h('div', {class: 'ribbon-box'}, legend, ribbon);
}
