// Browser tests of the dashboards page, run by dashboards_test.go against a
// real server. Prints one JSON result per line like run.mjs.
import { chromium } from 'playwright-core';
import { readFile, writeFile } from 'node:fs/promises';

const env = process.env;
const base = env.PITH_URL;
function report(name, ok, detail, metrics) {
  console.log(JSON.stringify({ name, ok: !!ok, detail: detail || '', metrics: metrics || {} }));
}
async function check(name, fn) {
  try { const r = await fn(); report(name, r.ok, r.detail, r.metrics); } catch (e) { report(name, false, String(e && e.stack || e)); }
}
const axeSrc = await readFile('node_modules/axe-core/axe.min.js', 'utf8');
async function axe(page, name) {
  await page.addScriptTag({ content: axeSrc });
  const r = await page.evaluate(async () => await globalThis.axe.run(document, { resultTypes: ['violations'] }));
  const bad = r.violations.filter(v => v.impact === 'serious' || v.impact === 'critical');
  report('axe ' + name, bad.length === 0, bad.map(v => `${v.impact} ${v.id} on ${v.nodes.length}: ${v.nodes[0].target}`).join('; '));
}

const browser = await chromium.launch({ executablePath: env.PITH_CHROMIUM, headless: true, args: ['--no-sandbox'] });
const ctx = await browser.newContext({ viewport: { width: 1280, height: 900 }, acceptDownloads: true, bypassCSP: true });
const page = await ctx.newPage();
const errors = [];
page.on('pageerror', e => errors.push(String(e)));
page.on('dialog', d => d.accept());
const api = async path => (await fetch(base + path)).json();
let id = '';

await check('build by keyboard and pointer', async () => {
  await page.goto(base + '/dashboard');
  await page.waitForSelector('#newtitle');
  await axe(page, 'list');
  // Keyboard: type a title, Enter creates and opens it in edit mode.
  await page.focus('#newtitle');
  await page.keyboard.type('Energy room');
  await page.keyboard.press('Enter');
  await page.waitForSelector('#addtype');
  id = decodeURIComponent(new URL(page.url()).hash.slice(1));
  // Keyboard: choose "value", Tab to "Add widget", Enter; type the tag in
  // the dialog, Enter applies.
  await page.focus('#addtype');
  await page.selectOption('#addtype', 'value');
  await page.keyboard.press('Tab');
  await page.keyboard.press('Enter');
  await page.waitForSelector('dialog[open] #cfg-tags');
  await page.focus('#cfg-tags');
  await page.keyboard.type('house.power');
  await page.keyboard.press('Enter');
  await page.waitForSelector('.widget.value');
  // Arrows move it, Shift+arrows resize it.
  await page.focus('.widget.value');
  for (const k of ['ArrowRight', 'ArrowRight', 'ArrowDown', 'Shift+ArrowRight', 'Shift+ArrowDown']) await page.keyboard.press(k);
  // Pointer: add an energy chart and a setpoint with the mouse, drag and resize.
  for (const [type, tag] of [['energy', 'house.power'], ['setpoint', 'valve.sp']]) {
    await page.selectOption('#addtype', type);
    await page.click('text=Add widget');
    await page.click('dialog[open] #cfg-tags');
    await page.fill('dialog[open] #cfg-tags', tag);
    await page.click('dialog[open] button[value=ok]');
    await page.waitForSelector('.widget.' + type);
  }
  const sp = await page.$('.widget.setpoint h2');
  const b = await sp.boundingBox();
  await page.mouse.move(b.x + 10, b.y + 5);
  await page.mouse.down();
  await page.mouse.move(b.x + 10 + 320, b.y + 5, { steps: 5 });
  await page.mouse.up();
  const rz = await (await page.$('.widget.energy .resize')).boundingBox();
  await page.mouse.move(rz.x + 8, rz.y + 8);
  await page.mouse.down();
  await page.mouse.move(rz.x + 8 + 110, rz.y + 8 + 75, { steps: 5 });
  await page.mouse.up();
  await page.click('text=Save');
  await page.waitForSelector('#bstatus:has-text("saved")');
  const saved = await api('/api/v1/dashboards/' + id);
  const w = Object.fromEntries(saved.widgets.map(x => [x.type, x]));
  const okPlace = w.value.x === 2 && w.value.y === 1 && w.value.w === 4 && w.value.h === 3 && w.setpoint.x === 3 && w.energy.w === 7;
  // Reload: the same grid.
  const before = await page.$$eval('.widget', ws => ws.map(x => x.dataset.id + x.style.gridColumn + x.style.gridRow).join('|'));
  await page.reload();
  await page.waitForSelector('.widget.energy');
  const after = await page.$$eval('.widget', ws => ws.map(x => x.dataset.id + x.style.gridColumn + x.style.gridRow).join('|'));
  return { ok: okPlace && before === after && saved.widgets.length === 3, detail: JSON.stringify(saved.widgets.map(x => [x.type, x.x, x.y, x.w, x.h])) + (before === after ? '' : ' reload changed: ' + before + ' vs ' + after) };
});

