// Small DOM and formatting helpers. Every data string reaches the page
// through textContent or a DOM property, never through HTML parsing, so a
// tag named "<img src=x onerror=alert(1)>" is shown as those characters.

// el creates an element. attrs sets properties (className, href, type...)
// except "on*" keys, which add event listeners, and "dataset". Children are
// nodes or strings; strings become text nodes.
export function el(tag, attrs, ...children) {
  const e = document.createElement(tag);
  if (attrs) {
    for (const [k, v] of Object.entries(attrs)) {
      if (v == null) continue;
      if (k.startsWith('on') && typeof v === 'function') e.addEventListener(k.slice(2), v);
      else if (k === 'dataset') Object.assign(e.dataset, v);
      else e[k] = v;
    }
  }
  for (const c of children) {
    if (c == null || c === false) continue;
    e.append(typeof c === 'string' || typeof c === 'number' ? String(c) : c);
  }
  return e;
}

// fmtValue shows a number with up to 6 significant digits, and the value
// of a text tag (a string) as it is.
export function fmtValue(v) {
  if (v == null) return '—';
  if (typeof v === 'string') return v;
  if (Number.isInteger(v) && Math.abs(v) < 1e15) return String(v);
  const a = Math.abs(v);
  if (a !== 0 && (a >= 1e9 || a < 1e-4)) return v.toExponential(3);
  return String(parseFloat(v.toPrecision(6)));
}

// fmtAge shows a duration in ms coarsely, so that it changes rarely and the
// live page rewrites few cells per second.
export function fmtAge(ms) {
  if (ms < 0) ms = 0;
  const s = Math.floor(ms / 1000);
  if (s < 60) return s + ' s';
  if (s < 3600) return Math.floor(s / 60) + ' min';
  if (s < 86400) return Math.floor(s / 3600) + ' h';
  return Math.floor(s / 86400) + ' d';
}

const pad = (n, w = 2) => String(n).padStart(w, '0');

// fmtTime shows a Unix ms time in local time, ISO-like.
export function fmtTime(ms) {
  if (ms == null || !isFinite(ms)) return '—';
  const d = new Date(ms);
  return `${d.getFullYear()}-${pad(d.getMonth() + 1)}-${pad(d.getDate())} ${pad(d.getHours())}:${pad(d.getMinutes())}:${pad(d.getSeconds())}`;
}

// setStatus shows a short message in the header.
export function setStatus(msg, bad) {
  const s = document.getElementById('status');
  if (!s) return;
  s.textContent = msg || '';
  s.classList.toggle('bad', !!bad);
}

// parseHash reads the URL's hash (#/view?params): the view's name ('live'
// when none) and its parameters.
export function parseHash() {
  const h = location.hash.replace(/^#\/?/, '');
  const i = h.indexOf('?');
  const name = (i < 0 ? h : h.slice(0, i)) || 'live';
  return { name, params: new URLSearchParams(i < 0 ? '' : h.slice(i + 1)) };
}

// replaceHash keeps a view's state in the URL (#/view?query) without a
// new history entry, and only while the URL still names that view: a
// view's late callback (a stream's first snapshot, a list that loaded)
// must not take the URL back from the view the person went to since.
export function replaceHash(view, query) {
  if (parseHash().name !== view) return;
  const q = String(query || '');
  history.replaceState(null, '', '#/' + view + (q ? '?' + q : ''));
}

// debounce delays fn until calls stop for ms.
export function debounce(fn, ms) {
  let t = 0;
  return (...a) => { clearTimeout(t); t = setTimeout(() => fn(...a), ms); };
}

// csvCell quotes s as one CSV cell. A cell starting with = + - or @ gets a
// leading ' so that a spreadsheet shows it instead of running it as a
// formula: tag names come from clients (CSV injection).
export function csvCell(s) {
  s = String(s);
  if (/^[=+\-@]/.test(s)) s = "'" + s;
  return '"' + s.replace(/"/g, '""') + '"';
}
