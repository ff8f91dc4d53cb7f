// Browser tests of the Pith dashboard, run by e2e_test.go against a real
// server (see there for the data). Prints one JSON result per line:
// {"name", "ok", "detail", "metrics"}; the Go test fails on any !ok.
import { chromium } from 'playwright-core';
import { readFile } from 'node:fs/promises';
import { join } from 'node:path';

const env = process.env;
const base = env.PITH_URL;
const shots = env.PITH_SHOTS;
const feedFrom = Number(env.PITH_FEED_FROM), feedTo = Number(env.PITH_FEED_TO);
const hourStart = Number(env.PITH_HOUR_START);
const [gapFrom, gapTo] = env.PITH_GAP.split(',').map(Number);
const liveTags = Number(env.PITH_LIVE_TAGS);
const xssTag = '<img src=x onerror=alert(1)>';
const liveXSSTag = 'live.<img/src=x/onerror=alert(2)>';

// Targets of the dashboard issue. The byte budget is deterministic and
// always enforced; the time and CPU targets are measured and reported on
// every run but fail the test only with PITH_E2E_TARGETS=1 (a quiet
// machine), because a shared 2-core box makes them noisy.
const maxTrendMs = 150, maxFirstLoadBytes = 150 * 1024, maxLiveCPU = 20;
const enforce = env.PITH_E2E_TARGETS === '1';
const target = (met, what) => met ? '' : (enforce ? '' : 'OVER TARGET (not enforced): ') + what;

function report(name, ok, detail, metrics) {
  console.log(JSON.stringify({ name, ok: !!ok, detail: detail || '', metrics: metrics || {} }));
}

// check runs one named test and turns exceptions into failures.
async function check(name, fn) {
  try {
    const r = await fn();
    report(name, r.ok, r.detail, r.metrics);
  } catch (e) {
    report(name, false, String(e && e.stack || e));
  }
}

// axe runs axe-core on the page and reports serious and critical
// violations as a failed check of its own.
const axeSrc = await readFile('node_modules/axe-core/axe.min.js', 'utf8');
async function axe(pg, name) {
  await pg.addScriptTag({ content: axeSrc });
  const r = await pg.evaluate(async () => await globalThis.axe.run(document, { resultTypes: ['violations'] }));
  const bad = r.violations.filter(v => v.impact === 'serious' || v.impact === 'critical');
  report('axe ' + name, bad.length === 0, bad.map(v => `${v.impact} ${v.id} on ${v.nodes.length}: ${v.nodes.slice(0, 3).map(n => n.target + ' ' + (n.any[0] && n.any[0].message || '')).join(' / ')}`).join('; '));
}

const browser = await chromium.launch({ executablePath: env.PITH_CHROMIUM, headless: true, args: ['--no-sandbox'] });
const problems = []; // page errors, console errors (CSP violations among them), alerts
let alerts = 0;

async function newPage(opts) {
  const ctx = await browser.newContext({ viewport: { width: 1280, height: 800 }, acceptDownloads: true, ...opts });
  const page = await ctx.newPage();
  page.on('pageerror', e => problems.push('page error: ' + e.message));
  page.on('console', m => { if (m.type() === 'error') problems.push('console: ' + m.text()); });
  page.on('dialog', async d => {
    if (d.type() === 'alert') { alerts++; await d.dismiss(); } else { await d.accept(); }
  });
  return page;
}

const hourOf = t => Math.floor((t - hourStart) / 3600e3);

function parseCSV(text) {
  const lines = text.trim().split('\n');
  return { head: lines[0].split(','), rows: lines.slice(1).map(l => l.split(',')) };
}

async function downloadCSV(page) {
  const [dl] = await Promise.all([page.waitForEvent('download'), page.click('button:text("CSV")')]);
  return parseCSV(await readFile(await dl.path(), 'utf8'));
}

async function chartReady(page) {
  await page.waitForSelector('.chart[data-ready="1"]', { timeout: 30000 });
  return page.evaluate(() => {
    const last = n => { const m = performance.getEntriesByName(n, 'measure'); return m.length ? m[m.length - 1].duration : NaN; };
    return [last('pith:trend'), last('pith:trend:fetch')];
  });
}

