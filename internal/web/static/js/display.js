// Public display: a read-only kiosk page of big numbers with sparklines,
// configured in the server's [display] section. It reads only
// /display/config.json and /display/data, which expose nothing but the
// configured tags, so it can be served without an API key.
import { el, fmtTime } from './util.js';

async function get(path) {
  const r = await fetch(path, { cache: 'no-store' });
  if (!r.ok) throw new Error(path + ': ' + r.status);
  return r.json();
}

function sparkline(canvas, pts) {
  const dpr = devicePixelRatio || 1;
  const w = canvas.clientWidth, h = canvas.clientHeight;
  canvas.width = Math.round(w * dpr);
  canvas.height = Math.round(h * dpr);
  const g = canvas.getContext('2d');
  g.setTransform(dpr, 0, 0, dpr, 0, 0);
  g.clearRect(0, 0, w, h);
  const vs = pts.map(p => p[1]).filter(v => v != null);
  if (vs.length < 2) return;
  let lo = Math.min(...vs), hi = Math.max(...vs);
  if (hi === lo) { hi += 1; lo -= 1; }
  const x0 = pts[0][0], x1 = pts[pts.length - 1][0] || x0 + 1;
  g.strokeStyle = getComputedStyle(canvas).color;
  g.lineWidth = 2;
  g.beginPath();
  let pen = false;
  for (const [t, v] of pts) {
    if (v == null) { pen = false; continue; } // gaps stay gaps
    const x = (t - x0) / (x1 - x0 || 1) * w, y = h - 2 - (v - lo) / (hi - lo) * (h - 4);
    if (pen) g.lineTo(x, y); else g.moveTo(x, y);
    pen = true;
  }
  g.stroke();
}

async function main() {
  const cfg = await get('/display/config.json');
  document.title = cfg.title || 'Pith display';
  document.getElementById('title').textContent = cfg.title || '';
  const box = document.getElementById('tiles');
  const foot = document.getElementById('foot');
  const tiles = cfg.tiles.map(t => {
    const num = el('span', { className: 'num' }, '—');
    const canvas = t.spark_ms > 0 ? el('canvas', { className: 'spark' }) : null;
    const tile = el('section', { className: 'tile' },
      el('div', { className: 'label' }, t.label), el('div', null, num, ' ', el('span', { className: 'unit' }, t.unit || '')), canvas);
    box.append(tile);
    return { t, num, canvas, tile };
  });
  async function refresh() {
    try {
      const d = await get('/display/data');
      d.tiles.forEach((x, i) => {
        const s = tiles[i];
        if (!s) return;
        s.num.textContent = x.value == null ? '—' : x.value.toFixed(s.t.decimals);
        const stale = x.ts == null || d.now - x.ts > 5 * cfg.refresh_ms + 60_000;
        s.tile.classList.toggle('bad', x.quality === 'bad');
        s.tile.classList.toggle('stale', stale);
        if (s.canvas) sparkline(s.canvas, x.spark);
      });
      foot.textContent = 'Updated ' + fmtTime(d.now);
      foot.classList.remove('bad');
    } catch (e) {
      foot.textContent = 'Cannot reach the server (' + e.message + '); retrying.';
      foot.classList.add('bad');
    }
    document.body.dataset.ready = '1';
  }
  await refresh();
  setInterval(refresh, cfg.refresh_ms || 5000);
}

main().catch(e => { document.getElementById('title').textContent = 'Display unavailable: ' + e.message; });
