// Screenshots of each view at desktop and phone widths, for screens_test.go
// to compare with the committed references. The browser's clock is fixed
// (PITH_NOW), its zone UTC, animations off: the same data gives the same
// pixels. Prints one JSON result per line like run.mjs.
import { chromium } from 'playwright-core';
import { join } from 'node:path';

const env = process.env;
const base = env.PITH_URL, out = env.PITH_SHOTS, now = Number(env.PITH_NOW);
function report(name, ok, detail) { console.log(JSON.stringify({ name, ok: !!ok, detail: detail || '', metrics: {} })); }

const browser = await chromium.launch({ executablePath: env.PITH_CHROMIUM, headless: true, args: ['--no-sandbox', '--font-render-hinting=none'] });
const sizes = { desktop: { width: 1280, height: 800 }, phone: { width: 390, height: 800 } };
const monthFrom = Date.UTC(2026, 4, 1), monthTo = Date.UTC(2026, 5, 1);
const views = [
  ['live', '/#/live', '.live-row'],
  ['trend', `/#/trend?tag=house.power&from=${now - 7 * 864e5}&to=${now}`, '.chart[data-ready="1"]'],
  ['dashboard', '/dashboard#plant', '.widget.trend .uplot'],
  ['energy', '/dashboard#house', '.widget.histogram .bar'],
  ['report', `/dashboard#report?from=${monthFrom}&to=${monthTo}&energy=house.power&tag=room.temp&tariff=flat`, '#rtable'],
  ['display', '/d/' + env.PITH_TOKEN, '.widget.value .big'],
];
for (const [size, viewport] of Object.entries(sizes)) {
  const ctx = await browser.newContext({ viewport, deviceScaleFactor: 1, timezoneId: 'UTC', locale: 'en-GB', colorScheme: 'light', reducedMotion: 'reduce' });
  for (const [name, path, ready] of views) {
    const page = await ctx.newPage();
    await page.clock.setFixedTime(new Date(now));
    try {
      await page.goto(base + path);
      await page.waitForSelector(ready, { timeout: 20000 });
      // Let late widgets and fonts settle.
      await page.waitForFunction(() => !document.querySelector('.wbody:empty'), null, { timeout: 20000 }).catch(() => {});
      await page.evaluate(() => document.fonts.ready);
      await page.waitForTimeout(700);
      // Measured times (the trend's "drawn 12 ms after the request") vary by run: fixed text.
      await page.evaluate(() => {
        const w = document.createTreeWalker(document.body, NodeFilter.SHOW_TEXT);
        for (let n; (n = w.nextNode());) n.nodeValue = n.nodeValue.replace(/\d+ ms/g, 'N ms');
      });
      await page.screenshot({ path: join(out, `${name}-${size}.png`), animations: 'disabled', caret: 'hide' });
      report(`${name} ${size}`, true);
    } catch (e) {
      report(`${name} ${size}`, false, String(e && e.message || e));
    }
    await page.close();
  }
  await ctx.close();
}
await browser.close();
