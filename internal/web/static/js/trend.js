// Trend view: one or many tags over a time range. For each tag the server
// sends about one bucket per pixel from its rollups: min and max (drawn
// as a band) and mean (the line), so five years draw as fast as five
// minutes. Empty buckets are nulls and drawn as gaps. When the range holds
// fewer samples than buckets the raw samples are drawn instead (gaps are
// then breaks longer than five median intervals). Digital tags (only 0 and
// 1) are drawn as steps. Text tags (states, batch ids) are drawn as lanes
// under the plot, on its time axis: each value a labelled segment lasting
// until the next one. The hash captures the view:
// #/trend?tag=A&tag=B&range=1d or &from=MS&to=MS.
import { data, tags } from './api.js';
import { csvCell, el, fmtTime, setStatus, replaceHash } from './util.js';
import { palette, alpha, isDigital, uPlotLib, bucketsFor } from './chart.js';

// maxTextChanges is the most values of a text tag drawn one by one; past
// it the lane shows each bucket's last value instead.
const maxTextChanges = 2000;

// segColor gives each text value its own colour, the same on every
// redraw (a hash of the text picks one of the palette's).
function segColor(text) {
  let h = 0;
  for (let i = 0; i < text.length; i++) h = (h * 31 + text.charCodeAt(i)) | 0;
  return palette[Math.abs(h) % palette.length];
}

const presets = [
  ['1h', 3600e3], ['6h', 6 * 3600e3], ['1d', 86400e3], ['7d', 7 * 86400e3],
  ['30d', 30 * 86400e3], ['1y', 365.25 * 86400e3], ['5y', 5 * 365.25 * 86400e3],
];
const presetMs = new Map(presets);

