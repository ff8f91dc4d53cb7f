// Access to Pith's HTTP API. The API key, when one is set, is kept in this
// browser's localStorage and sent only as an Authorization header: never in
// a URL, where it would end up in logs, history and Referer headers. The
// live stream is read with fetch rather than EventSource for that reason
// (EventSource cannot send headers).

import { csrfToken } from './session.js';

const keyName = 'pith.apiKey';

export function apiKey() {
  try { return localStorage.getItem(keyName) || ''; } catch { return ''; }
}

export function setApiKey(k) {
  try {
    if (k) localStorage.setItem(keyName, k); else localStorage.removeItem(keyName);
  } catch { /* storage disabled: the key lives for this page only */ }
}

function headers(extra) {
  const h = new Headers(extra || {});
  const k = apiKey();
  if (k) h.set('Authorization', 'Bearer ' + k);
  const t = csrfToken();
  if (t) h.set('X-CSRF-Token', t);
  return h;
}

// send makes a state-changing request with a JSON body and returns the
// JSON answer; errors carry the server's message.
export async function send(method, path, body, signal) {
  const r = await fetch(path, {
    method, signal, body: body === undefined ? undefined : JSON.stringify(body),
    headers: headers({ 'Content-Type': 'application/json' }),
  });
  if (!r.ok) throw await fail(r);
  const t = await r.text();
  return t ? JSON.parse(t) : null;
}

// APIError carries the HTTP status and the server's message.
export class APIError extends Error {
  constructor(status, msg) { super(msg); this.status = status; }
}

async function fail(r) {
  // A session that ended (idle or absolute timeout, signed out elsewhere):
  // back to the sign-in page, unless a key is what this browser sends.
  if (r.status === 401 && !apiKey() && !/^#\/(signin|setup)/.test(location.hash)) location.hash = '#/signin';
  let msg = r.status + ' ' + r.statusText;
  try {
    const t = await r.text();
    try { msg = JSON.parse(t).error || msg; } catch { if (t) msg = t.trim(); }
  } catch { /* keep the status line */ }
  return new APIError(r.status, msg);
}

// getJSON fetches path with the query params (an object or URLSearchParams).
export async function getJSON(path, params, signal) {
  const q = params ? '?' + new URLSearchParams(params) : '';
  const r = await fetch(path + q, { headers: headers(), signal });
  if (!r.ok) throw await fail(r);
  return r.json();
}

// data reads /api/v1/data: { tag, agg, points: [[ms, v|null], ...] }.
export function data(tag, from, to, points, agg, signal) {
  return getJSON('/api/v1/data', { tag, from: Math.floor(from), to: Math.ceil(to), points, agg }, signal);
}

let tagsCache = null;

// tags reads /api/v1/tags once per page (reload to refresh) and returns
// { list, byName }.
export function tags(fresh) {
  if (!tagsCache || fresh) {
    tagsCache = getJSON('/api/v1/tags').then(r => {
      const byName = new Map();
      for (const t of r.tags) byName.set(t.name, t);
      return { list: r.tags, byName };
    });
    tagsCache.catch(() => { tagsCache = null; });
  }
  return tagsCache;
}

// postLines POSTs a JSON body and calls onLine with each line of the
// streamed answer (NDJSON or SSE from the FREEZE endpoint).
export async function postLines(path, body, onLine, signal) {
  const r = await fetch(path, {
    method: 'POST', signal, body: JSON.stringify(body),
    headers: headers({ 'Content-Type': 'application/json' }),
  });
  if (!r.ok) throw await fail(r);
  await readLines(r.body, onLine);
}

async function readLines(body, onLine) {
  const reader = body.pipeThrough(new TextDecoderStream()).getReader();
  let rest = '';
  for (;;) {
    const { value, done } = await reader.read();
    if (done) break;
    rest += value;
    let i;
    while ((i = rest.indexOf('\n')) >= 0) {
      onLine(rest.slice(0, i).replace(/\r$/, ''));
      rest = rest.slice(i + 1);
    }
  }
  if (rest) onLine(rest);
}

// stream reads a server-sent events stream with fetch and calls
// onEvent(name, data) for each event. It resolves when the stream ends and
// rejects on HTTP or network errors; the caller reconnects.
export async function stream(path, params, onEvent, signal) {
  const q = params ? '?' + new URLSearchParams(params) : '';
  const r = await fetch(path + q, { headers: headers({ Accept: 'text/event-stream' }), signal, cache: 'no-store' });
  if (!r.ok) throw await fail(r);
  let event = 'message', data = [];
  await readLines(r.body, line => {
    if (line === '') {
      if (data.length) onEvent(event, data.join('\n'));
      event = 'message'; data = [];
    } else if (line.startsWith('data:')) {
      data.push(line.slice(line[5] === ' ' ? 6 : 5));
    } else if (line.startsWith('event:')) {
      event = line.slice(6).trim();
    }
  });
}
