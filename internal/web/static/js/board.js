// The dashboards page: a grid of widgets read from /api/v1/dashboards (the
// editor, at /dashboard, with the browser's API key) or from a public
// page's own read-only API (/d/<token>, no key). Widgets are placed,
// resized and configured by pointer and by keyboard: focus a widget, arrows
// move it, Shift+arrows resize it, Enter edits it, Delete removes it.
// Every data string reaches the page as text (util.el), never as HTML.

import { getJSON, apiKey } from './api.js';
import { csrfToken } from './session.js';
import { el, fmtValue, fmtTime } from './util.js';
import { palette, uPlotLib } from './chart.js';

const COLS = 12, ROW = 70;
const TYPES = ['value', 'gauge', 'lamp', 'trend', 'multigraph', 'bars', 'table', 'text', 'setpoint', 'switch', 'energy', 'histogram'];
const pub = location.pathname.match(/^\/d\/([A-Za-z0-9_-]+)/);
const base = pub ? '/d/' + pub[1] : '';
const root = document.getElementById('board');
let doc = null, editing = false, timers = [], selected = null;

function authHeaders(extra) {
  const h = new Headers(extra || {});
  const k = apiKey();
  if (k && !pub) h.set('Authorization', 'Bearer ' + k);
  const t = csrfToken(); // a signed-in person's writes carry the session's CSRF token
  if (t && !pub) h.set('X-CSRF-Token', t);
  return h;
}

async function send(method, path, body) {
  const r = await fetch(path, { method, headers: authHeaders({ 'Content-Type': 'application/json' }), body: body == null ? undefined : JSON.stringify(body) });
  const t = await r.text();
  let j = null;
  try { j = t ? JSON.parse(t) : null; } catch { /* not JSON */ }
  if (!r.ok) throw new Error((j && j.error) || r.status + ' ' + r.statusText);
  return j;
}

// During a grid's first render (2 s after draw) every widget takes the
// same "now", and identical reads (the same tag over the same range) are
// made once and shared: a dashboard showing one tag in three charts asks
// for it once.
let drawNow = 0, firstRender = null;
const now = () => (firstRender ? drawNow : Date.now());
const api = (path, params) => {
  if (!firstRender) return getJSON(base + path, params);
  const key = path + '?' + new URLSearchParams(params || {});
  let p = firstRender.get(key);
  if (!p) { p = getJSON(base + path, params); firstRender.set(key, p); }
  return p;
};

// TIERS are the rollup cell widths (ms) of the store: a chart's buckets
// are whole cells of the widest tier that fits, on their multiples, so the
// store answers from rollups without reading raw samples at bucket edges.
const TIERS = [864e5, 108e5, 18e5, 3e5, 6e4, 1e4];
export function alignedRange(to, span, points) {
  const raw = Math.max(1000, span / Math.max(1, points));
  const tier = TIERS.find(t => t <= raw) || 1000;
  const step = Math.ceil(raw / tier) * tier;
  const end = Math.ceil(to / step) * step;
  const n = Math.max(1, Math.ceil(span / step));
  return { from: end - n * step, to: end, points: n };
}

// rangeMs turns "24h", "7d", "1y" into milliseconds.
export function rangeMs(s, def) {
  const m = /^(\d+)(mo|m|h|d|w|y)$/.exec(s || '');
  if (!m) return def;
  const n = +m[1];
  return n * { m: 6e4, h: 36e5, d: 864e5, w: 6048e5, mo: 2592e6, y: 31536e6 }[m[2]];
}

