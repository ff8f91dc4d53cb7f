// Settings view: the API key this browser sends (Authorization header).
import { apiKey, setApiKey } from './api.js';
import { el } from './util.js';

export function mount(root) {
  const key = el('input', { type: 'password', value: apiKey(), autocomplete: 'off', className: 'grow', ariaLabel: 'API key' });
  const msg = el('span', { className: 'muted' });
  root.append(el('form', { className: 'panel', onsubmit: e => {
    e.preventDefault();
    setApiKey(key.value.trim());
    msg.textContent = key.value.trim() ? 'Saved in this browser.' : 'Key removed.';
  } },
  el('h2', null, 'API key'),
  el('p', { className: 'muted small' }, 'Needed when the server requires keys. It is kept in this browser only and sent as an Authorization header, never in a URL.'),
  el('div', { className: 'toolbar' }, key, el('button', { type: 'submit' }, 'Save'), msg)));
}