// rowOf returns the live row of a tag: its class, value and age text.
function rowOf(page, name) {
  return page.evaluate(n => {
    for (const r of document.querySelectorAll('.live-row')) {
      const a = r.querySelector('.c-name a');
      if (a && a.textContent === n) return { cls: r.className, val: r.querySelector('.c-val').textContent, q: r.querySelector('.c-q').textContent };
    }
    return null;
  }, name);
}

const page = await newPage();
const cdp = await page.context().newCDPSession(page);

await check('first load under 150 KB gzip', async () => {
  await cdp.send('Network.enable');
  let bytes = 0, n = 0;
  cdp.on('Network.loadingFinished', e => { bytes += e.encodedDataLength; n++; });
  await page.goto(base + '/#/live', { waitUntil: 'load' });
  await page.waitForFunction(k => document.querySelectorAll('.live-row').length > k, liveTags, { timeout: 30000 });
  await page.waitForTimeout(500);
  const enc = await page.evaluate(async () => (await fetch('/static/js/app.js', { headers: { 'Accept-Encoding': 'gzip' } })).headers.get('content-encoding'));
  return { ok: bytes <= maxFirstLoadBytes, detail: `${(bytes / 1024).toFixed(1)} KB in ${n} responses (target ${maxFirstLoadBytes / 1024} KB)`, metrics: { kb: bytes / 1024, encoding_gzip: enc === 'gzip' ? 1 : 0 } };
});

await check('live page updates and flags', async () => {
  const a = await rowOf(page, 'live.t0005');
  await page.waitForTimeout(2500);
  const b = await rowOf(page, 'live.t0005');
  const stale = await rowOf(page, 'live.stale');
  const bad = await rowOf(page, 'live.bad');
  const x = await rowOf(page, liveXSSTag);
  const imgs = await page.evaluate(() => document.querySelectorAll('img').length);
  await page.screenshot({ path: join(shots, 'live.png') });
  const errs = [];
  if (!a || !b || a.val === b.val) errs.push(`value did not change: ${a && a.val} -> ${b && b.val}`);
  if (!stale || !stale.cls.includes('stale')) errs.push('stale row not flagged: ' + JSON.stringify(stale));
  if (!bad || !bad.cls.includes('bad')) errs.push('bad row not flagged: ' + JSON.stringify(bad));
  if (!x) errs.push('hostile live tag name not shown as text');
  if (imgs) errs.push(imgs + ' <img> elements on the live page');
  // Filtering.
  await page.fill('input[type=search]', 't000');
  await page.waitForTimeout(400);
  const shown = await page.evaluate(() => [...document.querySelectorAll('.live-body .live-row')].filter(r => !r.hidden).length);
  if (shown !== 10) errs.push(`filter "t000" shows ${shown} rows, want 10`);
  await page.fill('input[type=search]', '');
  await page.waitForTimeout(400);
  return { ok: !errs.length, detail: errs.join('; ') || `${a.val} -> ${b.val}` };
});

await check('live page CPU with 1000 tags', async () => {
  await cdp.send('Performance.enable', { timeDomain: 'timeTicks' });
  const metric = (ms, k) => ms.metrics.find(m => m.name === k)?.value ?? 0;
  const m0 = await cdp.send('Performance.getMetrics');
  await page.waitForTimeout(10000);
  const m1 = await cdp.send('Performance.getMetrics');
  const dt = metric(m1, 'Timestamp') - metric(m0, 'Timestamp');
  const cpu = 100 * (metric(m1, 'TaskDuration') - metric(m0, 'TaskDuration')) / dt;
  const script = 100 * (metric(m1, 'ScriptDuration') - metric(m0, 'ScriptDuration')) / dt;
  const layout = 100 * (metric(m1, 'LayoutDuration') + metric(m1, 'RecalcStyleDuration') - metric(m0, 'LayoutDuration') - metric(m0, 'RecalcStyleDuration')) / dt;
  return { ok: cpu <= maxLiveCPU || !enforce, detail: target(cpu <= maxLiveCPU, '') + `main thread busy ${cpu.toFixed(1)}% of one core over ${dt.toFixed(1)} s (script ${script.toFixed(1)}%, style+layout ${layout.toFixed(1)}%; target ${maxLiveCPU}%)`, metrics: { cpu_percent: cpu, script_percent: script, layout_percent: layout } };
});

