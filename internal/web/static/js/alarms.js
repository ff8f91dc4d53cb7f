// The alarm list on the overview (live) page: the alarms that are not
// normal, from GET /api/v1/alarms every few seconds, each with an
// acknowledge button (POST /api/v1/alarms/ack, which needs an admin key).
// The panel stays hidden when there are none or alarms are not enabled.
import { getJSON, postLines } from './api.js';
import { session, can } from './session.js';
import { el, fmtTime, fmtValue, setStatus } from './util.js';

const refreshMs = 5000;

// alarmPanel returns the panel element; it polls until signal aborts.
export function alarmPanel(signal) {
  const tbody = el('tbody');
  const title = el('h2', null, 'Alarms');
  const panel = el('div', { className: 'card alarms', hidden: true, role: 'region', ariaLabel: 'Alarms' }, title,
    el('div', { className: 'scroll' }, el('table', { className: 'tags' },
      el('thead', null, el('tr', null, ...['State', 'Severity', 'Alarm', 'Message', 'Value', 'Raised', ''].map(h => el('th', null, h)))),
      tbody)));
  let timer = 0;
  let mayAck = false;
  async function load() {
    clearTimeout(timer);
    mayAck = can(await session(), 'acknowledge');
    try {
      const r = await getJSON('/api/v1/alarms', null, signal);
      render(r.alarms || []);
      if (r.enabled === false) return; // alarms are not enabled: stop asking
    } catch (e) {
      if (signal.aborted) return;
      panel.hidden = true;
      if (e.status === 404) return; // alarms are not enabled: stop asking
      // 401/403: no key for them yet; network errors: try again later.
    }
    if (!signal.aborted) timer = setTimeout(load, refreshMs);
  }
  function render(list) {
    panel.hidden = list.length === 0;
    title.textContent = 'Alarms (' + list.length + ')';
    tbody.replaceChildren(...list.map(a => {
      const ack = mayAck && (a.state === 'active' || a.state === 'cleared')
        ? el('button', { type: 'button', onclick: () => acknowledge(a.id) }, 'Ack') : '';
      return el('tr', { className: 'alarm-' + a.state },
        el('td', null, a.state), el('td', null, a.severity || ''), el('td', null, a.id),
        el('td', null, a.message || ''), el('td', null, a.value == null ? '' : fmtValue(a.value)),
        el('td', { className: 'nowrap' }, fmtTime(a.raised)), el('td', null, ack));
    }));
  }
  async function acknowledge(id) {
    try {
      await postLines('/api/v1/alarms/ack', { id }, () => {}, signal);
    } catch (e) {
      setStatus('ack: ' + e.message, true);
    }
    load();
  }
  signal.addEventListener('abort', () => clearTimeout(timer));
  load();
  return panel;
}
