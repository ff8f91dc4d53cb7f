// Live view: every tag's current value, unit, quality and age, updated
// from the /api/v1/live server-sent events stream. Built for 1,000+ tags
// changing every second on a phone: rows are created once, an update
// rewrites only the cells whose text changed, ages are coarse and
// re-rendered once per second, and rows outside the viewport are skipped
// by the renderer (content-visibility in style.css).
import { stream, tags } from './api.js';
import { el, fmtValue, fmtAge, setStatus, debounce, replaceHash } from './util.js';
import { alarmPanel } from './alarms.js';

// staleMs is the age beyond which a value is shown as stale.
const staleMs = 60_000;

export function mount(root, params) {
  const ctl = new AbortController();
  const rows = new Map(); // tag -> row state
  let skew = 0;           // server clock minus ours, ms
  let filter = (params.get('q') || '').toLowerCase();
  let problemsOnly = params.get('problems') === '1';
  let units = new Map();

  const search = el('input', { type: 'search', placeholder: 'Filter tags…', value: filter, className: 'grow', ariaLabel: 'Filter tags' });
  const problems = el('input', { type: 'checkbox', checked: problemsOnly });
  const count = el('span', { className: 'muted' });
  const body = el('div', { className: 'live-body', role: 'rowgroup' });
  root.append(
    alarmPanel(ctl.signal),
    el('div', { className: 'toolbar' }, search, el('label', null, problems, ' problems only'), count),
    el('div', { className: 'live', role: 'table', ariaLabel: 'Current values' },
      el('div', { className: 'live-row head', role: 'row' },
        el('span', { className: 'c-name', role: 'columnheader' }, 'Tag'), el('span', { className: 'c-val', role: 'columnheader' }, 'Value'),
        el('span', { className: 'c-unit', role: 'columnheader' }, 'Unit'), el('span', { className: 'c-q', role: 'columnheader' }, 'Quality'),
        el('span', { className: 'c-age', role: 'columnheader' }, 'Age')),
      body));

  function visible(r) {
    if (filter && !r.lname.includes(filter)) return false;
    return !problemsOnly || r.cls !== '';
  }
  function applyFilter() {
    let n = 0;
    for (const r of rows.values()) {
      const v = visible(r);
      if (r.row.hidden === v) r.row.hidden = !v;
      if (v) n++;
    }
    count.textContent = n + ' of ' + rows.size + ' tags';
    const p = new URLSearchParams();
    if (filter) p.set('q', filter);
    if (problemsOnly) p.set('problems', '1');
    replaceHash('live', p);
  }
  search.addEventListener('input', debounce(() => { filter = search.value.toLowerCase(); applyFilter(); }, 150));
  problems.addEventListener('change', () => { problemsOnly = problems.checked; applyFilter(); });

  function addRow(name) {
    const link = el('a', { href: '#/trend?' + new URLSearchParams({ tag: name }) }, name);
    const val = el('span', { className: 'c-val', role: 'cell' });
    const unit = el('span', { className: 'c-unit', role: 'cell' }, units.get(name) || '');
    const q = el('span', { className: 'c-q', role: 'cell' });
    const age = el('span', { className: 'c-age', role: 'cell' });
    const row = el('div', { className: 'live-row', role: 'row' }, el('span', { className: 'c-name', role: 'cell' }, link), val, unit, q, age);
    const r = { row, val, q, age, unit, lname: name.toLowerCase(), t: 0, v: undefined, qual: '', ageText: '', cls: '' };
    rows.set(name, r);
    return r;
  }

  // set applies one [tag, ms, value, quality] tuple.
  function set(r, t, v, qual) {
    r.t = t;
    if (v !== r.v) { r.v = v; r.val.textContent = fmtValue(v); }
    if (qual !== r.qual) { r.qual = qual; r.q.textContent = qual; }
  }

  // refresh recomputes a row's age text and its class (bad, uncertain,
  // stale); it touches the DOM only when either changed.
  function refresh(r, now) {
    const a = now - r.t;
    const text = r.t ? fmtAge(a) : '—';
    if (text !== r.ageText) { r.ageText = text; r.age.textContent = text; }
    const cls = r.qual === 'bad' ? 'bad' : r.qual === 'uncertain' ? 'uncertain' : (a > staleMs || r.v == null) ? 'stale' : '';
    if (cls !== r.cls) {
      if (r.cls) r.row.classList.remove(r.cls);
      if (cls) r.row.classList.add(cls);
      r.cls = cls;
      if (problemsOnly) r.row.hidden = !visible(r);
    }
  }

  function onEvent(name, text) {
    const msg = JSON.parse(text);
    skew = msg.now - Date.now();
    if (name === 'snapshot') {
      const fresh = [];
      for (const [tag, t, v, q] of msg.values) {
        const r = rows.get(tag) || (fresh.push(tag), addRow(tag));
        set(r, t, v, q);
      }
      if (fresh.length) {
        // Keep the rows sorted by name after a (re)connection.
        const sorted = [...rows.keys()].sort();
        body.replaceChildren(...sorted.map(n => rows.get(n).row));
      }
      tick();
      applyFilter();
      setStatus('live');
      return;
    }
    if (name !== 'update') return;
    let added = false;
    for (const [tag, t, v, q] of msg.values) {
      let r = rows.get(tag);
      if (!r) { r = addRow(tag); body.append(r.row); added = true; }
      set(r, t, v, q);
      refresh(r, msg.now);
    }
    if (added) applyFilter();
  }

  function tick() {
    const now = Date.now() + skew;
    for (const r of rows.values()) refresh(r, now);
  }
  const timer = setInterval(tick, 1000);

  tags().then(t => {
    units = new Map(t.list.filter(x => x.unit).map(x => [x.name, x.unit]));
    for (const [n, r] of rows) r.unit.textContent = units.get(n) || '';
  }).catch(() => { /* units are optional */ });

  (async () => {
    let backoff = 1000;
    while (!ctl.signal.aborted) {
      try {
        await stream('/api/v1/live', null, onEvent, ctl.signal);
        backoff = 1000;
      } catch (e) {
        if (ctl.signal.aborted) return;
        setStatus('live stream: ' + e.message, true);
        if (e.status === 401 || e.status === 403) return;
      }
      if (ctl.signal.aborted) return;
      setStatus('reconnecting…', true);
      await new Promise(res => setTimeout(res, backoff));
      backoff = Math.min(backoff * 2, 30_000);
    }
  })();

  return () => { ctl.abort(); clearInterval(timer); };
}
