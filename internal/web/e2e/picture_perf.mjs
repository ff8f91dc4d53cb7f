// Measures the browser's CPU on a process picture of 1,000 bound elements,
// run by TestBrowserPicturePerf: first with the live stream open and no
// value changing (the floor), then with every tag changing twice a
// second. Main-thread busy time comes from CDP Performance metrics
// (TaskDuration); the CPU time of all Chromium processes (renderer, GPU,
// browser) from /proc. Prints one JSON result per line, as run.mjs.
import { chromium } from 'playwright-core';
import { readFileSync, writeFileSync, readdirSync } from 'node:fs';

const env = process.env;
const base = env.PITH_URL;
const seconds = 20;

function report(name, ok, detail, metrics) {
  console.log(JSON.stringify({ name, ok: !!ok, detail: detail || '', metrics: metrics || {} }));
}

// chromiumCPU sums utime+stime (seconds) of every process descending
// from this node process: the Chromium it launched (browser, renderer,
// GPU, utility), not another test's.
let counted = 0;
function chromiumCPU() {
  const hz = 100; // USER_HZ on Linux
  const procs = new Map(); // pid -> [ppid, ticks]
  for (const pid of readdirSync('/proc').filter(x => /^\d+$/.test(x))) {
    try {
      const st = readFileSync(`/proc/${pid}/stat`, 'utf8');
      const f = st.slice(st.lastIndexOf(')') + 2).split(' ');
      procs.set(Number(pid), [Number(f[1]), Number(f[11]) + Number(f[12])]);
    } catch { /* the process ended */ }
  }
  let ticks = 0;
  counted = 0;
  for (const [pid, [, t]] of procs) {
    if (pid === process.pid) continue;
    for (let p = pid, n = 0; p > 1 && n < 64; n++) {
      const e = procs.get(p);
      if (!e) break;
      if (e[0] === process.pid) { ticks += t; counted++; break; }
      p = e[0];
    }
  }
  return ticks / hz;
}

const browser = await chromium.launch({ executablePath: env.PITH_CHROMIUM, headless: true, args: ['--no-sandbox'] });
const page = await browser.newPage({ viewport: { width: 1600, height: 900 } });
const cdp = await page.context().newCDPSession(page);
await cdp.send('Performance.enable');
async function metrics() {
  const m = {};
  for (const x of (await cdp.send('Performance.getMetrics')).metrics) m[x.name] = x.value;
  return m;
}
async function measure(phase) {
  writeFileSync(env.PITH_PHASE, phase);
  await page.waitForTimeout(2000); // settle into the phase
  const [u0, v0] = await page.evaluate(() => [window.pithPicture.updates, window.pithPicture.values]);
  const m0 = await metrics(), c0 = chromiumCPU(), t0 = performance.now();
  await page.waitForTimeout(seconds * 1000);
  const m1 = await metrics(), c1 = chromiumCPU(), t1 = performance.now();
  const [u1, v1] = await page.evaluate(() => [window.pithPicture.updates, window.pithPicture.values]);
  const wall = (t1 - t0) / 1000;
  const r = {
    main_thread_pct: 100 * (m1.TaskDuration - m0.TaskDuration) / wall,
    script_pct: 100 * (m1.ScriptDuration - m0.ScriptDuration) / wall,
    layout_style_pct: 100 * ((m1.LayoutDuration - m0.LayoutDuration) + (m1.RecalcStyleDuration - m0.RecalcStyleDuration)) / wall,
    all_chromium_pct: 100 * (c1 - c0) / wall,
    messages_per_s: (u1 - u0) / wall,
    values_per_s: (v1 - v0) / wall,
    processes: counted,
  };
  for (const k in r) r[k] = Math.round(r[k] * 10) / 10;
  return r;
}
try {
  await page.goto(base + '/pictures?id=perf');
  await page.waitForFunction(() => window.pithPicture && window.pithPicture.updates > 0, null, { timeout: 30000 });
  const bound = await page.evaluate(() => window.pithPicture.bound);
  report('picture bound', bound === 1000, bound + ' bound elements');
  const idle = await measure('idle');
  report('floor: live stream open, no change', true, JSON.stringify(idle), idle);
  const busy = await measure('busy');
  // Check the picture follows the feed.
  const ok = busy.values_per_s >= 1500 && busy.all_chromium_pct < 20;
  report('1,000 elements updated twice a second', ok, JSON.stringify(busy), busy);
} catch (e) {
  report('measurement', false, String(e && e.stack || e));
}
await browser.close();