await check('setpoint write', async () => {
  await page.fill('.widget.setpoint input', '42');
  await page.click('.widget.setpoint button');
  await page.waitForSelector('#bstatus:has-text("written")');
  return { ok: true };
});

await check('kWh zoom years to hours', async () => {
  await page.waitForSelector('.widget.energy .bar');
  // Zoom out to years, then in: year -> month -> day -> hour.
  // Each click waits for the chart to show its new level: a button read as
  // enabled before a slow render turned it disabled (at the year level)
  // made a click wait 30 s for it in CI.
  const out = page.locator('.widget.energy button:has-text("Zoom out")');
  const level = async () => ((await page.textContent('.widget.energy p.muted')) || '').split(' · ')[0];
  for (let i = 0; i < 4; i++) {
    const was = await level();
    if (was === 'year') break;
    await out.click();
    await page.waitForFunction(prev => {
      const p = document.querySelector('.widget.energy p.muted');
      return p && p.textContent.split(' · ')[0] !== prev;
    }, was);
  }
  const seen = [];
  for (const step of ['year', 'month', 'day', 'hour']) {
    await page.waitForSelector(`.widget.energy p:has-text("${step} ·")`);
    seen.push(step);
    if (step === 'hour') break;
    // The last bar with data (a locator: found again if a slow render
    // replaced the bars), by keyboard: the setpoint dragged over the
    // chart's bottom row above covers the short bars.
    const bar = page.locator('.widget.energy button.bar:not([aria-label*="no data"])').last();
    await bar.focus();
    await page.keyboard.press('Enter');
  }
  const hours = await page.$$eval('.widget.energy .bar', b => b.length);
  await axe(page, 'editor');
  return { ok: seen.length === 4 && hours >= 23 && hours <= 25, detail: seen.join('>') + ' ' + hours + ' hour bars' };
});

await check('public page without a key', async () => {
  await page.click('text=Edit');
  await page.check('#public');
  await page.click('text=Save');
  await page.waitForSelector('#publink');
  const href = await page.getAttribute('#publink', 'href');
  const anon = await browser.newContext({ viewport: { width: 390, height: 800 }, bypassCSP: true });
  const p2 = await anon.newPage();
  const r = await p2.goto(base + href);
  await p2.waitForSelector('.widget.value .big');
  const setpoints = await p2.$$('.widget.setpoint');
  const txt = await p2.textContent('.widget.value .big');
  await axe(p2, 'public (phone)');
  await anon.close();
  return { ok: r.status() === 200 && setpoints.length === 0 && /\d/.test(txt), detail: href + ' shows ' + txt };
});

await check('report CSV equals the API', async () => {
  // Last month: a finished period, so the two reads agree to the digit
  // (the hour in progress grows between them).
  const now = new Date(Number(env.PITH_NOW));
  const last = new Date(now.getFullYear(), now.getMonth() - 1, 1);
  const month = `${last.getFullYear()}-${String(last.getMonth() + 1).padStart(2, '0')}`;
  await page.goto(base + '/dashboard#report');
  await page.waitForSelector('#rmonth');
  await page.fill('#rmonth', month);
  await page.fill('#renergy', 'house.power');
  await page.fill('#rtags', 'room.temp');
  await page.click('text=Run');
  await page.waitForSelector('#rtable');
  await axe(page, 'report');
  const [dl] = await Promise.all([page.waitForEvent('download'), page.click('#rcsv')]);
  const got = await readFile(await dl.path(), 'utf8');
  const want = await (await fetch(`${base}/api/v1/report?month=${month}&energy=house.power&tag=room.temp&format=csv`)).text();
  const js = await api(`/api/v1/report?month=${month}&energy=house.power&tag=room.temp`);
  const total = got.split('\n').find(l => l.startsWith('total,'));
  return { ok: got === want && total && Number(total.split(',')[1]) === js.energy[0].kwh, detail: total };
});

