// Process pictures (/pictures): the list, the viewer and the editor.
//
// A picture is a sanitised SVG drawing plus bindings from its elements
// (by id) to tags (docs/pictures.md). The viewer parses the SVG as XML
// (an XML parse: nothing in it runs, and the page's policy forbids inline
// script anyway), applies each binding on every value from the live
// stream, touching the DOM only when what it shows changes, and opens a
// faceplate on a click: value, trend, alarms and, for people whose role
// may control and bindings that offer it, a write through
// POST /api/v1/control (the server checks the person's tag patterns).
import { getJSON, send, stream, data, tags } from './api.js';
import { session, can } from './session.js';
import { el, fmtValue, fmtTime } from './util.js';
import { symbols, symbolNames } from './symbols.js';

const svgNS = 'http://www.w3.org/2000/svg';
const root = document.getElementById('board');
const q = new URLSearchParams(location.search);

// parseSVG turns sanitised SVG text (from the server, or the symbol
// library) into an element of this document. It is the page's only parse
// of markup, and an XML one.
function parseSVG(text) {
  const doc = new DOMParser().parseFromString(text, 'image/svg+xml');
  const svg = doc.documentElement;
  if (svg.nodeName !== 'svg' || doc.getElementsByTagName('parsererror').length) throw new Error('the drawing does not parse');
  return document.importNode(svg, true);
}

function fmt(b, v) {
  if (v == null) return '—';
  const s = typeof v === 'number' && b.decimals != null ? v.toFixed(b.decimals) : fmtValue(v);
  return b.unit ? s + ' ' + b.unit : s;
}

function stateOf(b, v) {
  let c = null;
  for (const s of b.states || []) if (v >= s.from) c = s;
  return c;
}

// binder returns the function applying values to one binding's element.
function binder(b, node) {
  let last;
  const shapes = node.localName === 'g' ? [...node.querySelectorAll('path,rect,circle,ellipse,polygon,polyline')] : [node];
  const frac = v => Math.min(1, Math.max(0, (v - b.min) / (b.max - b.min)));
  let geom = null;
  const base = node.getAttribute('transform') || '';
  return (v, qual) => {
    const bad = qual === 'bad' || v == null;
    const key = v + '|' + bad;
    if (key === last) return;
    last = key;
    node.classList.toggle('pic-bad', bad);
    if (v == null || typeof v !== 'number') { if (b.kind === 'text') node.textContent = fmt(b, v); return; }
    switch (b.kind) {
      case 'text': node.textContent = fmt(b, v); break;
      case 'fill': case 'stroke': {
        const s = stateOf(b, v);
        for (const sh of shapes) sh.style[b.kind] = s ? s.color : '';
        break;
      }
      case 'visible': {
        const shown = (b.min == null || v >= b.min) && (b.max == null || v <= b.max);
        node.style.visibility = shown ? '' : 'hidden';
        break;
      }
      case 'rotate': {
        if (!geom) { const bb = node.getBBox(); geom = { cx: bb.x + bb.width / 2, cy: bb.y + bb.height / 2 }; }
        const a = frac(v) * (b.degrees == null ? 360 : b.degrees);
        node.setAttribute('transform', `${base} rotate(${a.toFixed(2)} ${geom.cx} ${geom.cy})`);
        break;
      }
      case 'level': {
        const f = frac(v);
        if (node.localName === 'rect') {
          if (!geom) geom = { y: +node.getAttribute('y') || 0, h: +node.getAttribute('height') || 0 };
          node.setAttribute('y', (geom.y + geom.h * (1 - f)).toFixed(2));
          node.setAttribute('height', (geom.h * f).toFixed(2));
        } else {
          if (!geom) { const bb = node.getBBox(); geom = { bottom: bb.y + bb.height }; }
          node.setAttribute('transform', `${base} translate(0 ${geom.bottom}) scale(1 ${f.toFixed(4)}) translate(0 ${-geom.bottom})`);
        }
        break;
      }
    }
  };
}

function header(title, ...tools) {
  return el('div', { className: 'toolbar' }, el('h1', null, title), ...tools,
    el('a', { href: '/pictures' }, 'Pictures'), el('a', { href: '/' }, 'Pith'));
}

