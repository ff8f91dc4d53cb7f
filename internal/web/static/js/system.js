// System view: Pith's own tags (pith.sys.* and pith.station.*) as small
// charts grouped by part, and the FREEZE test of the archive (admin key).
import { data, tags, postLines } from './api.js';
import { el, fmtValue, setStatus, replaceHash } from './util.js';
import { palette, uPlotLib, bucketsFor } from './chart.js';

const windows = [['1h', 3600e3], ['6h', 6 * 3600e3], ['1d', 86400e3], ['7d', 7 * 86400e3]];

export function mount(root, params) {
  const ctl = new AbortController();
  const plots = [];
  let span = windows.find(w => w[0] === params.get('range')) || windows[0];

  const bar = el('div', { className: 'buttons' });
  const grid = el('div', { className: 'sys-grid' });
  const note = el('p', { className: 'muted small' });
  for (const w of windows) {
    bar.append(el('button', { type: 'button', dataset: { range: w[0] }, onclick: () => { span = w; replaceHash('system', 'range=' + w[0]); render(); } }, w[0]));
  }

  // FREEZE: pause archive writes for N s, then watch the queue drain.
  const secs = el('input', { type: 'number', min: 1, max: 3600, value: 10, className: 'num', ariaLabel: 'Freeze seconds' });
  const watch = el('input', { type: 'number', min: 0, max: 3600, value: 30, className: 'num', ariaLabel: 'Watch seconds' });
  const out = el('pre', { className: 'freeze-out' });
  const btn = el('button', { type: 'submit', className: 'danger' }, 'FREEZE');
  const freeze = el('form', { className: 'panel', onsubmit: async e => {
    e.preventDefault();
    if (!confirm(`Pause archive writes for ${secs.value} s? Values keep queueing and are written afterwards.`)) return;
    btn.disabled = true;
    out.textContent = '';
    try {
      await postLines('/api/v1/admin/freeze', { seconds: Number(secs.value), watch_seconds: Number(watch.value) },
        line => { if (line.trim()) out.append(line.replace(/^data: ?/, '') + '\n'); out.scrollTop = out.scrollHeight; }, ctl.signal);
    } catch (err) {
      if (err.name !== 'AbortError') out.append((err.status === 404 ? 'FREEZE is not available on this server: ' : 'FREEZE failed: ') + err.message + '\n');
    } finally { btn.disabled = false; }
  } },
    el('h2', null, 'FREEZE test'),
    el('p', { className: 'muted small' }, 'Pauses archive writes, then shows the queue draining. Needs an admin key.'),
    el('div', { className: 'toolbar' }, el('label', null, 'freeze ', secs, ' s'), el('label', null, 'watch ', watch, ' s'), btn),
    out);

  root.append(bar, note, grid, freeze);

  async function render() {
    for (const b of bar.children) b.classList.toggle('active', b.dataset.range === span[0]);
    for (const p of plots) p.destroy();
    plots.length = 0;
    grid.replaceChildren();
    let list;
    try {
      list = (await tags(true)).list.filter(t => t.name.startsWith('pith.sys.') || t.name.startsWith('pith.station.'));
    } catch (e) { setStatus('tags: ' + e.message, true); return; }
    if (!list.length) { note.textContent = 'No pith.sys.* or pith.station.* tags are stored yet.'; return; }
    note.textContent = list.length + ' system tags.';
    const to = Date.now(), from = to - span[1];
    const uPlot = uPlotLib();
    let i = 0;
    for (const t of list) {
      const box = el('div', { className: 'sys-chart' });
      const val = el('span', { className: 'sys-val' });
      const card = el('section', { className: 'card' },
        el('h3', null, el('a', { href: '#/trend?' + new URLSearchParams({ tag: t.name, range: span[0] }) }, t.name.replace(/^pith\./, '')), ' ', val),
        box);
      grid.append(card);
      const color = palette[i++ % palette.length];
      const width = Math.max(200, box.clientWidth || 300);
      data(t.name, from, to, bucketsFor(width), 'mean', ctl.signal).then(r => {
        const xs = r.points.map(p => p[0]), ys = r.points.map(p => p[1]);
        const last = ys.findLast(v => v != null);
        val.textContent = last == null ? '' : fmtValue(last) + (t.unit ? ' ' + t.unit : '');
        plots.push(new uPlot({
          width, height: 120, ms: 1, legend: { show: false }, cursor: { show: false },
          scales: { x: { time: true, range: () => [from, to] } },
          axes: [{ size: 24, font: '10px sans-serif' }, { size: 40, font: '10px sans-serif' }],
          series: [{}, { stroke: color, width: 1.2, spanGaps: false }],
        }, [xs, ys], box));
        box.dataset.ready = '1';
      }).catch(e => { if (e.name !== 'AbortError') box.append(el('p', { className: 'bad small' }, e.message)); });
    }
  }
  render();
  return () => { ctl.abort(); for (const p of plots) p.destroy(); };
}
