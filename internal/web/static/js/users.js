// Users view (admins): every account, a new one, and per account its role,
// a new password, disabling and signing out everywhere.
import { getJSON, send } from './api.js';
import { el, fmtTime } from './util.js';

export function mount(root) {
  const msg = el('p', { className: 'msg', role: 'status' });
  const tbody = el('tbody');
  let roles = ['viewer', 'operator', 'engineer', 'admin'];
  const name = el('input', { type: 'text', ariaLabel: 'New name', name: 'new-name', autocomplete: 'off' });
  const role = el('select', { ariaLabel: 'New role', name: 'new-role' });
  const pw = el('input', { type: 'password', ariaLabel: 'New password', name: 'new-password', autocomplete: 'new-password' });
  const say = (text, bad) => { msg.textContent = text; msg.classList.toggle('bad', !!bad); };
  root.append(el('form', { className: 'panel', onsubmit: async e => {
    e.preventDefault();
    try {
      await send('POST', '/api/v1/users', { name: name.value.trim(), role: role.value, password: pw.value });
      say('Account ' + name.value.trim() + ' added.');
      name.value = pw.value = '';
      load();
    } catch (err) { say(err.message, true); }
  } }, el('h2', null, 'Add a person'),
  el('div', { className: 'toolbar' }, el('label', null, 'Name ', name), el('label', null, 'Role ', role),
    el('label', null, 'Password ', pw), el('button', { type: 'submit' }, 'Add'))),
  msg,
  el('div', { className: 'scroll panel' }, el('table', { className: 'tags users' },
    el('thead', null, el('tr', null, ...['Name', 'Role', 'State', 'Sessions', 'Changed', ''].map(h => el('th', null, h)))), tbody)));

  async function act(fn, done) {
    try { await fn(); say(done); } catch (err) { say(err.message, true); }
    load();
  }
  function row(u) {
    const sel = el('select', { ariaLabel: 'Role of ' + u.name, onchange: () => act(() => send('PATCH', '/api/v1/users/' + encodeURIComponent(u.name), { role: sel.value }), u.name + ' is now ' + sel.value + '.') },
      ...roles.map(r => el('option', { value: r, selected: r === u.role }, r)));
    const npw = el('input', { type: 'password', ariaLabel: 'New password of ' + u.name, autocomplete: 'new-password', placeholder: 'new password' });
    return el('tr', { dataset: { user: u.name } }, el('td', null, u.name), el('td', null, sel),
      el('td', null, u.disabled ? 'disabled' : 'enabled'), el('td', null, String(u.sessions)), el('td', { className: 'nowrap' }, fmtTime(u.changed)),
      el('td', { className: 'nowrap' },
        npw, el('button', { type: 'button', onclick: () => act(() => send('PATCH', '/api/v1/users/' + encodeURIComponent(u.name), { password: npw.value }), 'Password of ' + u.name + ' changed.') }, 'Set password'),
        el('button', { type: 'button', onclick: () => act(() => send('PATCH', '/api/v1/users/' + encodeURIComponent(u.name), { disabled: !u.disabled }), u.name + (u.disabled ? ' enabled.' : ' disabled.')) }, u.disabled ? 'Enable' : 'Disable'),
        el('button', { type: 'button', onclick: () => act(() => send('POST', '/api/v1/users/' + encodeURIComponent(u.name) + '/signout'), u.name + ' signed out everywhere.') }, 'Sign out everywhere')));
  }
  async function load() {
    try {
      const r = await getJSON('/api/v1/users');
      roles = r.roles || roles;
      if (!role.options.length) role.append(...roles.map(x => el('option', { value: x, selected: x === 'viewer' }, x)));
      tbody.replaceChildren(...r.users.map(row));
    } catch (err) { say('users: ' + err.message, true); }
  }
  load();
}