await check('trend of the whole feed', async () => {
  const times = [], fetches = [];
  for (let i = 0; i < 3; i++) {
    await page.goto(base + `/#/trend?tag=power&from=${feedFrom}&to=${feedTo}`);
    if (i) await page.reload();
    const [t, f] = await chartReady(page);
    times.push(t);
    fetches.push(f);
  }
  await page.screenshot({ path: join(shots, 'trend-feed.png') });
  const first = times[0];
  return { ok: first <= maxTrendMs || !enforce, detail: target(first <= maxTrendMs, '') + `first render ${first.toFixed(1)} ms after the data request, of which data ${fetches[0].toFixed(1)} ms (then ${times.slice(1).map(t => t.toFixed(1)).join(', ')} ms; target ${maxTrendMs} ms)`, metrics: { first_ms: first, first_fetch_ms: fetches[0], warm_ms: Math.min(...times.slice(1)) } };
});

await check('trend values, gap, zoom, CSV', async () => {
  const from = hourStart, to = hourStart + 48 * 3600e3;
  await page.goto(base + `/#/trend?tag=test.hour&from=${from}&to=${to}`);
  await chartReady(page);
  const errs = [];
  let csv = await downloadCSV(page);
  if (csv.head.join() !== 'time_ms,time,"test.hour mean","test.hour min","test.hour max"') errs.push('CSV head ' + csv.head.join());
  const w = Number(csv.rows[1][0]) - Number(csv.rows[0][0]);
  let empty = 0, full = 0;
  for (const r of csv.rows) {
    const t = Number(r[0]);
    if (r[2] === '') {
      empty++;
      const h = hourOf(t);
      if (hourOf(t + w - 1) < gapFrom || h >= gapTo) errs.push(`empty bucket at hour ${h} outside the gap`);
      continue;
    }
    full++;
    const [mean, mn, mx] = [Number(r[2]), Number(r[3]), Number(r[4])];
    if (!(hourOf(t) <= mn && mn <= mean && mean <= mx && mx <= hourOf(t + w - 1))) errs.push(`bucket ${t}: ${mn} <= ${mean} <= ${mx} outside hours ${hourOf(t)}..${hourOf(t + w - 1)}`);
  }
  if (!empty) errs.push('the 3-hour hole drew no gap');
  await page.screenshot({ path: join(shots, 'trend-hours.png') });
  // Zoom: drag across 2% of the plot (about an hour), which is few
  // enough samples to be drawn raw.
  const over = await page.locator('.u-over').boundingBox();
  const y = over.y + over.height / 2;
  await page.mouse.move(over.x + over.width * 0.10, y);
  await page.mouse.down();
  await page.mouse.move(over.x + over.width * 0.11, y, { steps: 3 });
  await page.mouse.move(over.x + over.width * 0.12, y, { steps: 3 });
  await page.mouse.up();
  await page.waitForFunction(f => !location.hash.includes('from=' + f), from);
  await chartReady(page);
  const hash = new URLSearchParams((await page.evaluate(() => location.hash)).split('?')[1]);
  const zf = Number(hash.get('from')), zt = Number(hash.get('to'));
  csv = await downloadCSV(page);
  let bad = 0;
  for (const r of csv.rows) {
    const t = Number(r[0]);
    if (t < zf || t >= zt) { bad++; continue; }
    if (r[2] !== '' && Number(r[2]) !== hourOf(t)) bad++;
  }
  if (bad) errs.push(`${bad} zoomed rows outside the window or with a wrong value`);
  if (!(zt - zf > 30 * 60e3 && zt - zf < 90 * 60e3)) errs.push(`zoom window ${(zt - zf) / 60e3} min, want about an hour`);
  if (csv.head.length !== 3) errs.push('zoomed CSV is not raw: ' + csv.head.join());
  await page.screenshot({ path: join(shots, 'trend-zoomed.png') });
  // A digital tag as steps, beside the hour tag (two units, two axes).
  await page.goto(base + `/#/trend?tag=test.valve_open&tag=test.hour&range=1d`);
  await chartReady(page);
  await page.screenshot({ path: join(shots, 'trend-digital.png') });
  return { ok: !errs.length, detail: errs.slice(0, 5).join('; ') || `${full} buckets checked, ${empty} empty in the gap; zoomed ${csv.rows.length} raw rows`, metrics: { buckets: full, gap_buckets: empty } };
});

