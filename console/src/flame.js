// A flame graph (icicle, root at the top) of folded Python stacks: "frame;frame;leaf" with
// sample counts. Each frame's width is its share of the samples; hovering shows the counts.
// Built from plain elements, so it needs no canvas and every frame is reachable by keyboard.
import {h} from './dom.js';
import {duration} from './format.js';

// Frames deeper than this are folded into one node: each frame is three nested elements, and a
// stack of ~1,700 frames (a recursion, or a hostile sample: the server takes 16 KiB) crashed
// the browser's renderer.
export const MAX_DEPTH = 256;
export const DEEPER = '… deeper frames';

export function buildTree(stacks) {
  const root = {name: 'all', count: 0, children: new Map()};
  for (const s of stacks) {
    root.count += s.count;
    let node = root;
    const frames = s.folded.split(';');
    if (frames.length > MAX_DEPTH) frames.splice(MAX_DEPTH, frames.length - MAX_DEPTH, DEEPER);
    for (const frame of frames) {
      if (!node.children.has(frame)) node.children.set(frame, {name: frame, count: 0, children: new Map()});
      node = node.children.get(frame);
      node.count += s.count;
    }
  }
  return root;
}

// "/long/path/train.py:load_batch:4" -> "train.py:load_batch:4": frames carry the file's full
// path, which is shown on hover instead.
export function shortFrame(frame) {
  const colon = frame.indexOf(':');
  const file = colon < 0 ? frame : frame.slice(0, colon);
  const slash = file.lastIndexOf('/');
  return slash < 0 ? frame : frame.slice(slash + 1);
}

const MIN_SHARE = 0.005;  // frames under half a percent are merged away to keep the DOM small

function hue(name) {
  let x = 0;
  for (let i = 0; i < name.length; i++) x = (x * 31 + name.charCodeAt(i)) >>> 0;
  return 20 + (x % 40);  // warm colours, stable per frame name
}

// `parentCount`: the width is relative to the parent element, which is the parent frame's box.
function renderNode(node, parentCount, total) {
  const share = node.count / total;
  const el = h('div', {class: 'flame-node'});
  el.style.width = `${((node.count / parentCount) * 100).toFixed(3)}%`;
  const label = h('div', {class: 'flame-frame', tabindex: 0,
    title: `${node.name}\n${node.count} samples (${(share * 100).toFixed(1)} %)`}, shortFrame(node.name));
  label.style.background = `hsl(${hue(node.name)}, 85%, 70%)`;
  el.append(label);
  const row = h('div', {class: 'flame-children'});
  for (const child of [...node.children.values()].sort((a, b) => b.count - a.count)) {
    if (child.count / total >= MIN_SHARE) row.append(renderNode(child, node.count, total));
  }
  el.append(row);
  return el;
}

export function flameGraph(stacks) {
  const root = buildTree(stacks);
  if (root.count === 0) return null;
  return h('div', {class: 'flame', role: 'img', 'aria-label': `Flame graph of ${root.count} stack samples`},
    renderNode(root, root.count, root.count));
}

// Why a job's stacks answer is empty: none were sampled, or the server's retention deleted any
// there were (`retained_from_ms`, the stacks API's cut, and `stack_retention_ms`; 0 when stacks
// are kept for ever). `job` is the job's record.
export function noStacksText(stacks, job) {
  const ended = job.end_ms || 0;
  if (stacks.retained_from_ms && stacks.stack_retention_ms && ended && ended < stacks.retained_from_ms) {
    return `The server keeps Python stacks ${duration(stacks.stack_retention_ms)} after they were sampled; ` +
      'any of this job\'s have been deleted.';
  }
  return 'No Python stacks were collected for this job.';
}
