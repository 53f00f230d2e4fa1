// Small DOM helpers. Text always goes in through textContent, never as HTML, so nothing the
// server or a job name holds can become markup.

// Bidirectional controls (U+202E and kin) shown as visible marks: in a name a job's user chose,
// they would reverse the text after them, trusted words included.
const BIDI_CONTROLS = /[\u061C\u200E\u200F\u202A-\u202E\u2066-\u2069]/g;
export function visibleText(text) {
  return String(text).replace(BIDI_CONTROLS,
    (c) => `<U+${c.codePointAt(0).toString(16).toUpperCase().padStart(4, '0')}>`);
}

export function h(tag, attrs = {}, ...children) {
  const el = document.createElement(tag);
  for (const [key, value] of Object.entries(attrs || {})) {
    if (value === undefined || value === null || value === false) continue;
    if (key.startsWith('on') && typeof value === 'function') {
      el.addEventListener(key.slice(2), value);
    } else if (key === 'class') {
      el.className = value;
    } else if (value === true) {
      el.setAttribute(key, '');
    } else {
      el.setAttribute(key, key === 'title' || key.startsWith('aria-') ? visibleText(value) : String(value));
    }
  }
  append(el, children);
  return el;
}

function append(el, children) {
  for (const child of children) {
    if (child === undefined || child === null || child === false) continue;
    if (Array.isArray(child)) append(el, child);
    else el.append(child instanceof Node ? child : document.createTextNode(visibleText(child)));
  }
}

export function clear(el) {
  while (el.firstChild) el.removeChild(el.firstChild);
  return el;
}

// A page's root: replaces the main element's content and gives the page a heading and title.
export function page(title, ...children) {
  const main = document.getElementById('main');
  clear(main);
  document.title = visibleText(`${title} · Expanse`);
  main.append(h('h1', {}, title), ...children.flat().filter(Boolean));
  return main;
}

export function errorBox(err) {
  const box = h('div', {class: 'error', role: 'alert'});
  box.append(h('strong', {}, err.code ? `${err.code}: ` : 'Error: '), err.message || String(err));
  return box;
}

export function definitionList(rows) {
  const dl = h('dl', {class: 'facts'});
  for (const [term, value] of rows) {
    if (value === undefined) continue;
    dl.append(h('dt', {}, term), h('dd', {}, value === null || value === '' ? '—' : value));
  }
  return dl;
}
