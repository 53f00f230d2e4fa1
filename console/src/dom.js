// Small DOM helpers. Text always goes in through textContent, never as HTML, so nothing the
// server or a job name holds can become markup.

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
      el.setAttribute(key, String(value));
    }
  }
  append(el, children);
  return el;
}

function append(el, children) {
  for (const child of children) {
    if (child === undefined || child === null || child === false) continue;
    if (Array.isArray(child)) append(el, child);
    else el.append(child instanceof Node ? child : document.createTextNode(String(child)));
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
  document.title = `${title} · Expanse`;
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