await check('solar, heat pump and histogram views', async () => {
  const widgets = [
    { id: 's', type: 'energy', view: 'solar', x: 0, y: 0, w: 4, h: 4, tags: ['house.power', 'house.power'], range: '7d' },
    { id: 'h', type: 'energy', view: 'heatpump', x: 4, y: 0, w: 4, h: 4, tags: ['house.power', 'house.power'], range: '7d' },
    { id: 'g', type: 'histogram', x: 8, y: 0, w: 4, h: 4, tags: ['room.temp'], range: '7d', bins: 6 },
    { id: 't', type: 'text', x: 0, y: 4, w: 12, h: 2, text: '# <img src=x onerror=alert(1)>\n**bold** and *it*' }];
  const d = await (await fetch(base + '/api/v1/dashboards', { method: 'POST', body: JSON.stringify({ title: 'Views', widgets }) })).json();
  await page.goto(base + '/dashboard#' + d.id);
  await page.waitForSelector('.widget.histogram .bar');
  await page.waitForSelector('.widget.energy table');
  const solar = await page.textContent('[data-id=s]');
  const hp = await page.textContent('[data-id=h]');
  const bars = await page.$$eval('.widget.histogram .bar', b => b.length);
  const imgs = await page.$$eval('.widget.text img', i => i.length);
  const strong = await page.textContent('.widget.text strong');
  await axe(page, 'energy views');
  return { ok: solar.includes('self-consumption100 %') && hp.includes('COP1.00') && bars === 6 && imgs === 0 && strong === 'bold',
    detail: `solar "${solar}" heat pump "${hp}" ${bars} histogram bars, ${imgs} img from markdown` };
});

await check('lamp by alarm state, live, public', async () => {
  const set = v => fetch(base + '/test/set?v=' + v, { method: 'POST' });
  const ack = () => fetch(base + '/api/v1/alarms/ack', { method: 'POST', body: JSON.stringify({ id: 'boiler.hot' }) });
  await set(20);
  const d = await (await fetch(base + '/api/v1/dashboards', { method: 'POST', body: JSON.stringify({ title: 'Boiler', widgets: [
    { id: 'l', type: 'lamp', color_by: 'alarm', x: 0, y: 0, w: 3, h: 2, tags: ['boiler.temp'] }] }) })).json();
  d.public = true;
  const pubd = await (await fetch(base + '/api/v1/dashboards/' + d.id, { method: 'PUT', body: JSON.stringify(d) })).json();
  const anon = await browser.newContext({ viewport: { width: 390, height: 800 }, bypassCSP: true });
  const pp = await anon.newPage();
  await page.goto(base + '/dashboard#' + d.id);
  await page.reload(); // out of the edit mode of the checks before
  await pp.goto(base + '/d/' + pubd.token);
  const seen = [];
  for (const [act, cls] of [[() => 0, 'alarm-normal'], [() => set(95), 'alarm-active'], [ack, 'alarm-acked'], [() => set(20), 'alarm-normal'],
    [() => set(95), 'alarm-active'], [() => set(20), 'alarm-returned']]) {
    await act();
    for (const p of [page, pp]) {
      try { await p.waitForSelector('.widget.lamp .lamp.' + cls, { timeout: 8000 }); }
      catch (e) { return { ok: false, detail: `want ${cls} after ${seen.join('; ')}, ${p === pp ? 'public' : 'editor'} page shows ${await p.innerHTML('#board')}` }; }
    }
    seen.push(cls + ': ' + await pp.textContent('.widget.lamp .wbody p:last-child'));
  }
  await axe(pp, 'alarm lamp (public)');
  const leak = await (await fetch(base + '/d/' + pubd.token + '/api/v1/alarms')).text();
  await anon.close();
  await ack();
  return { ok: !leak.includes('acked_by'), detail: seen.join('; ') };
});

