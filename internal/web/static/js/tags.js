// Tags view: every stored tag with its metadata, searchable.
import { tags } from './api.js';
import { el, fmtTime, setStatus, debounce, replaceHash } from './util.js';

export function mount(root, params) {
  let q = (params.get('q') || '').toLowerCase();
  const search = el('input', { type: 'search', placeholder: 'Search name, unit, description, source…', value: q, className: 'grow', ariaLabel: 'Search tags' });
  const count = el('span', { className: 'muted' });
  const tbody = el('tbody');
  root.append(el('div', { className: 'toolbar' }, search, count),
    el('div', { className: 'scroll' }, el('table', { className: 'tags' },
      el('thead', null, el('tr', null, ...['Tag', 'Unit', 'Description', 'Source', 'Archive', 'First', 'Last'].map(h => el('th', null, h)))),
      tbody)));
  let rows = [];
  function apply() {
    let n = 0;
    for (const r of rows) {
      const v = !q || r.text.includes(q);
      r.tr.hidden = !v;
      if (v) n++;
    }
    count.textContent = n + ' of ' + rows.length + ' tags';
    replaceHash('tags', q ? new URLSearchParams({ q }) : '');
  }
  search.addEventListener('input', debounce(() => { q = search.value.toLowerCase(); apply(); }, 150));
  tags(true).then(t => {
    rows = t.list.map(x => {
      const tr = el('tr', null,
        el('td', null, el('a', { href: '#/trend?' + new URLSearchParams({ tag: x.name, range: 'all' }) }, x.name)),
        // A text tag (states, batch ids) has no unit: its kind is shown.
        el('td', null, x.unit || (x.kind === 'text' ? 'text' : '')), el('td', null, x.description || ''), el('td', null, x.source || ''),
        el('td', null, x.archive || ''), el('td', { className: 'nowrap' }, fmtTime(x.first)), el('td', { className: 'nowrap' }, fmtTime(x.last)));
      return { tr, text: [x.name, x.unit, x.kind, x.description, x.source, x.archive].join(' ').toLowerCase() };
    });
    tbody.replaceChildren(...rows.map(r => r.tr));
    apply();
  }).catch(e => setStatus('tags: ' + e.message, true));
}