async function list() {
  const s = await session();
  const r = await getJSON('/api/v1/pictures');
  root.replaceChildren(header('Process pictures', can(s, 'edit') ? el('a', { href: '/pictures?new=1' }, 'New picture') : null),
    r.pictures.length ? el('ul', null, ...r.pictures.map(p => el('li', null,
      el('a', { href: '/pictures?id=' + encodeURIComponent(p.id) }, p.title || p.id), ' ',
      el('span', { className: 'muted' }, p.bindings + ' bindings, saved ' + fmtTime(p.updated)))))
      : el('p', { className: 'muted' }, 'No pictures yet.'));
}

async function view(id) {
  const [s, p] = await Promise.all([session(), getJSON('/api/v1/pictures/' + encodeURIComponent(id))]);
  document.title = p.title + ' – Pith';
  const svg = parseSVG(p.svg);
  const wrap = el('div', { className: 'pic-wrap' }, svg);
  const status = el('span', { className: 'muted', role: 'status' });
  root.replaceChildren(header(p.title, can(s, 'edit') ? el('a', { href: '/pictures?edit=1&id=' + encodeURIComponent(id) }, 'Edit') : null, status), wrap);
  const byTag = new Map();   // tag -> [apply]
  const byNode = new Map();  // element -> binding offering the faceplate
  for (const b of p.bindings) {
    const node = svg.querySelector('#' + CSS.escape(b.element));
    if (!node) continue;
    if (!byTag.has(b.tag)) byTag.set(b.tag, []);
    byTag.get(b.tag).push(binder(b, node));
    if (!byNode.has(node) || b.control) byNode.set(node, b);
    node.classList.add('pic-bound');
  }
  const current = new Map(); // tag -> [t, v, q]
  svg.addEventListener('click', e => {
    for (let n = e.target; n && n !== svg; n = n.parentNode) {
      const b = byNode.get(n);
      if (b) { faceplate(s, b, p.bindings.filter(x => x.tag === b.tag), current); return; }
    }
  });
  // Counters for tests and measurements.
  window.pithPicture = { bound: byNode.size, tags: byTag.size, updates: 0, values: 0 };
  const onEvent = (name, text) => {
    if (name !== 'snapshot' && name !== 'update') return;
    const msg = JSON.parse(text);
    for (const [tag, t, v, qual] of msg.values) {
      current.set(tag, [t, v, qual]);
      const fns = byTag.get(tag);
      if (fns) for (const f of fns) f(v, qual);
    }
    window.pithPicture.updates++;
    window.pithPicture.values += msg.values.length;
    status.textContent = 'live';
  };
  const params = new URLSearchParams();
  for (const t of byTag.keys()) params.append('tag', t);
  if (!byTag.size) return;
  for (let backoff = 1000; ;) {
    try {
      await stream('/api/v1/live', params, onEvent);
      backoff = 1000;
    } catch (e) {
      status.textContent = 'live stream: ' + e.message;
      if (e.status === 401 || e.status === 403) return;
    }
    await new Promise(r => setTimeout(r, backoff));
    backoff = Math.min(backoff * 2, 30000);
  }
}

// faceplate opens the dialog of one tag.
async function faceplate(s, b, all, current) {
  const dlg = el('dialog', { className: 'faceplate', ariaLabel: 'Faceplate ' + b.tag });
  const unit = all.find(x => x.unit)?.unit || '';
  const val = el('div', { className: 'fp-value' });
  const meta = el('div', { className: 'muted' });
  const show = () => {
    const c = current.get(b.tag);
    val.textContent = fmt({ unit, decimals: b.decimals }, c ? c[1] : null);
    meta.textContent = c ? c[2] + ', ' + fmtTime(c[0]) : 'no value yet';
  };
  show();
  const timer = setInterval(show, 500);
  const chart = el('div', { className: 'fp-chart' });
  const alarms = el('ul', { className: 'fp-alarms' });
  const close = el('button', { type: 'button', onclick: () => dlg.close() }, 'Close');
  dlg.append(el('h2', null, b.tag), val, meta, el('h3', null, 'Last hour'), chart, el('h3', null, 'Alarms'), alarms);
  if (all.some(x => x.control) && can(s, 'control')) {
    const input = el('input', { type: 'number', step: 'any', name: 'value', ariaLabel: 'New value of ' + b.tag, className: 'num' });
    const msg = el('p', { className: 'msg', role: 'status' });
    dlg.append(el('form', { className: 'fp-control', onsubmit: async e => {
      e.preventDefault();
      msg.textContent = '';
      msg.classList.remove('bad');
      try {
        const r = await send('POST', '/api/v1/control', { tag: b.tag, value: Number(input.value) });
        msg.textContent = 'Written: ' + r.tag + ' = ' + r.value + ' (the device acknowledged).';
      } catch (err) {
        msg.classList.add('bad');
        msg.textContent = (err.status === 403 ? 'Refused: ' : 'Failed: ') + err.message;
      }
    } }, el('label', null, 'Set ', input, unit ? ' ' + unit : ''), el('button', { type: 'submit' }, 'Write')), msg);
  }
  dlg.append(el('p', null, close));
  dlg.addEventListener('close', () => { clearInterval(timer); dlg.remove(); });
  document.body.append(dlg);
  dlg.showModal();
  const now = Date.now();
  data(b.tag, now - 3600_000, now, 300, 'mean').then(r => {
    const xs = [], ys = [];
    for (const [t, v] of r.points) { xs.push(t / 1000); ys.push(v); }
    if (!globalThis.uPlot) return;
    new globalThis.uPlot({ width: Math.min(600, innerWidth - 60), height: 200, series: [{}, { label: b.tag, stroke: '#1f77b4', spanGaps: false }] }, [xs, ys], chart);
  }).catch(e => chart.append(el('p', { className: 'muted' }, 'trend: ' + e.message)));
  getJSON('/api/v1/alarms').then(r => {
    const mine = (r.alarms || []).filter(a => a.tag === b.tag);
    alarms.replaceChildren(...(mine.length ? mine.map(a => el('li', null, a.state + ': ' + a.id + ' ' + (a.message || ''))) : [el('li', { className: 'muted' }, 'none')]));
  }).catch(() => alarms.replaceChildren(el('li', { className: 'muted' }, 'alarms are not enabled')));
}