await check('first render of a 12-widget dashboard over a year', async () => {
  const types = ['value', 'gauge', 'lamp', 'trend', 'multigraph', 'bars', 'table', 'text', 'energy', 'histogram', 'trend', 'value'];
  const widgets = types.map((type, i) => ({ id: 'w' + i, type, x: (i % 4) * 3, y: Math.floor(i / 4) * 4, w: 3, h: 4, tags: type === 'text' ? undefined : (type === 'multigraph' || (type === 'trend' && i > 5) ? ['house.power', 'room.temp'] : ['house.power']), range: ['trend', 'multigraph', 'histogram'].includes(type) ? '1y' : undefined, bucket: type === 'bars' ? 'month' : undefined, text: type === 'text' ? '# Twelve' : undefined }));
  const r = await fetch(base + '/api/v1/dashboards', { method: 'POST', body: JSON.stringify({ title: 'Twelve', widgets }) });
  const d = await r.json();
  const times = [];
  for (let i = 0; i < 5; i++) {
    await page.goto('about:blank');
    const t0 = Date.now();
    await page.goto(base + '/dashboard#' + d.id);
    await page.waitForFunction(() => document.querySelectorAll('.widget').length === 12 &&
      document.querySelectorAll('.widget .wbody:empty').length === 0 && document.querySelectorAll('.uplot').length === 3 &&
      document.querySelectorAll('.widget.energy .bar').length > 0 && document.querySelectorAll('.widget.histogram .bar').length > 0);
    times.push(Date.now() - t0);
  }
  times.sort((a, b) => a - b);
  const slow = await page.evaluate(() => performance.getEntriesByType('resource').sort((a, b) => b.duration - a.duration).slice(0, 3)
    .map(e => new URL(e.name).pathname + ' ' + Math.round(e.duration) + ' ms').join(', '));
  // PITH_TIMELINE=FILE keeps the requests of the last load (path, start, duration ms) for profiling.
  if (env.PITH_TIMELINE) await writeFile(env.PITH_TIMELINE, await page.evaluate(() => JSON.stringify(performance.getEntriesByType('resource').map(e => [new URL(e.name).pathname + new URL(e.name).search.slice(0, 50), Math.round(e.startTime), Math.round(e.duration)]))));
  return { ok: true, detail: 'median ms ' + times[2] + '; slowest requests of the last load: ' + slow, metrics: { dashboard12_ms: times[2] } };
});

await check('first render of a 3-year kWh-per-day chart', async () => {
  const r = await fetch(base + '/api/v1/dashboards', { method: 'POST', body: JSON.stringify({ title: 'Days', widgets: [{ id: 'k', type: 'energy', x: 0, y: 0, w: 12, h: 6, tags: ['house.power'], bucket: 'day', range: '3y' }] }) });
  const d = await r.json();
  // Three years of days: the zoomer's day view over 1095 days.
  const times = [];
  for (let i = 0; i < 5; i++) {
    await page.goto('about:blank');
    const t0 = Date.now();
    await page.goto(base + '/dashboard#' + d.id + '');
    await page.evaluate(() => 0);
    await page.waitForFunction(() => document.querySelectorAll('.widget.energy .bar').length >= 1095);
    times.push(Date.now() - t0);
  }
  const t3 = Date.now();
  const res = await fetch(`${base}/api/v1/energy?tag=house.power&from=${Number(env.PITH_NOW) - 1095 * 864e5}&to=${env.PITH_NOW}&bucket=day`);
  const j = await res.json();
  const apiMs = Date.now() - t3;
  times.sort((a, b) => a - b);
  return { ok: j.buckets.length >= 1095, detail: `median page ms ${times[2]} (1095+ day bars), 3-year API ${apiMs} ms for ${j.buckets.length} days`, metrics: { kwh3y_page_ms: times[2], kwh3y_api_ms: apiMs } };
});

report('no page errors', errors.length === 0, errors.join('; '));
await browser.close();
