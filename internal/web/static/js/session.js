// The person signed in: GET /api/v1/session once per page, and what the
// role may do. The session itself is an HttpOnly cookie this script never
// sees; the CSRF token from the answer goes with every state-changing
// request (api.js).

let current = null;

// session resolves to {signed_in, user, role, perms, tags, csrf} or, with
// no one signed in, {signed_in: false, accounts}.
export function session(fresh) {
  if (!current || fresh) {
    // A key kept in this browser (api.js) answers for itself.
    let k = '';
    try { k = localStorage.getItem('pith.apiKey') || ''; } catch { /* storage off */ }
    current = fetch('/api/v1/session', { cache: 'no-store', headers: k ? { Authorization: 'Bearer ' + k } : {} })
      .then(r => r.ok ? r.json() : { signed_in: false, accounts: r.status !== 404 })
      .catch(() => ({ signed_in: false, accounts: false }));
  }
  return current;
}

// csrfToken is the token of the loaded session, '' when none.
let token = '';
export function csrfToken() { return token; }
export function setSession(s) { current = Promise.resolve(s); token = (s && s.csrf) || ''; }
session().then(s => { token = s.csrf || ''; });

// can reports whether the person may do perm ('read', 'acknowledge',
// 'control', 'edit', 'admin'). With no accounts at all (credentials off),
// or with an API key in this browser, the server decides alone: true.
export function can(s, perm) {
  if (!s.signed_in && s.accounts === false) return true;
  return (s.perms || []).includes(perm);
}