// editor composes a picture from the symbol library or an uploaded SVG and
// binds its elements to tags.
async function editor(id) {
  let p = id ? await getJSON('/api/v1/pictures/' + encodeURIComponent(id))
    : { title: 'New picture', svg: `<svg xmlns="${svgNS}" viewBox="0 0 1000 600"><rect width="1000" height="600" fill="#f4f4f4"/></svg>`, bindings: [] };
  let svg = parseSVG(p.svg);
  let sel = null, n = 0, drag = null;
  const title = el('input', { type: 'text', value: p.title, ariaLabel: 'Title', name: 'title' });
  const msg = el('p', { className: 'msg', role: 'status' });
  const wrap = el('div', { className: 'pic-wrap' });
  const side = el('div', { className: 'pic-panel' });
  const tagList = el('datalist', { id: 'pic-tags' });
  tags().then(t => tagList.replaceChildren(...t.list.map(x => el('option', { value: x.name })))).catch(() => {});
  const upload = el('input', { type: 'file', accept: '.svg,image/svg+xml', ariaLabel: 'Upload an SVG drawing', onchange: async () => {
    const f = upload.files[0];
    if (!f) return;
    // The server sanitises the file before the editor shows it.
    try { svg = parseSVG((await send('POST', '/api/v1/pictures/sanitize', { svg: await f.text() })).svg); p.bindings = p.bindings.filter(b => svg.querySelector('#' + CSS.escape(b.element))); mount(); } catch (e) { msg.textContent = e.message; }
  } });
  const palette = el('span', { className: 'palette' }, ...symbolNames.map(name => el('button', { type: 'button', onclick: () => {
    let k = 1;
    while (svg.querySelector('#' + name + k)) k++;
    const g = symbols[name](name + k, 40 + (n % 8) * 110, 40 + Math.floor(n / 8 % 4) * 140);
    svg.append(parseSVG(`<svg xmlns="${svgNS}">${g}</svg>`).firstElementChild);
    n++; // the next symbol goes to the next free place
    mount();
  } }, name)));
  const save = el('button', { type: 'button', onclick: async () => {
    for (const x of svg.querySelectorAll('.pic-sel')) { x.classList.remove('pic-sel'); if (!x.classList.length) x.removeAttribute('class'); }
    const body = { ...p, title: title.value, svg: new XMLSerializer().serializeToString(svg) };
    try {
      p = id ? await send('PUT', '/api/v1/pictures/' + encodeURIComponent(id), body) : await send('POST', '/api/v1/pictures', body);
      location.href = '/pictures?id=' + encodeURIComponent(p.id);
    } catch (e) { msg.classList.add('bad'); msg.textContent = 'Not saved: ' + e.message; }
  } }, 'Save');
  root.replaceChildren(header('Edit picture', title, save), el('div', { className: 'toolbar' }, 'Add: ', palette, ' or upload: ', upload), msg,
    el('div', { className: 'pic-side pic-edit' }, wrap, side), tagList);
  root.classList.add('pic-edit');

  function mount() {
    wrap.replaceChildren(svg);
    svg.addEventListener('pointerdown', e => {
      const t = e.target.closest('[id]');
      if (!t || t === svg) return;
      sel = t;
      // Dragging moves the symbol: the outermost group under the root.
      let top = t;
      while (top.parentNode && top.parentNode !== svg) top = top.parentNode;
      if (top.localName === 'g') {
        const m = /translate\(([-\d.]+)[ ,]+([-\d.]+)\)/.exec(top.getAttribute('transform') || '') || [0, 0, 0];
        const pt = svg.createSVGPoint(); pt.x = e.clientX; pt.y = e.clientY;
        const s = pt.matrixTransform(svg.getScreenCTM().inverse());
        drag = { top, x0: +m[1] - s.x, y0: +m[2] - s.y };
      }
      panel();
    });
    svg.addEventListener('pointermove', e => {
      if (!drag || !e.buttons) { drag = null; return; }
      const pt = svg.createSVGPoint(); pt.x = e.clientX; pt.y = e.clientY;
      const s = pt.matrixTransform(svg.getScreenCTM().inverse());
      drag.top.setAttribute('transform', `translate(${Math.round(drag.x0 + s.x)},${Math.round(drag.y0 + s.y)})`);
    });
    svg.addEventListener('pointerup', () => { drag = null; });
    panel();
  }

  function panel() {
    for (const x of svg.querySelectorAll('.pic-sel')) x.classList.remove('pic-sel');
    if (!sel) { side.replaceChildren(el('p', { className: 'muted' }, 'Click an element of the drawing to bind it to a tag.'), bindingList()); return; }
    sel.classList.add('pic-sel');
    const f = {
      tag: el('input', { type: 'text', name: 'tag' }), kind: el('select', { name: 'kind' }, ...['text', 'fill', 'stroke', 'visible', 'rotate', 'level'].map(k => el('option', { value: k }, k))),
      unit: el('input', { type: 'text', name: 'unit' }), min: el('input', { type: 'number', step: 'any', name: 'min' }), max: el('input', { type: 'number', step: 'any', name: 'max' }),
      states: el('input', { type: 'text', name: 'states', placeholder: '0:#888, 1:#2a2' }), control: el('input', { type: 'checkbox', name: 'control' }),
    };
    f.tag.setAttribute('list', 'pic-tags');
    const remove = el('button', { type: 'button', onclick: () => { sel.remove(); p.bindings = p.bindings.filter(b => svg.querySelector('#' + CSS.escape(b.element))); sel = null; panel(); } }, 'Delete element');
    side.replaceChildren(el('h3', null, sel.localName + ' #' + sel.id),
      el('form', { onsubmit: e => {
        e.preventDefault();
        const b = { element: sel.id, tag: f.tag.value.trim(), kind: f.kind.value };
        if (f.unit.value) b.unit = f.unit.value;
        if (f.min.value !== '') b.min = Number(f.min.value);
        if (f.max.value !== '') b.max = Number(f.max.value);
        if (f.states.value.trim()) b.states = f.states.value.split(',').map(x => { const [from, color] = x.split(':'); return { from: Number(from), color: (color || '').trim() }; });
        if (f.control.checked) b.control = true;
        p.bindings.push(b);
        panel();
      } }, el('label', null, 'Tag ', f.tag), el('label', null, 'Kind ', f.kind), el('label', null, 'Unit ', f.unit),
      el('label', null, 'Min ', f.min), el('label', null, 'Max ', f.max), el('label', null, 'States (value:colour, …) ', f.states),
      el('label', null, f.control, ' offer a write on the faceplate'), el('button', { type: 'submit' }, 'Bind')), remove, bindingList());
  }

  function bindingList() {
    return el('ul', null, ...p.bindings.map((b, i) => el('li', null, `#${b.element} ${b.kind} ← ${b.tag}${b.control ? ' (control)' : ''} `,
      el('button', { type: 'button', ariaLabel: 'Remove binding', onclick: () => { p.bindings.splice(i, 1); panel(); } }, '×'))));
  }
  mount();
}

(async () => {
  try {
    const s = await session();
    if (s.accounts && !s.signed_in && !s.user) { location.href = '/#/signin'; return; }
    if (q.has('new') || q.has('edit')) await editor(q.get('id'));
    else if (q.has('id')) await view(q.get('id'));
    else await list();
  } catch (e) {
    root.replaceChildren(header('Process pictures'), el('p', { className: 'bad' }, e.message));
  }
})();