export function mount(root, params) {
  const st = {
    tags: params.getAll('tag').filter(Boolean),
    range: params.get('range') || '',
    from: Number(params.get('from')) || 0,
    to: Number(params.get('to')) || 0,
  };
  if (!st.range && !(st.to > st.from)) st.range = '1d';
  let plot = null, shown = null, loadSeq = 0, ctl = null, lastWidth = 0;

  const picker = el('input', { type: 'search', placeholder: 'Add tag…', className: 'grow', ariaLabel: 'Add tag' });
  picker.setAttribute('list', 'trend-tags');
  const list = el('datalist', { id: 'trend-tags' });
  const chips = el('div', { className: 'chips' });
  const presetBar = el('div', { className: 'buttons' });
  const info = el('span', { className: 'muted small' });
  const chartBox = el('div', { className: 'chart' });
  const csvBtn = el('button', { type: 'button', title: 'Download what is shown as CSV' }, 'CSV');

  for (const [name] of presets) {
    presetBar.append(el('button', { type: 'button', dataset: { range: name }, onclick: () => setRange(name) }, name));
  }
  presetBar.append(
    el('button', { type: 'button', dataset: { range: 'all' }, onclick: () => setRange('all'), title: 'Everything stored' }, 'all'),
    el('button', { type: 'button', onclick: () => pan(-0.5), title: 'Earlier', ariaLabel: 'Earlier' }, '◀'),
    el('button', { type: 'button', onclick: () => zoomOut(), title: 'Zoom out', ariaLabel: 'Zoom out' }, '−'),
    el('button', { type: 'button', onclick: () => pan(0.5), title: 'Later', ariaLabel: 'Later' }, '▶'),
    csvBtn);

  root.append(
    el('form', { className: 'toolbar', onsubmit: e => { e.preventDefault(); addTag(picker.value.trim()); } },
      picker, list, el('button', { type: 'submit' }, 'Add')),
    chips, presetBar, chartBox,
    el('p', { className: 'muted small' }, 'Drag across the chart to zoom; the band is min to max, the line the mean; text tags are lanes of their values. ', info));

  tags().then(t => {
    list.replaceChildren(...t.list.map(x => el('option', { value: x.name })));
  }).catch(e => setStatus('tags: ' + e.message, true));

  function addTag(name) {
    if (!name || st.tags.includes(name)) return;
    st.tags.push(name);
    picker.value = '';
    changed();
  }
  function removeTag(name) {
    st.tags = st.tags.filter(t => t !== name);
    changed();
  }
  async function window_() {
    if (st.range === 'all') {
      const t = await tags();
      let from = Infinity, to = -Infinity;
      for (const n of st.tags) {
        const m = t.byName.get(n);
        if (m) { from = Math.min(from, m.first); to = Math.max(to, m.last + 1); }
      }
      if (from < to) return [from, to];
      return [Date.now() - 86400e3, Date.now()];
    }
    if (st.range) {
      const now = Date.now();
      return [now - presetMs.get(st.range), now];
    }
    return [st.from, st.to];
  }
  function setRange(name) {
    st.range = name;
    changed();
  }
  function setWindow(from, to) {
    st.range = '';
    st.from = Math.floor(from);
    st.to = Math.ceil(Math.max(to, from + 1));
    changed();
  }
  function pan(frac) {
    if (!shown) return;
    const w = shown.to - shown.from;
    setWindow(shown.from + w * frac, shown.to + w * frac);
  }
  function zoomOut() {
    if (!shown) return;
    const w = shown.to - shown.from, c = (shown.from + shown.to) / 2;
    setWindow(c - w, c + w);
  }

  function writeHash() {
    const p = new URLSearchParams();
    for (const t of st.tags) p.append('tag', t);
    if (st.range) p.set('range', st.range);
    else { p.set('from', st.from); p.set('to', st.to); }
    replaceHash('trend', p);
  }

  function changed() {
    writeHash();
    chips.replaceChildren(...st.tags.map((t, i) => el('span', { className: 'chip' },
      el('i', { className: 'swatch', dataset: { i: i % palette.length } }), t,
      el('button', { type: 'button', className: 'x', title: 'Remove', ariaLabel: 'Remove ' + t, onclick: () => removeTag(t) }, '×'))));
    for (const b of presetBar.querySelectorAll('button[data-range]')) b.classList.toggle('active', b.dataset.range === st.range);
    load();
  }

  // fetchTag reads one tag: n buckets of min, max and mean, answered
  // from the rollups in one round trip. When under half the buckets hold
  // data, the window is either sparse or zoomed in past the sampling
  // interval, and a second round asks for the counts: when the samples
  // fit in n the raw samples are drawn instead; when the buckets are
  // narrower than two sampling intervals (they would be half empty and
  // draw false gaps) fewer, wider buckets are asked for.
  async function fetchTag(tag, from, to, n, signal) {
    const [mean, mn, mx] = await Promise.all(['mean', 'min', 'max'].map(a => data(tag, from, to, n, a, signal)));
    let filled = 0;
    for (const p of mean.points) if (p[1] != null) filled++;
    if (filled >= n / 2) return { mean: mean.points, min: mn.points, max: mx.points };
    const cnt = await data(tag, from, to, n, 'count', signal);
    let total = 0;
    for (const p of cnt.points) total += p[1] || 0;
    if (total <= n) {
      const raw = await data(tag, from, to, n, 'raw', signal);
      return { raw: raw.points };
    }
    // The sampling interval is estimated over the buckets that hold data,
    // so that a long outage does not make it look longer.
    const bw = (to - from) / n, iv = filled * bw / total;
    const want = Math.floor((to - from) / (2 * iv));
    if (want < n * 0.9 && want >= 10) return fetchTag(tag, from, to, want, signal);
    return { mean: mean.points, min: mn.points, max: mx.points };
  }

  // fetchText reads a text tag's values in the window, and the value it
  // held when the window starts: its segments. With more values than
  // maxTextChanges, each bucket's last value stands for its bucket.
  async function fetchText(tag, from, to, n, signal) {
    const [before, raw] = await Promise.all([
      data(tag, 0, from, 1, 'last', signal).catch(() => ({ points: [] })),
      data(tag, from, to, maxTextChanges, 'raw', signal)]);
    let pts = raw.points;
    if (raw.truncated) pts = (await data(tag, from, to, n, 'last', signal)).points.filter(p => p[1] != null);
    const start = before.points.length ? before.points[0][1] : null;
    return { text: true, start, points: pts };
  }

  async function load() {
    const seq = ++loadSeq;
    if (ctl) ctl.abort();
    ctl = new AbortController();
    if (!st.tags.length) {
      destroy();
      chartBox.replaceChildren(el('p', { className: 'muted' }, 'Add a tag to draw its history.'));
      shown = null;
      return;
    }
    const [from, to] = await window_();
    const width = Math.max(200, chartBox.clientWidth || 800);
    const n = bucketsFor(width - (st.tags.length > 1 ? 140 : 80)); // the plot, without its axes
    performance.clearMarks('pith:trend:render');
    performance.clearMarks('pith:trend:data');
    performance.mark('pith:trend:request');
    setStatus('loading…');
    let res;
    try {
      const meta = await tags().catch(() => ({ byName: new Map() }));
      res = await Promise.all(st.tags.map(t => meta.byName.get(t)?.kind === 'text'
        ? fetchText(t, from, to, n, ctl.signal) : fetchTag(t, from, to, n, ctl.signal)));
    } catch (e) {
      if (e.name === 'AbortError') return;
      setStatus(e.message, true);
      return;
    }
    if (seq !== loadSeq) return;
    performance.mark('pith:trend:data');
    const meta = await tags().catch(() => ({ byName: new Map() }));
    draw(from, to, res, meta.byName, width);
    setStatus('');
  }

  // merge lines every tag's arrays up on one x axis. A tag without a
  // point at some x gets undefined there, which uPlot bridges; a real gap
  // (an empty bucket, or a raw break longer than five median intervals)
  // is null, which uPlot draws as a gap.
  function merge(res) {
    const xsSet = new Set(), breaks = [];
    for (const r of res) {
      if (r.text) { breaks.push([]); continue; }
      const p = r.raw || r.mean, br = [];
      for (const q of p) xsSet.add(q[0]);
      if (r.raw && p.length > 2) {
        const d = [];
        for (let i = 1; i < p.length; i++) d.push(p[i][0] - p[i - 1][0]);
        d.sort((a, b) => a - b);
        const gap = 5 * d[d.length >> 1];
        for (let i = 1; i < p.length; i++) {
          if (p[i][0] - p[i - 1][0] > gap) { br.push(p[i - 1][0] + 1); xsSet.add(p[i - 1][0] + 1); }
        }
      }
      breaks.push(br);
    }
    const xs = Float64Array.from(xsSet).sort();
    const idx = new Map();
    xs.forEach((x, i) => idx.set(x, i));
    const cols = res.map((r, k) => {
      if (r.text) return r;
      const blank = () => new Array(xs.length).fill(undefined);
      const c = { mean: blank(), min: blank(), max: blank(), raw: !!r.raw };
      if (r.raw) {
        for (const q of r.raw) c.mean[idx.get(q[0])] = q[1];
        for (const b of breaks[k]) c.mean[idx.get(b)] = null;
      } else {
        for (const q of r.mean) c.mean[idx.get(q[0])] = q[1];
        for (const q of r.min) c.min[idx.get(q[0])] = q[1];
        for (const q of r.max) c.max[idx.get(q[0])] = q[1];
      }
      return c;
    });
    return { xs: Array.from(xs), cols };
  }

  function draw(from, to, res, byName, width) {
    const uPlot = uPlotLib();
    const m = merge(res);
    const series = [{}], bands = [], units = [];
    const cols = [m.xs.length ? m.xs : [from, to]];
    st.tags.forEach((name, i) => {
      const c = m.cols[i], color = palette[i % palette.length];
      if (c.text) return;
      const unit = byName.get(name)?.unit || '';
      if (!units.includes(unit)) units.push(unit);
      const scale = 'u:' + unit;
      const step = (c.raw ? isDigital(c.mean) : isDigital(c.min, c.max)) ? uPlot.paths.stepped({ align: 1 }) : undefined;
      series.push({ label: name, stroke: color, width: 1.5, scale, paths: step, spanGaps: false,
        value: (u, v) => v == null ? '—' : String(parseFloat(v.toPrecision(6))) + (unit ? ' ' + unit : '') });
      cols.push(c.mean);
      if (!c.raw) {
        const minIdx = series.length, maxIdx = series.length + 1;
        series.push({ label: name + ' min', stroke: alpha(color, 0.35), width: 0.5, scale, paths: step, spanGaps: false });
        series.push({ label: name + ' max', stroke: alpha(color, 0.35), width: 0.5, scale, paths: step, spanGaps: false });
        cols.push(c.min, c.max);
        bands.push({ series: [maxIdx, minIdx], fill: alpha(color, 0.18) });
      }
    });
    const axes = [{ }];
    units.slice(0, 2).forEach((u, i) => axes.push({ scale: 'u:' + u, side: i ? 1 : 3, size: 72, label: u || undefined, grid: { show: i === 0 } }));
    const scales = { x: { time: true, range: () => [from, to] } };
    for (const u of units) scales['u:' + u] = { auto: true };
    destroy();
    chartBox.replaceChildren();
    let first = true;
    const opts = {
      width, height: Math.max(240, Math.min(480, Math.round(innerHeight * 0.55))), ms: 1,
      series, bands, axes, scales,
      cursor: { drag: { x: true, y: false, setScale: false } },
      legend: { live: true },
      hooks: {
        setSelect: [u => {
          if (u.select.width < 5) return;
          const a = u.posToVal(u.select.left, 'x'), b = u.posToVal(u.select.left + u.select.width, 'x');
          u.setSelect({ left: 0, width: 0 }, false);
          setWindow(a, b);
        }],
        draw: [u => {
          if (!first) return;
          first = false;
          drawLanes(u, from, to, m.cols);
          performance.mark('pith:trend:render');
          const ms = performance.measure('pith:trend', 'pith:trend:request', 'pith:trend:render').duration;
          const fetched = performance.measure('pith:trend:fetch', 'pith:trend:request', 'pith:trend:data').duration;
          info.textContent = `${fmtTime(from)} → ${fmtTime(to)}, ${m.xs.length} points, drawn ${ms.toFixed(0)} ms after the request (data ${fetched.toFixed(0)} ms).`;
          chartBox.dataset.ready = '1';
        }],
      },
    };
    lastWidth = width;
    plot = new uPlot(opts, cols, chartBox);
    shown = { from, to, xs: m.xs, cols: m.cols, names: st.tags.slice() };
  }

  // drawLanes draws each text tag as a lane under the plot: a segment per
  // value, from its time to the next value's (or the window's end),
  // placed on the plot's time axis (its x scale is [from, to] across the
  // plotting area). Called at the first draw, once the plot is laid out.
  // Text reaches the page as text.
  function drawLanes(u, from, to, cols) {
    const left = u.over.offsetLeft, w = u.over.clientWidth;
    const x = t => Math.max(0, Math.min(w, (t - from) / (to - from) * w));
    const lanes = [];
    st.tags.forEach((name, i) => {
      const c = cols[i];
      if (!c.text) return;
      const segs = [];
      let cur = c.start, t0 = from;
      const add = (text, a, b) => {
        if (text == null || b <= a) return;
        const l = x(a), r = x(b);
        const seg = el('div', { className: 'seg', title: text + '\n' + fmtTime(a) + ' → ' + fmtTime(b), dataset: { text, from: a, to: b } },
          el('span', null, text));
        seg.style.left = l + 'px';
        seg.style.width = Math.max(1, r - l) + 'px';
        seg.style.background = alpha(segColor(text), 0.28);
        seg.style.borderColor = segColor(text);
        segs.push(seg);
      };
      for (const [t, text] of c.points) {
        if (text === cur) continue;
        add(cur, t0, t);
        cur = text;
        t0 = t;
      }
      add(cur, t0, Math.min(to, Date.now()));
      const track = el('div', { className: 'track' }, ...segs);
      track.style.marginLeft = left + 'px';
      track.style.width = w + 'px';
      lanes.push(el('div', { className: 'lane', dataset: { tag: name }, role: 'group', ariaLabel: name + ' values' },
        el('div', { className: 'lane-name' }, el('i', { className: 'swatch', dataset: { i: i % palette.length } }), name), track));
    });
    if (lanes.length) chartBox.append(el('div', { className: 'lanes' }, ...lanes));
  }

  function destroy() {
    if (plot) { plot.destroy(); plot = null; }
    delete chartBox.dataset.ready;
  }

  csvBtn.addEventListener('click', () => {
    if (!shown) return;
    const head = ['time_ms', 'time'];
    shown.names.forEach((n, i) => {
      if (shown.cols[i].text) return; // text tags: their values are the lane's
      head.push(csvCell(n + ' mean'));
      if (!shown.cols[i].raw) head.push(csvCell(n + ' min'), csvCell(n + ' max'));
    });
    const lines = [head.join(',')];
    shown.xs.forEach((x, j) => {
      const row = [x, new Date(x).toISOString()];
      shown.cols.forEach(c => {
        if (c.text) return;
        row.push(c.mean[j] ?? '');
        if (!c.raw) row.push(c.min[j] ?? '', c.max[j] ?? '');
      });
      lines.push(row.join(','));
    });
    const url = URL.createObjectURL(new Blob([lines.join('\n') + '\n'], { type: 'text/csv' }));
    const a = el('a', { href: url, download: `pith-${shown.from}-${shown.to}.csv` });
    document.body.append(a);
    a.click();
    a.remove();
    setTimeout(() => URL.revokeObjectURL(url), 10_000);
  });

  const onResize = () => {
    const w = chartBox.clientWidth;
    // Redraw at the new resolution only when the width changed enough.
    if (!plot || Math.abs(w - lastWidth) < 40) return;
    load();
  };
  const ro = new ResizeObserver(onResize);
  ro.observe(chartBox);

  changed();
  return () => { ro.disconnect(); if (ctl) ctl.abort(); destroy(); };
}
