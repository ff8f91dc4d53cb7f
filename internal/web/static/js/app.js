// The dashboard's router: the hash (#/view?params) names the view, so a
// view's URL can be shared and reloaded. Each view module exports
// mount(root, params) returning a function that releases its resources.
import * as live from './live.js';
import * as trend from './trend.js';
import * as system from './system.js';
import * as tagsView from './tags.js';
import * as settings from './settings.js';
import { setStatus } from './util.js';

const views = { live, trend, system, tags: tagsView, settings };
let unmount = null;

function parseHash() {
  const h = location.hash.replace(/^#\/?/, '');
  const i = h.indexOf('?');
  const name = (i < 0 ? h : h.slice(0, i)) || 'live';
  return { name, params: new URLSearchParams(i < 0 ? '' : h.slice(i + 1)) };
}

function route() {
  const { name, params } = parseHash();
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

addEventListener('hashchange', route);
route();