// markdown renders a small, safe subset: headings, paragraphs, lists,
// **bold** and *italic*, all as DOM text nodes.
export function markdown(src) {
  const out = el('div', { className: 'md' });
  let list = null;
  for (const line of String(src || '').split('\n')) {
    const h = /^(#{1,3})\s+(.*)$/.exec(line);
    const li = /^[-*]\s+(.*)$/.exec(line);
    if (li) {
      if (!list) { list = el('ul'); out.append(list); }
      list.append(el('li', null, ...inline(li[1])));
      continue;
    }
    list = null;
    if (h) out.append(el('h' + (h[1].length + 2), null, ...inline(h[2])));
    else if (line.trim()) out.append(el('p', null, ...inline(line)));
  }
  return out;
}

function inline(s) {
  const parts = [];
  const re = /\*\*([^*]+)\*\*|\*([^*]+)\*/g;
  let last = 0, m;
  while ((m = re.exec(s))) {
    if (m.index > last) parts.push(s.slice(last, m.index));
    parts.push(m[1] != null ? el('strong', null, m[1]) : el('em', null, m[2]));
    last = re.lastIndex;
  }
  if (last < s.length) parts.push(s.slice(last));
  return parts;
}

function fmt(v, w) {
  if (v == null) return '—';
  return w.decimals != null ? v.toFixed(w.decimals) : fmtValue(v);
}

// shared is one /api/v1/latest read of every tag the widgets show, made
// when the grid is drawn and used by the first render of each widget.
let shared = null;

async function latest(tags) {
  if (shared && tags.every(t => shared.tags.has(t))) {
    const m = await shared.values;
    if (tags.every(t => m.has(t) || shared.tags.has(t))) return m;
  }
  const r = await api('/api/v1/latest', tags.map(t => ['tag', t]));
  const m = new Map();
  for (const v of r.values) m.set(v.tag, v);
  return m;
}

async function latestAll(tags) {
  const r = await api('/api/v1/latest', tags.map(t => ['tag', t]));
  const m = new Map();
  for (const v of r.values) m.set(v.tag, v);
  return m;
}

// ---- widgets -------------------------------------------------------------

const render = {
  async value(w, body) {
    const v = (await latest(w.tags)).get(w.tags[0]);
    body.replaceChildren(el('p', { className: 'big' }, fmt(v && v.value, w), el('span', { className: 'unit' }, ' ' + (w.unit || ''))),
      el('p', { className: 'muted' }, v ? v.quality + ' · ' + fmtTime(v.ts) : 'no value'));
  },
  async gauge(w, body) {
    const v = (await latest(w.tags)).get(w.tags[0]);
    const lo = w.min ?? 0, hi = w.max ?? 100, val = v ? v.value : null;
    const m = el('meter', { min: lo, max: hi, value: val ?? lo, title: w.title || w.tags[0] });
    if (w.high != null) m.high = w.high;
    if (w.low != null) m.low = w.low;
    m.setAttribute('aria-label', (w.title || w.tags[0]) + ': ' + fmt(val, w) + ' ' + (w.unit || ''));
    body.replaceChildren(el('p', { className: 'big' }, fmt(val, w), el('span', { className: 'unit' }, ' ' + (w.unit || ''))), m);
  },
  async lamp(w, body) {
    if (w.color_by === 'alarm') return alarmLamp(w, body);
    const v = (await latest(w.tags)).get(w.tags[0]);
    let state = 'off', label = 'normal';
    if (!v) { state = 'unknown'; label = 'no value'; }
    else if ((w.high != null && v.value >= w.high) || (w.low != null && v.value <= w.low)) { state = 'alarm'; label = 'alarm'; }
    else if (w.high == null && w.low == null && v.value) { state = 'on'; label = 'on'; }
    body.replaceChildren(el('p', { className: 'lamp ' + state, role: 'img', ariaLabel: label }), el('p', null, label + ' (' + fmt(v && v.value, w) + ')'));
  },
  async table(w, body) {
    const m = await latest(w.tags);
    const tb = el('tbody');
    for (const t of w.tags) {
      const v = m.get(t);
      tb.append(el('tr', null, el('th', { scope: 'row' }, t), el('td', null, fmt(v && v.value, w)), el('td', null, v ? v.quality : '—')));
    }
    body.replaceChildren(el('table', null, el('thead', null, el('tr', null, el('th', { scope: 'col' }, 'tag'), el('th', { scope: 'col' }, 'value'), el('th', { scope: 'col' }, 'quality'))), tb));
  },
  async text(w, body) { body.replaceChildren(markdown(w.text)); },
  async trend(w, body, opts) { await plot(w, body, false, true); },
  async multigraph(w, body, opts) { await plot(w, body, w.stacked, false); },
  async bars(w, body) {
    const span = rangeMs(w.range, 7 * 864e5), unit = { hour: 36e5, day: 864e5, week: 6048e5, month: 2592e6, year: 31536e6 }[w.bucket || 'day'];
    const to = Math.ceil(now() / unit) * unit, from = to - span, n = Math.max(1, Math.round(span / unit));
    const r = await api('/api/v1/data', { tag: w.tags[0], from, to, points: n, agg: w.agg || 'sum' });
    body.replaceChildren(barChart(r.points.map(([t, v]) => ({ label: fmtTime(t).slice(0, 16), v })), w.unit));
  },
  async setpoint(w, body) {
    const v = (await latest(w.tags)).get(w.tags[0]);
    const inp = el('input', { type: 'number', step: w.step ?? 'any', value: v ? v.value : '', id: 'sp-' + w.id });
    if (w.min != null) inp.min = w.min;
    if (w.max != null) inp.max = w.max;
    const btn = el('button', { type: 'button', onclick: () => write(w, Number(inp.value), body) }, 'Write');
    body.replaceChildren(el('label', { htmlFor: 'sp-' + w.id }, 'New value of ' + w.tags[0] + (w.unit ? ' (' + w.unit + ')' : '')), inp, btn,
      el('p', { className: 'muted' }, 'now ' + fmt(v && v.value, w)));
  },
  async switch(w, body) {
    const v = (await latest(w.tags)).get(w.tags[0]);
    const on = w.on_value ?? 1, isOn = v && v.value === on;
    body.replaceChildren(el('button', { type: 'button', ariaPressed: String(!!isOn), onclick: () => write(w, isOn ? 0 : on, body) }, isOn ? 'On: switch off' : 'Off: switch on'));
  },
  async energy(w, body, opts) { await energyChart(w, body, opts); },
  async histogram(w, body) {
    const to = now(), from = to - rangeMs(w.range, 864e5);
    const p = { tag: w.tags[0], from, to, bins: w.bins || 10 };
    if (w.min != null && w.max != null) { p.min = w.min; p.max = w.max; }
    const r = await api('/api/v1/histogram', p);
    body.replaceChildren(barChart(r.bins.map(b => ({ label: fmtValue(b.lo) + '–' + fmtValue(b.hi), v: b.ms / 36e5 })), 'h'));
  },
};

// alarmLamp colours a lamp by the alarms watching its tag, the most urgent
// state winning: active and unacknowledged, active and acknowledged,
// returned to normal but unacknowledged, normal.
const alarmStates = [['active', 'alarm-active', 'active, unacknowledged'], ['acknowledged', 'alarm-acked', 'active, acknowledged'],
  ['cleared', 'alarm-returned', 'returned, unacknowledged'], ['normal', 'alarm-normal', 'normal']];
let sharedAlarms = null;
async function alarmLamp(w, body) {
  if (!sharedAlarms) { sharedAlarms = api('/api/v1/alarms', { all: 1 }); setTimeout(() => { sharedAlarms = null; }, 1000); }
  const r = await sharedAlarms;
  const mine = (r.alarms || []).filter(a => a.tag === w.tags[0]);
  const [, cls, label] = mine.length ? alarmStates.find(([st]) => mine.some(a => a.state === st)) || alarmStates[3] : ['', 'unknown', 'no alarm on this tag'];
  const names = mine.filter(a => a.state !== 'normal').map(a => a.id).join(', ');
  body.replaceChildren(el('p', { className: 'lamp ' + cls, role: 'img', ariaLabel: label }), el('p', null, label + (names ? ' (' + names + ')' : '')));
}

async function write(w, value, body) {
  if (pub || !isFinite(value)) return;
  if (w.confirm !== false && !confirm('Write ' + value + ' to ' + w.tags[0] + '?')) return;
  try {
    await send('POST', '/api/v1/control', { tag: w.tags[0], value });
    shared = null; firstRender = null; // read the written value afresh
    status(w.tags[0] + ' = ' + value + ' written');
    refreshWidget(w);
  } catch (e) { status('write failed: ' + e.message, true); }
}

// barChart draws labelled bars as accessible HTML (a list of bars with text).
function barChart(items, unit, onPick) {
  const max = Math.max(1e-9, ...items.map(i => Math.abs(i.v || 0)));
  const ol = el('ol', { className: 'bars' });
  items.forEach((it, i) => {
    const txt = it.label + ': ' + (it.v == null ? 'no data' : fmtValue(+it.v.toFixed(3)) + ' ' + (unit || '')) + (it.extra ? ' · ' + it.extra : '');
    const bar = el(onPick ? 'button' : 'span', { className: 'bar', title: txt, style: `height:${Math.round(100 * Math.abs(it.v || 0) / max)}%` });
    if (onPick) { bar.type = 'button'; bar.setAttribute('aria-label', txt + ' (zoom in)'); bar.addEventListener('click', () => onPick(i)); }
    else { bar.setAttribute('role', 'img'); bar.setAttribute('aria-label', txt); }
    ol.append(el('li', null, bar));
  });
  return ol;
}

// The kWh zoomer: year -> month -> day -> hour bars; click a bar to zoom
// in, the button to zoom out. Cost sits beside energy when a tariff is set.
const finer = { year: 'month', month: 'day', week: 'day', day: 'hour' };
async function energyChart(w, body, opts) {
  const st = w._zoom || (w._zoom = { bucket: w.bucket || 'day', from: null, to: null, stack: [] });
  if (st.from == null) {
    st.to = now();
    st.from = st.to - rangeMs(!st.stack.length && st.bucket === (w.bucket || 'day') ? w.range : '',
      { hour: 864e5, day: 30 * 864e5, week: 182 * 864e5, month: 365 * 864e5, year: 5 * 365 * 864e5 }[st.bucket]);
  }
  if (w.view === 'solar' || w.view === 'heatpump') return solarView(w, body);
  const p = { tag: w.tags[0], from: Math.floor(st.from), to: Math.ceil(st.to), bucket: st.bucket };
  if (w.tariff) p.tariff = w.tariff;
  if (w.kind) p.kind = w.kind;
  const r = await api('/api/v1/energy', p);
  const items = r.buckets.map(b => ({ label: label(b.t, st.bucket), v: b.kwh, extra: b.cost != null ? b.cost.toFixed(2) + ' ' + (r.currency || '') : '' }));
  const pick = finer[st.bucket] ? i => {
    const b = r.buckets[i];
    st.stack.push({ bucket: st.bucket, from: st.from, to: st.to });
    Object.assign(st, { bucket: finer[st.bucket], from: b.t, to: b.end });
    refreshWidget(w);
  } : null;
  const out = el('button', { type: 'button', disabled: !st.stack.length && st.bucket === 'year', onclick: () => {
    const prev = st.stack.pop();
    if (prev) Object.assign(st, prev);
    else Object.assign(st, { bucket: 'year', from: null });
    refreshWidget(w);
  } }, 'Zoom out');
  const tot = r.total;
  body.replaceChildren(el('p', { className: 'muted' }, `${st.bucket} · total ${tot.kwh == null ? '—' : tot.kwh.toFixed(2)} kWh` + (tot.cost != null ? ` · ${tot.cost.toFixed(2)} ${r.currency || ''}` : '')),
    barChart(items, 'kWh', pick), out);
}

function label(t, bucket) {
  const s = fmtTime(t);
  return { hour: s.slice(11, 16), day: s.slice(0, 10), week: s.slice(0, 10), month: s.slice(0, 7), year: s.slice(0, 4) }[bucket];
}

// solarView: generation (first tag) and use (second) over the range, with
// import, export and self-consumption; heatpump: heat (first) over
// electricity (second) gives the COP.
async function solarView(w, body) {
  const to = now(), from = to - rangeMs(w.range, 864e5);
  const [a, b] = await Promise.all(w.tags.slice(0, 2).map(tag => api('/api/v1/energy', { tag, from, to, bucket: 'hour', tariff: 'none' })));
  const sum = r => r.buckets.reduce((s, x) => s + (x.kwh || 0), 0);
  const rows = [];
  if (w.view === 'heatpump') {
    const heat = sum(a), elec = b ? sum(b) : 0;
    rows.push(['heat', heat.toFixed(2) + ' kWh'], ['electricity', elec.toFixed(2) + ' kWh'], ['COP', elec ? (heat / elec).toFixed(2) : '—']);
  } else {
    let gen = 0, use = 0, self = 0;
    a.buckets.forEach((x, i) => {
      const g = x.kwh || 0, u = b ? (b.buckets[i].kwh || 0) : 0;
      gen += g; use += u; self += Math.min(g, u);
    });
    rows.push(['generation', gen.toFixed(2) + ' kWh'], ['use', use.toFixed(2) + ' kWh'], ['import', (use - self).toFixed(2) + ' kWh'],
      ['export', (gen - self).toFixed(2) + ' kWh'], ['self-consumption', gen ? (100 * self / gen).toFixed(0) + ' %' : '—']);
  }
  body.replaceChildren(el('table', null, el('tbody', null, ...rows.map(([k, v]) => el('tr', null, el('th', { scope: 'row' }, k), el('td', null, v))))));
}

// plot draws a uPlot chart; drag across it to zoom, double-click to zoom
// out. A trend gives each tag its own scale (the first two with an axis,
// left and right); a multigraph overlays or stacks them on one.
async function plot(w, body, stacked, ownAxes) {
  const px = Math.max(200, body.clientWidth || 400);
  const { from, to, points } = alignedRange(now(), rangeMs(w.range || (doc && doc.range), 864e5), Math.min(1000, px));
  const rs = await Promise.all(w.tags.map(tag => api('/api/v1/data', { tag, from, to, points, agg: 'mean' })));
  const xs = rs[0].points.map(p => p[0] / 1000);
  let ys = rs.map(r => r.points.map(p => p[1]));
  if (stacked) {
    const acc = xs.map(() => 0);
    ys = ys.map(y => y.map((v, i) => (acc[i] += v || 0)));
  }
  const U = uPlotLib();
  body.replaceChildren();
  const h = Math.max(120, w.h * ROW - 60);
  const own = ownAxes && w.tags.length > 1;
  const axes = [{}];
  if (own) w.tags.slice(0, 2).forEach((t, i) => axes.push({ scale: 's' + i, side: i ? 1 : 3, stroke: palette[i], grid: { show: i === 0 } }));
  new U({ width: px, height: h, axes, series: [{}, ...w.tags.map((t, i) => ({ label: t, scale: own ? 's' + i : 'y', stroke: palette[i % palette.length], fill: stacked ? palette[i % palette.length] + '33' : undefined }))],
    cursor: { drag: { x: true, y: false } }, legend: { show: w.tags.length > 1 } }, [xs, ...ys], body);
  body.setAttribute('aria-label', 'chart of ' + w.tags.join(', '));
}

// ---- grid ----------------------------------------------------------------

function status(msg, bad) {
  const s = document.getElementById('bstatus');
  if (s) { s.textContent = msg; s.classList.toggle('bad', !!bad); }
}

const bodies = new Map();
async function refreshWidget(w) {
  const body = bodies.get(w.id);
  if (!body) return;
  try { await render[w.type](w, body); body.parentElement.classList.remove('failed'); }
  catch (e) { body.replaceChildren(el('p', { className: 'bad' }, e.message)); }
}

function place(sec, w) {
  sec.style.gridColumn = `${w.x + 1} / span ${w.w}`;
  sec.style.gridRow = `${w.y + 1} / span ${w.h}`;
}

function draw() {
  timers.forEach(clearInterval); timers = []; bodies.clear();
  const grid = el('div', { className: 'grid' + (editing ? ' editing' : '') });
  for (const w of doc.widgets) {
    const body = el('div', { className: 'wbody' });
    const sec = el('section', { className: 'widget ' + w.type, dataset: { id: w.id }, tabIndex: editing ? 0 : -1 },
      el('h2', null, w.title || (w.tags || []).join(', ') || w.type), body);
    sec.setAttribute('aria-label', (w.title || w.type) + (editing ? ' (arrows move, Shift+arrows resize, Enter edits, Delete removes)' : ''));
    if (editing) {
      sec.append(el('span', { className: 'resize', ariaHidden: 'true' }));
      sec.addEventListener('keydown', e => keyEdit(e, w, sec));
      sec.addEventListener('pointerdown', e => dragStart(e, w, sec, grid));
      sec.addEventListener('dblclick', () => configure(w));
    }
    place(sec, w);
    grid.append(sec);
    bodies.set(w.id, body);
  }
  const main = [toolbar(), grid];
  root.replaceChildren(...main);
  const lt = new Set(doc.widgets.filter(w => ['value', 'gauge', 'lamp', 'table', 'setpoint', 'switch'].includes(w.type) && w.color_by !== 'alarm').flatMap(w => w.tags || []));
  drawNow = Date.now(); firstRender = new Map();
  shared = lt.size ? { tags: lt, values: latestAll([...lt]) } : null;
  setTimeout(() => { shared = null; firstRender = null; }, 2000);
  for (const w of doc.widgets) {
    refreshWidget(w);
    if (!editing && ['value', 'gauge', 'lamp', 'table', 'setpoint', 'switch'].includes(w.type)) timers.push(setInterval(() => refreshWidget(w), w.color_by === 'alarm' ? 2000 : 5000));
  }
  if (selected) { const s = grid.querySelector(`[data-id="${selected}"]`); if (s) s.focus(); }
}

function keyEdit(e, w, sec) {
  if (e.target !== sec) return;
  const d = { ArrowLeft: [-1, 0], ArrowRight: [1, 0], ArrowUp: [0, -1], ArrowDown: [0, 1] }[e.key];
  if (d) {
    e.preventDefault();
    if (e.shiftKey) { w.w = clamp(w.w + d[0], 1, COLS - w.x); w.h = clamp(w.h + d[1], 1, 24); }
    else { w.x = clamp(w.x + d[0], 0, COLS - w.w); w.y = clamp(w.y + d[1], 0, 999); }
    place(sec, w); dirty(); selected = w.id;
  } else if (e.key === 'Enter') { e.preventDefault(); configure(w); }
  else if (e.key === 'Delete' || e.key === 'Backspace') { e.preventDefault(); removeWidget(w); }
}

const clamp = (v, a, b) => Math.max(a, Math.min(b, v));

function dragStart(e, w, sec, grid) {
  if (e.button !== 0 || e.target.closest('input,button,select,textarea')) return;
  const resize = e.target.classList.contains('resize');
  const r = grid.getBoundingClientRect(), cw = r.width / COLS;
  const x0 = e.clientX, y0 = e.clientY, start = { ...w };
  sec.setPointerCapture(e.pointerId);
  const move = ev => {
    const dx = Math.round((ev.clientX - x0) / cw), dy = Math.round((ev.clientY - y0) / ROW);
    if (resize) { w.w = clamp(start.w + dx, 1, COLS - w.x); w.h = clamp(start.h + dy, 1, 24); }
    else { w.x = clamp(start.x + dx, 0, COLS - w.w); w.y = clamp(start.y + dy, 0, 999); }
    place(sec, w);
  };
  const up = () => {
    sec.removeEventListener('pointermove', move); sec.removeEventListener('pointerup', up);
    if (w.x !== start.x || w.y !== start.y || w.w !== start.w || w.h !== start.h) dirty();
    selected = w.id; sec.focus();
  };
  sec.addEventListener('pointermove', move); sec.addEventListener('pointerup', up);
}

let changed = false;
function dirty() { changed = true; status('unsaved changes'); }

function removeWidget(w) {
  doc.widgets = doc.widgets.filter(x => x !== w); dirty(); selected = null; draw();
}

function nextY() { return doc.widgets.reduce((m, w) => Math.max(m, w.y + w.h), 0); }

function addWidget(type) {
  let n = doc.widgets.length + 1;
  while (doc.widgets.some(w => w.id === 'w' + n)) n++;
  const w = { id: 'w' + n, type, x: 0, y: nextY(), w: ['trend', 'multigraph', 'energy', 'bars'].includes(type) ? 6 : 3, h: ['trend', 'multigraph', 'energy', 'bars', 'histogram', 'table'].includes(type) ? 4 : 2 };
  if (type === 'text') w.text = 'Text';
  doc.widgets.push(w); selected = w.id; dirty();
  configure(w);
}

// configure edits a widget's settings in a dialog form.
function configure(w) {
  const f = (name, label, value, attrs) => {
    const id = 'cfg-' + name;
    return el('p', null, el('label', { htmlFor: id }, label), el(attrs && attrs.multi ? 'textarea' : 'input', { id, name, value: value ?? '', ...(attrs || {}), multi: undefined }));
  };
  const form = el('form', { method: 'dialog', className: 'cfg' },
    el('h2', null, 'Widget ' + w.id + ' (' + w.type + ')'),
    f('title', 'Title', w.title),
    w.type !== 'text' && f('tags', 'Tags (comma separated)', (w.tags || []).join(', '), { required: true }),
    f('unit', 'Unit', w.unit),
    f('range', 'Time range (e.g. 24h, 7d, 1y)', w.range),
    f('bucket', 'Bucket (hour, day, week, month, year)', w.bucket),
    f('min', 'Minimum', w.min, { type: 'number', step: 'any' }),
    f('max', 'Maximum', w.max, { type: 'number', step: 'any' }),
    f('high', 'High limit', w.high, { type: 'number', step: 'any' }),
    w.type === 'lamp' && f('color_by', 'Colour by (limits or alarm)', w.color_by),
    w.type === 'text' && f('text', 'Text (markdown)', w.text, { multi: true }),
    el('p', null, el('button', { value: 'ok' }, 'Apply'), ' ', el('button', { value: 'cancel', formNoValidate: true }, 'Cancel')));
  const dlg = el('dialog', { ariaLabel: 'Configure widget' }, form);
  document.body.append(dlg);
  dlg.addEventListener('close', () => {
    if (dlg.returnValue === 'ok') {
      const v = n => { const x = form.elements[n]; return x ? x.value.trim() : ''; };
      const num = n => (v(n) === '' ? undefined : Number(v(n)));
      w.title = v('title') || undefined;
      if (w.type !== 'text') w.tags = v('tags').split(',').map(s => s.trim()).filter(Boolean);
      else w.text = form.elements.text.value;
      for (const k of ['unit', 'range', 'bucket', 'color_by']) w[k] = v(k) || undefined;
      for (const k of ['min', 'max', 'high']) w[k] = num(k);
      dirty();
    } else if (!w.tags && w.type !== 'text') { doc.widgets = doc.widgets.filter(x => x !== w); }
    dlg.remove(); draw();
  });
  dlg.showModal();
}

function toolbar() {
  const bar = el('div', { className: 'toolbar', role: 'toolbar', ariaLabel: 'Dashboard' });
  bar.append(el('h1', null, doc.title || doc.id || 'Dashboard'));
  if (!pub) {
    bar.append(el('button', { type: 'button', ariaPressed: String(editing), onclick: () => { editing = !editing; draw(); } }, editing ? 'Done editing' : 'Edit'));
    if (editing) {
      const sel = el('select', { id: 'addtype', ariaLabel: 'Widget type' }, ...TYPES.map(t => el('option', { value: t }, t)));
      bar.append(sel, el('button', { type: 'button', onclick: () => addWidget(sel.value) }, 'Add widget'));
      const pubBox = el('input', { type: 'checkbox', id: 'public', checked: !!doc.public, onchange: e => { doc.public = e.target.checked; dirty(); } });
      bar.append(el('label', { htmlFor: 'public' }, pubBox, ' Public'));
    }
    bar.append(el('button', { type: 'button', onclick: save }, 'Save'));
    if (doc.public && doc.token) bar.append(el('a', { href: '/d/' + doc.token, id: 'publink' }, 'Public page'));
    bar.append(el('a', { href: '/dashboard' }, 'All dashboards'));
  }
  bar.append(el('span', { id: 'bstatus', role: 'status' }));
  return bar;
}

async function save() {
  try {
    const body = JSON.parse(JSON.stringify(doc, (k, v) => (k === '_zoom' ? undefined : v)));
    doc = await send('PUT', '/api/v1/dashboards/' + doc.id, body);
    changed = false; draw(); status('saved, version ' + doc.version);
  } catch (e) { status('save failed: ' + e.message, true); }
}

// ---- the list of dashboards ----------------------------------------------

async function listPage() {
  const r = await getJSON('/api/v1/dashboards');
  const ul = el('ul', { className: 'boards' });
  for (const d of r.dashboards) {
    ul.append(el('li', null, el('a', { href: '/dashboard#' + d.id }, d.title || d.id), ' ',
      el('button', { type: 'button', onclick: async () => { await send('POST', `/api/v1/dashboards/${d.id}/duplicate`); listPage(); } }, 'Duplicate'), ' ',
      el('a', { href: `/api/v1/dashboards/${d.id}/export`, download: d.id + '.json' }, 'Export'), ' ',
      el('button', { type: 'button', onclick: async () => { if (confirm('Delete ' + (d.title || d.id) + '?')) { await send('DELETE', '/api/v1/dashboards/' + d.id); listPage(); } } }, 'Delete')));
  }
  const name = el('input', { id: 'newtitle', required: true });
  const file = el('input', { type: 'file', id: 'importfile', accept: 'application/json' });
  file.addEventListener('change', async () => {
    const t = await file.files[0].text();
    try { const d = await send('POST', '/api/v1/dashboards/import', JSON.parse(t)); location.hash = d.id; } catch (e) { status(e.message, true); }
  });
  root.replaceChildren(el('div', { className: 'toolbar' }, el('h1', null, 'Dashboards'), el('a', { href: '/' }, 'Live'), el('a', { href: '/dashboard#report' }, 'Report'), el('span', { id: 'bstatus', role: 'status' })), ul,
    el('form', { className: 'new', onsubmit: async e => {
      e.preventDefault();
      try { const d = await send('POST', '/api/v1/dashboards', { title: name.value, widgets: [] }); editing = true; location.hash = d.id; } catch (err) { status(err.message, true); }
    } }, el('label', { htmlFor: 'newtitle' }, 'New dashboard'), name, el('button', null, 'Create')),
    el('p', null, el('label', { htmlFor: 'importfile' }, 'Import a dashboard file '), file));
}

// ---- the report page -----------------------------------------------------

// A link such as /dashboard#report?from=MS&to=MS&energy=T&tag=U&tariff=N
// (the one scheduled reports carry) opens the page filled in and run.
async function reportPage(link) {
  const now = link.get('from') ? new Date(+link.get('from')) : new Date();
  const month = el('input', { type: 'month', id: 'rmonth', value: `${now.getFullYear()}-${String(now.getMonth() + 1).padStart(2, '0')}` });
  const en = el('input', { id: 'renergy', placeholder: 'house.power', value: link.getAll('energy').join(', ') });
  const st = el('input', { id: 'rtags', placeholder: 'room.temp', value: link.getAll('tag').join(', ') });
  const out = el('div', { id: 'rout' });
  let span = link.get('from') && link.get('to') ? { from: link.get('from'), to: link.get('to') } : null;
  month.addEventListener('change', () => { span = null; });
  const params = () => {
    const p = new URLSearchParams(span || { month: month.value });
    if (link.get('tariff')) p.set('tariff', link.get('tariff'));
    en.value.split(',').map(s => s.trim()).filter(Boolean).forEach(t => p.append('energy', t));
    st.value.split(',').map(s => s.trim()).filter(Boolean).forEach(t => p.append('tag', t));
    return p;
  };
  const run = async e => {
    e && e.preventDefault();
    try {
      const r = await getJSON('/api/v1/report', params());
      const head = el('tr', null, el('th', { scope: 'col' }, 'date'), ...r.energy.flatMap(x => [el('th', { scope: 'col' }, x.tag + ' kWh'), el('th', { scope: 'col' }, 'cost')]));
      const rows = r.days.map((d, i) => el('tr', null, el('th', { scope: 'row' }, fmtTime(d).slice(0, 10)),
        ...r.energy.flatMap(x => [el('td', null, x.days[i].kwh == null ? '' : String(x.days[i].kwh)), el('td', null, x.days[i].cost == null ? '' : x.days[i].cost.toFixed(2))])));
      const tot = el('tr', null, el('th', { scope: 'row' }, 'total'), ...r.energy.flatMap(x => [el('td', null, String(x.kwh)), el('td', null, x.cost == null ? '' : x.cost.toFixed(2))]));
      const prev = el('tr', null, el('th', { scope: 'row' }, 'previous period'), ...r.energy.flatMap(x => [el('td', null, String(x.previous_kwh)), el('td', null, x.previous_cost == null ? '' : x.previous_cost.toFixed(2))]));
      const peaks = r.energy.map(x => el('p', null, `${x.tag}: peak ${x.peak_kw ?? '—'} kW at ${x.peak_at ? fmtTime(x.peak_at) : '—'}; change ${x.change_pct == null ? '—' : x.change_pct.toFixed(1) + ' %'}`));
      const stats = r.stats.length ? el('table', { className: 'report' }, el('thead', null, el('tr', null, ...['tag', 'min', 'mean', 'max', 'previous mean'].map(h => el('th', { scope: 'col' }, h)))),
        el('tbody', null, ...r.stats.map(s => el('tr', null, el('th', { scope: 'row' }, s.tag), ...[s.min, s.mean, s.max, s.previous_mean].map(v => el('td', null, fmtValue(v))))))) : '';
      out.replaceChildren(el('table', { className: 'report', id: 'rtable' }, el('thead', null, head), el('tbody', null, ...rows, tot, prev)), ...peaks, stats);
    } catch (err) { out.replaceChildren(el('p', { className: 'bad', role: 'alert' }, err.message)); }
  };
  const csv = async () => {
    const p = params(); p.set('format', 'csv');
    const r = await fetch('/api/v1/report?' + p, { headers: authHeaders() });
    if (!r.ok) { status('CSV failed: ' + r.status, true); return; }
    const a = el('a', { href: URL.createObjectURL(await r.blob()), download: 'pith-report-' + month.value + '.csv' });
    document.body.append(a); a.click(); a.remove();
  };
  root.replaceChildren(el('div', { className: 'toolbar noprint' }, el('h1', null, 'Report'), el('a', { href: '/dashboard' }, 'All dashboards'), el('span', { id: 'bstatus', role: 'status' })),
    el('form', { className: 'new noprint', onsubmit: run },
      el('label', { htmlFor: 'rmonth' }, 'Month'), month, el('label', { htmlFor: 'renergy' }, 'Energy tags'), en, el('label', { htmlFor: 'rtags' }, 'Other tags'), st,
      el('button', null, 'Run'), el('button', { type: 'button', id: 'rcsv', onclick: csv }, 'Download CSV'), el('button', { type: 'button', onclick: () => print() }, 'Print')), out);
  if (span && (en.value || st.value)) run();
}

// ---- start ---------------------------------------------------------------

async function start() {
  try {
    if (pub) {
      doc = await getJSON(base + '/dashboard.json');
      document.title = doc.title || 'Pith';
      draw();
      return;
    }
    const id = decodeURIComponent(location.hash.slice(1));
    if (!id) return listPage();
    if (id === 'report' || id.startsWith('report?')) return reportPage(new URLSearchParams(id.slice(7)));
    doc = await getJSON('/api/v1/dashboards/' + encodeURIComponent(id));
    document.title = (doc.title || doc.id) + ' · Pith';
    draw();
  } catch (e) {
    root.replaceChildren(el('p', { className: 'bad', role: 'alert' }, e.message), el('p', null, el('a', { href: '/#/settings' }, 'Set the API key')));
  }
}

addEventListener('hashchange', () => { if (!pub) { editing = editing && !!location.hash; start(); } });
addEventListener('beforeunload', e => { if (changed) e.preventDefault(); });
start();
