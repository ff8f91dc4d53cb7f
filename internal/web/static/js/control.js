// Control view: write a value to a tag's device (POST /api/v1/control).
// Shown to people whose role may control; the server checks the tag
// against the role's patterns and says so when it refuses.
import { send, tags } from './api.js';
import { session, can } from './session.js';
import { el } from './util.js';

export function mount(root, params) {
  session().then(s => { if (can(s, 'control')) form(root, params); else root.append(el('p', { className: 'panel muted' }, 'Your role may not write tags.')); });
}

function form(root, params) {
  const list = el('datalist', { id: 'control-tags' });
  const tag = el('input', { type: 'text', ariaLabel: 'Tag', name: 'tag', className: 'grow', value: params.get('tag') || '' });
  tag.setAttribute('list', 'control-tags');
  const value = el('input', { type: 'number', step: 'any', ariaLabel: 'Value', name: 'value', className: 'num' });
  const msg = el('p', { className: 'msg', role: 'status' });
  const allowed = el('p', { className: 'muted small' });
  root.append(el('form', { className: 'panel control', onsubmit: async e => {
    e.preventDefault();
    msg.textContent = '';
    msg.classList.remove('bad');
    try {
      const r = await send('POST', '/api/v1/control', { tag: tag.value.trim(), value: Number(value.value) });
      msg.textContent = 'Written: ' + r.tag + ' = ' + r.value + ' (the device acknowledged).';
    } catch (err) {
      msg.classList.add('bad');
      msg.textContent = (err.status === 403 ? 'Refused: ' : 'Failed: ') + err.message;
    }
  } },
  el('h2', null, 'Write a value'), allowed,
  el('div', { className: 'toolbar' }, el('label', { className: 'grow' }, 'Tag ', tag), el('label', null, 'Value ', value),
    el('button', { type: 'submit' }, 'Write')), msg, list));
  session().then(s => {
    if (s.tags) allowed.textContent = 'Your role may write: ' + (s.tags.length ? s.tags.join(', ') : 'no tags') + '.';
  });
  tags().then(t => list.replaceChildren(...t.list.map(x => el('option', { value: x.name })))).catch(() => {});
}
