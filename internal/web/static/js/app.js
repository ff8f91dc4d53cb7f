// The dashboard's router: the hash (#/view?params) names the view, so a
// view's URL can be shared and reloaded. Each view module exports
// mount(root, params) returning a function that releases its resources.
import * as live from './live.js';
import * as trend from './trend.js';
import * as system from './system.js';
import * as tagsView from './tags.js';
import * as signin from './signin.js';
import * as setup from './setup.js';
import * as control from './control.js';
import * as users from './users.js';
import * as audit from './audit.js';
import { session, can } from './session.js';
import { apiKey, getJSON } from './api.js';
import { setStatus, parseHash } from './util.js';

// settings is the old name of the sign-in view (its API key form).
const views = { live, trend, system, tags: tagsView, signin, settings: signin, setup, control, users, audit };
const open = new Set(['signin', 'settings', 'setup']); // reachable before signing in
let unmount = null;

async function route() {
  let { name, params } = parseHash();
  const s = await session();
  // Accounts exist, nobody is signed in and no key is kept here: sign in.
  if (s.accounts && !s.signed_in && !s.user && !apiKey() && !open.has(name)) {
    location.replace('#/signin');
    return;
  }
  const view = views[name] || live;
  if (unmount) { try { unmount(); } catch (e) { console.error(e); } }
  setStatus('');
  const root = document.getElementById('view');
  root.replaceChildren();
  for (const a of document.querySelectorAll('#nav a')) {
    a.classList.toggle('active', a.dataset.view === name);
  }
  unmount = view.mount(root, params) || null;
}

// nav shows each link the person may use, and who is signed in.
session().then(s => {
  for (const a of document.querySelectorAll('#nav a[data-perm]')) a.hidden = !can(s, a.dataset.perm);
  const who = document.getElementById('who');
  if (s.signed_in) who.textContent = s.user + ' (' + s.role + ')';
  else if (s.user) who.textContent = 'Key ' + s.user;
});

// role shows, on a box of a redundant pair, whether it is the active one
// (docs/redundancy.md); it stays hidden on a single Pith.
async function role() {
  try {
    const r = await getJSON('/api/v1/redundancy');
    const el = document.getElementById('role');
    if (!r.pair) { el.hidden = true; return false; }
    el.hidden = false;
    el.textContent = r.role;
    el.title = r.role === 'active' ? 'This box of the redundant pair polls and writes to devices'
      : 'This box of the redundant pair mirrors the active one' + (r.active ? ' (' + r.active + ')' : '') + '; control goes to the active box';
    el.classList.toggle('standby', r.role !== 'active');
    return true;
  } catch (e) { return true; /* not signed in yet: ask again */ }
}
role().then(pair => { if (pair) setInterval(role, 5000); });

addEventListener('hashchange', route);
route();
