// First set-up: the one-time link Pith prints at its first start
// (#/setup?token=...) makes the first admin account.
import { send } from './api.js';
import { setSession } from './session.js';
import { el } from './util.js';

export function mount(root, params) {
  const token = params.get('token') || '';
  const name = el('input', { type: 'text', autocomplete: 'username', ariaLabel: 'Name', name: 'name', value: 'admin' });
  const pw = el('input', { type: 'password', autocomplete: 'new-password', ariaLabel: 'Password', name: 'password' });
  const again = el('input', { type: 'password', autocomplete: 'new-password', ariaLabel: 'Password again', name: 'again' });
  const msg = el('p', { className: 'msg', role: 'alert' });
  root.append(el('form', { className: 'panel signin', onsubmit: async e => {
    e.preventDefault();
    msg.textContent = '';
    if (pw.value !== again.value) { msg.textContent = 'The passwords differ.'; return; }
    try {
      const s = await send('POST', '/api/v1/setup', { token, name: name.value.trim(), password: pw.value });
      setSession(s);
      history.replaceState(null, '', '#/users');
      location.reload();
    } catch (err) { msg.textContent = err.message; }
  } },
  el('h2', null, 'Set up the first admin'),
  el('p', { className: 'muted small' }, 'This link works once. Choose the name and password of the first administrator (at least 10 characters); they add everybody else.'),
  el('label', null, 'Name ', name), el('label', null, 'Password ', pw), el('label', null, 'Again ', again),
  el('div', { className: 'toolbar' }, el('button', { type: 'submit' }, 'Create admin and sign in')), msg));
}
