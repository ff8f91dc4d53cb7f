// Sign-in view: people sign in with their account; machines (and anyone
// without one) may still keep an API key in this browser.
import { apiKey, setApiKey, send } from './api.js';
import { session, setSession } from './session.js';
import { el } from './util.js';

export function mount(root) {
  const name = el('input', { type: 'text', autocomplete: 'username', className: 'grow', ariaLabel: 'Name', name: 'name' });
  const pw = el('input', { type: 'password', autocomplete: 'current-password', className: 'grow', ariaLabel: 'Password', name: 'password' });
  const msg = el('p', { className: 'msg', role: 'alert' });
  const who = el('div');
  const form = el('form', { className: 'panel signin', onsubmit: async e => {
    e.preventDefault();
    msg.textContent = '';
    try {
      const s = await send('POST', '/api/v1/session', { name: name.value.trim(), password: pw.value });
      setSession(s);
      location.hash = '#/live';
      location.reload();
    } catch (err) {
      msg.textContent = err.message;
      pw.value = '';
    }
  } },
  el('h2', null, 'Sign in'),
  el('label', null, 'Name ', name), el('label', null, 'Password ', pw),
  el('div', { className: 'toolbar' }, el('button', { type: 'submit' }, 'Sign in')), msg);

  session().then(s => {
    if (!s.signed_in) {
      // The plant's OpenID Connect provider: a full-page visit there and back.
      if (s.oidc) form.querySelector('.toolbar').append(el('a', { className: 'button', href: '/api/v1/session/oidc' }, 'Sign in with ' + s.oidc));
      return;
    }
    form.hidden = true;
    const out = el('button', { type: 'button', onclick: () => signOut(false) }, 'Sign out');
    const all = el('button', { type: 'button', onclick: () => signOut(true) }, 'Sign out everywhere');
    who.append(el('div', { className: 'panel' }, el('h2', null, 'Signed in'),
      el('p', null, 'You are ', el('b', null, s.user), ' (' + s.role + ').'), el('div', { className: 'toolbar' }, out, all)));
  });
  async function signOut(everywhere) {
    try { await send('DELETE', '/api/v1/session' + (everywhere ? '?everywhere=1' : '')); } catch { /* signed out anyway */ }
    setSession({ signed_in: false, accounts: true });
    location.hash = '#/signin';
    location.reload();
  }

  const key = el('input', { type: 'password', value: apiKey(), autocomplete: 'off', className: 'grow', ariaLabel: 'API key' });
  const kmsg = el('span', { className: 'muted' });
  root.append(form, who, el('form', { className: 'panel', onsubmit: e => {
    e.preventDefault();
    setApiKey(key.value.trim());
    kmsg.textContent = key.value.trim() ? 'Saved in this browser.' : 'Key removed.';
  } },
  el('h2', null, 'API key (machines)'),
  el('p', { className: 'muted small' }, 'For a screen without an account: the key is kept in this browser only and sent as an Authorization header, never in a URL.'),
  el('div', { className: 'toolbar' }, key, el('button', { type: 'submit' }, 'Save'), kmsg)));
}