await check('trend text lane', async () => {
  // test.state holds a state every two hours over the hour tag's 48 hours
  // (Idle, Heating, Holding, Cooling, ...; the sixth a hostile string):
  // drawn as a lane of 24 labelled segments on the plot's time axis.
  const from = hourStart, to = hourStart + 48 * 3600e3;
  const errs = [];
  for (const hash of [`tag=test.hour&tag=test.state&from=${from}&to=${to}`, `tag=test.state&from=${from}&to=${to}`]) {
    await page.goto(base + '/#/trend?' + hash);
    await chartReady(page);
    await page.waitForSelector('.lane[data-tag="test.state"] .seg');
    const r = await page.evaluate(() => {
      const over = document.querySelector('.u-over').getBoundingClientRect();
      const segs = [...document.querySelectorAll('.lane[data-tag="test.state"] .seg')].map(s => {
        const b = s.getBoundingClientRect();
        return { text: s.textContent, left: b.left - over.left, width: b.width, from: Number(s.dataset.from) };
      });
      return { segs, plotWidth: over.width, html: document.querySelector('.lane').innerHTML.includes('<img') };
    });
    const want = ['Idle', 'Heating', 'Holding', 'Cooling'];
    if (r.segs.length !== 24) errs.push(`${hash}: ${r.segs.length} segments, want 24`);
    r.segs.forEach((sg, k) => {
      const w = k === 5 ? '<img src=x onerror=alert(5)>' : want[k % 4];
      if (sg.text !== w) errs.push(`segment ${k}: ${JSON.stringify(sg.text)}, want ${JSON.stringify(w)}`);
      if (sg.from !== from + k * 2 * 3600e3) errs.push(`segment ${k} starts at ${sg.from}`);
      const wantLeft = r.plotWidth * k / 24, wantWidth = r.plotWidth / 24;
      if (Math.abs(sg.left - wantLeft) > 2 || Math.abs(sg.width - wantWidth) > 2) errs.push(`segment ${k} at ${sg.left.toFixed(1)}+${sg.width.toFixed(1)} px, want ${wantLeft.toFixed(1)}+${wantWidth.toFixed(1)} on the plot's axis`);
    });
    if (r.html) errs.push('the hostile text became an element');
    await page.screenshot({ path: join(shots, 'trend-text-' + (hash.includes('test.hour') ? 'mixed' : 'alone') + '.png') });
  }
  return { ok: !errs.length && !alerts, detail: errs.slice(0, 5).join('; ') || '24 segments in place, both with a numeric tag and alone', metrics: {} };
});

await check('hostile tag name shows as text', async () => {
  const errs = [];
  await page.goto(base + '/#/tags?q=img');
  await page.waitForSelector('table.tags tbody tr');
  const cells = await page.evaluate(() => [...document.querySelectorAll('table.tags tbody tr:not([hidden]) td')].map(td => td.textContent));
  if (!cells.includes(xssTag)) errs.push('tag name cell missing: ' + JSON.stringify(cells.slice(0, 8)));
  if (!cells.includes('<script>alert(3)</script>')) errs.push('description not shown as text');
  await page.screenshot({ path: join(shots, 'tags-xss.png') });
  await page.goto(base + '/#/trend?' + new URLSearchParams({ tag: xssTag, range: 'all' }));
  await chartReady(page);
  const chip = await page.evaluate(() => document.querySelector('.chip')?.firstChild?.nextSibling?.textContent);
  if (chip !== xssTag) errs.push('trend chip shows ' + JSON.stringify(chip));
  await page.screenshot({ path: join(shots, 'trend-xss.png') });
  const imgs = await page.evaluate(() => document.querySelectorAll('img, b').length);
  if (imgs) errs.push(imgs + ' injected elements');
  if (alerts) errs.push(alerts + ' alert dialogs fired');
  return { ok: !errs.length, detail: errs.join('; ') || 'shown as text in Tags, Trend and Live' };
});

