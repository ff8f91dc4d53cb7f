// Audit view (admins): the journal, newest first, filtered by person,
// action and text, with a CSV download of what the filter selects.
import { getJSON } from './api.js';
import { el, fmtTime, fmtValue, setStatus, debounce, replaceHash } from './util.js';

const actions = ['', 'sign-in', 'sign-in-failed', 'sign-out', 'setup', 'alarm-ack', 'control', 'rule-override', 'reload', 'user', 'keys', 'backup', 'delete', 'freeze', 'schedule', 'request', 'refused'];

export function mount(root, params) {
  const who = el('input', { type: 'search', placeholder: 'person or key', ariaLabel: 'Who', value: params.get('who') || '' });
  const action = el('select', { ariaLabel: 'Action' }, ...actions.map(a => el('option', { value: a, selected: a === (params.get('action') || '') }, a || 'any action')));
  const q = el('input', { type: 'search', placeholder: 'search tag, alarm, result…', ariaLabel: 'Search', className: 'grow', value: params.get('q') || '' });
  const csv = el('a', { className: 'button', href: '/api/v1/audit?format=csv', download: 'pith-audit.csv' }, 'CSV');
  const tbody = el('tbody');
  root.append(el('div', { className: 'toolbar' }, who, action, q, csv),
    el('div', { className: 'scroll' }, el('table', { className: 'tags audit' },
      el('thead', null, el('tr', null, ...['Time', 'Who', 'Role', 'From', 'Action', 'Target', 'Old', 'New', 'Result', 'Detail'].map(h => el('th', null, h)))), tbody)));
  function filter() {
    const p = { limit: 1000 };
    if (who.value.trim()) p.who = who.value.trim();
    if (action.value) p.action = action.value;
    if (q.value.trim()) p.q = q.value.trim();
    return p;
  }
  async function load() {
    const p = filter();
    const u = new URLSearchParams(p);
    replaceHash('audit', u);
    u.set('format', 'csv');
    csv.href = '/api/v1/audit?' + u;
    try {
      const r = await getJSON('/api/v1/audit', p);
      tbody.replaceChildren(...r.records.map(x => el('tr', { className: 'audit-' + x.action },
        el('td', { className: 'nowrap' }, fmtTime(x.t)), el('td', null, x.who || ''), el('td', null, x.role || ''), el('td', null, x.from || ''),
        el('td', null, x.action), el('td', null, x.target || ''), el('td', null, x.old == null ? '' : fmtValue(x.old)),
        el('td', null, x.new == null ? '' : fmtValue(x.new)), el('td', null, x.result), el('td', null, x.detail || ''))));
    } catch (err) { setStatus('audit: ' + err.message, true); }
  }
  const later = debounce(load, 200);
  who.addEventListener('input', later); q.addEventListener('input', later); action.addEventListener('change', load);
  load();
}