await check('system page draws; FREEZE streams', async () => {
  await page.goto(base + '/#/system');
  await page.waitForFunction(() => document.querySelectorAll('.sys-chart[data-ready="1"]').length >= 6, null, { timeout: 20000 });
  await page.fill('input[aria-label="Freeze seconds"]', '3');
  await page.fill('input[aria-label="Watch seconds"]', '5');
  await page.click('button:text("FREEZE")');
  await page.waitForFunction(() => document.querySelector('.freeze-out').textContent.includes('"done"'), null, { timeout: 10000 });
  await page.screenshot({ path: join(shots, 'system.png'), fullPage: true });
  const out = await page.evaluate(() => document.querySelector('.freeze-out').textContent);
  return { ok: out.split('\n').filter(Boolean).length === 3, detail: out.trim().split('\n').join(' | ') };
});

await check('public display', async () => {
  await page.goto(base + '/display');
  await page.waitForSelector('body[data-ready="1"]');
  const tiles = await page.evaluate(() => [...document.querySelectorAll('.tile')].map(t => [t.querySelector('.label').textContent, t.querySelector('.num').textContent]));
  await page.screenshot({ path: join(shots, 'display.png') });
  const ok = tiles.length === 3 && tiles[0][1] !== '—' && tiles[1][1] === '47.0' && tiles[2][1] === '—';
  return { ok, detail: JSON.stringify(tiles) };
});

await check('phone layout', async () => {
  const phone = await newPage({ viewport: { width: 390, height: 844 }, isMobile: true, hasTouch: true, deviceScaleFactor: 2 });
  const errs = [];
  for (const [name, hash, sel] of [['live', '#/live', '.live-row'], ['trend', `#/trend?tag=power&range=7d`, '.chart[data-ready="1"]'], ['system', '#/system', '.sys-chart'], ['tags', '#/tags', 'table.tags tbody tr']]) {
    await phone.goto(base + '/' + hash);
    await phone.waitForSelector(sel, { timeout: 20000 });
    await phone.waitForTimeout(300);
    const over = await phone.evaluate(() => document.documentElement.scrollWidth - innerWidth);
    if (over > 1 && name !== 'tags') errs.push(`${name} overflows by ${over}px`);
    await phone.screenshot({ path: join(shots, `phone-${name}.png`) });
  }
  await phone.context().close();
  return { ok: !errs.length, detail: errs.join('; ') };
});

// Every view through axe-core, in a context of its own that lets the
// checker's inline script past the page's CSP (the other pages keep it).
{
  const ax = await newPage({ bypassCSP: true });
  for (const [name, path, sel] of [['live', '/#/live', '.live-row[role=row] + .live-row, .live-body .live-row'], ['trend', '/#/trend?tag=test.hour&range=1d', '.uplot'],
    ['tags', '/#/tags', 'table, .tags, main *'], ['system', '/#/system', '.uplot, .card'], ['key', '/#/settings', 'input'], ['display', '/display', 'main *, .tile']]) {
    await ax.goto(base + path);
    await ax.waitForSelector(sel, { timeout: 10000 }).catch(() => {});
    await ax.waitForTimeout(500);
    await axe(ax, name);
  }
  await ax.context().close();
}

await check('no page errors or CSP violations', async () => ({ ok: !problems.length, detail: problems.slice(0, 5).join(' | ') }));

await browser.close();
