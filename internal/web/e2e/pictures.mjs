// Browser test of process pictures, run by pictures_test.go against a
// running Pith with two Modbus setpoints (operators may write boiler.*
// only) and a hostile picture planted in its data directory: the first
// admin sets up, adds an operator and a viewer and composes a picture;
// the operator opens it, writes the permitted setpoint from its faceplate
// and is refused the forbidden one with a clear message; the viewer's
// faceplate has no control; the audit journal names the person of each
// write; the hostile picture renders inert. Prints one JSON result per
// line, as run.mjs.
import { chromium } from 'playwright-core';

const env = process.env;
const base = env.PITH_URL, setupLink = env.PITH_SETUP_LINK;
const pw = 'correct horse battery';
const problems = [];

function report(name, ok, detail, metrics) {
  console.log(JSON.stringify({ name, ok: !!ok, detail: detail || '', metrics: metrics || {} }));
}
async function check(name, fn) {
  try {
    const r = await fn();
    report(name, r === undefined ? true : r.ok, r && r.detail);
    return true;
  } catch (e) {
    report(name, false, String(e && e.stack || e));
    return false;
  }
}

const browser = await chromium.launch({ executablePath: env.PITH_CHROMIUM, headless: true, args: ['--no-sandbox'] });
const dialogs = [];
const foreign = [];
async function person() {
  const ctx = await browser.newContext({ viewport: { width: 1280, height: 800 } });
  const page = await ctx.newPage();
  page.on('pageerror', e => problems.push('page error: ' + e.message));
  page.on('dialog', d => { dialogs.push(d.message()); d.dismiss(); });
  page.on('request', r => { if (!r.url().startsWith(base) && !r.url().startsWith('data:')) foreign.push(r.url()); });
  page.on('console', m => {
    // 401/403 answers the test provokes, and the policy refusing what the
    // hostile picture tries, show as console errors.
    if (m.type() === 'error' && !/status of 40[13]|Content Security Policy/.test(m.text())) problems.push('console: ' + m.text());
  });
  return page;
}
async function signIn(page, name) {
  await page.goto(base + '/');
  await page.waitForURL(/#\/signin/);
  await page.fill('input[name=name]', name);
  await page.fill('input[name=password]', pw);
  await page.click('button:text("Sign in")');
  await page.waitForFunction(n => document.getElementById('who').textContent.startsWith(n + ' ('), name, { timeout: 15000 });
}
// api makes a request with the page's session and its CSRF token.
function api(page, method, path, body) {
  return page.evaluate(async ([method, path, body]) => {
    const s = await (await fetch('/api/v1/session')).json();
    const r = await fetch(path, { method, headers: { 'Content-Type': 'application/json', 'X-CSRF-Token': s.csrf || '' }, body: body ? JSON.stringify(body) : undefined });
    return { status: r.status, body: await r.text() };
  }, [method, path, body]);
}
async function faceplate(page, element) {
  await page.click('#' + element);
  await page.waitForSelector('dialog.faceplate[open]');
}

const svg = `<svg xmlns="http://www.w3.org/2000/svg" viewBox="0 0 400 200">
<rect id="boiler" x="20" y="20" width="120" height="120" fill="#ddd" stroke="#333"/>
<text id="boiler-value" x="30" y="170" font-size="20">—</text>
<rect id="turbine" x="220" y="20" width="120" height="120" fill="#ddd" stroke="#333"/>
<text id="turbine-value" x="230" y="170" font-size="20">—</text></svg>`;
const admin = await person(), op = await person(), viewer = await person();

const steps = [
  ['setup, users and a picture', async () => {
    await admin.goto(setupLink);
    await admin.fill('input[name=name]', 'ada');
    await admin.fill('input[name=password]', pw);
    await admin.fill('input[name=again]', pw);
    await admin.click('button[type=submit]');
    await admin.waitForSelector('input[name=new-name]');
    for (const [name, role] of [['otto', 'operator'], ['vera', 'viewer']]) {
      const r = await api(admin, 'POST', '/api/v1/users', { name, role, password: pw });
      if (r.status >= 300) return { ok: false, detail: 'add ' + name + ': ' + r.status + ' ' + r.body };
    }
    const r = await api(admin, 'POST', '/api/v1/pictures', { id: 'boiler-house', title: 'Boiler house', svg, bindings: [
      { element: 'boiler-value', tag: 'boiler.setpoint', kind: 'text', unit: '°C', decimals: 1, control: true },
      { element: 'boiler', tag: 'boiler.setpoint', kind: 'fill', states: [{ from: -1000, color: '#888' }, { from: 50, color: '#c22' }], control: true },
      { element: 'turbine-value', tag: 'turbine.setpoint', kind: 'text', unit: 'rpm', control: true },
      { element: 'turbine', tag: 'turbine.setpoint', kind: 'stroke', states: [{ from: -1000, color: '#00f' }], control: true },
    ] });
    return { ok: r.status === 201, detail: r.status + ' ' + r.body.slice(0, 200) };
  }],
  ['operator may not edit pictures', async () => {
    await signIn(op, 'otto');
    const r = await api(op, 'DELETE', '/api/v1/pictures/boiler-house');
    return { ok: r.status === 403, detail: 'DELETE answered ' + r.status };
  }],
  ['operator opens the picture and sees live values', async () => {
    await op.goto(base + '/pictures');
    await op.click('a:text("Boiler house")');
    await op.waitForFunction(() => /°C$/.test(document.getElementById('boiler-value')?.textContent), null, { timeout: 15000 });
    return { ok: true, detail: 'boiler shows ' + await op.textContent('#boiler-value') };
  }],
  ['operator writes a permitted setpoint from the faceplate', async () => {
    await faceplate(op, 'boiler-value');
    await op.fill('dialog.faceplate input[name=value]', '60');
    await op.click('dialog.faceplate button:text("Write")');
    await op.waitForFunction(() => /Written|Refused|Failed/.test(document.querySelector('dialog.faceplate .msg').textContent));
    const msg = await op.textContent('dialog.faceplate .msg');
    await op.click('dialog.faceplate button:text("Close")');
    // The picture follows: text and state colour.
    await op.waitForFunction(() => document.getElementById('boiler-value')?.textContent === '60.0 °C', null, { timeout: 15000 });
    const fill = await op.$eval('#boiler', e => getComputedStyle(e).fill);
    return { ok: msg.startsWith('Written: boiler.setpoint = 60') && fill === 'rgb(204, 34, 34)', detail: msg + '; fill ' + fill };
  }],
  ['operator is refused a forbidden setpoint, clearly', async () => {
    await faceplate(op, 'turbine');
    await op.fill('dialog.faceplate input[name=value]', '10');
    await op.click('dialog.faceplate button:text("Write")');
    await op.waitForFunction(() => /Refused|Failed/.test(document.querySelector('dialog.faceplate .msg').textContent));
    const msg = await op.textContent('dialog.faceplate .msg');
    await op.click('dialog.faceplate button:text("Close")');
    return { ok: /^Refused: .*user "otto" \(operator\) may not write this tag/.test(msg), detail: msg };
  }],
  ['viewer sees the faceplate with no control', async () => {
    await signIn(viewer, 'vera');
    await viewer.goto(base + '/pictures?id=boiler-house');
    await viewer.waitForFunction(() => document.getElementById('boiler-value')?.textContent === '60.0 °C', null, { timeout: 15000 });
    await faceplate(viewer, 'boiler-value');
    await viewer.waitForSelector('dialog.faceplate .fp-alarms li');
    const inputs = await viewer.$$('dialog.faceplate input, dialog.faceplate form');
    const edit = await viewer.$$('a:text("Edit")');
    const text = await viewer.textContent('dialog.faceplate');
    return { ok: inputs.length === 0 && edit.length === 0 && text.includes('boiler.setpoint'), detail: `inputs ${inputs.length}, edit links ${edit.length}` };
  }],
  ['the audit journal shows the writes with the right person', async () => {
    await admin.goto(base + '/#/audit');
    await admin.waitForSelector('table.audit tbody tr');
    const rows = await admin.$$eval('table.audit tbody tr', trs => trs.map(tr => [...tr.children].map(td => td.textContent)));
    const has = (who, action, target, result) => rows.some(r => r[1] === who && r[4] === action && r[5] === target && result(r[8]));
    const want = [
      ['otto', 'control', 'boiler.setpoint', r => r === 'ok'],
      ['otto', 'control', 'turbine.setpoint', r => r.includes('may not write')],
    ];
    const missing = want.filter(w => !has(...w)).map(w => w.slice(0, 3).join(' '));
    const others = rows.filter(r => r[4] === 'control' && r[1] !== 'otto');
    return { ok: missing.length === 0 && others.length === 0, detail: missing.length || others.length ? 'missing: ' + missing.join('; ') + ' others ' + JSON.stringify(others) : rows.length + ' rows' };
  }],
  ['an engineer composes a picture from the symbol library', async () => {
    await admin.goto(base + '/pictures?new=1');
    await admin.fill('input[name=title]', 'Composed');
    await admin.click('.palette button:text("tank")');
    await admin.click('.palette button:text("pump")');
    await admin.click('#tank1-value', { force: true });
    await admin.fill('.pic-panel input[name=tag]', 'boiler.setpoint');
    await admin.selectOption('.pic-panel select[name=kind]', 'text');
    await admin.fill('.pic-panel input[name=unit]', '°C');
    await admin.click('.pic-panel button:text("Bind")');
    await admin.click('#tank1-level', { force: true });
    await admin.fill('.pic-panel input[name=tag]', 'boiler.setpoint');
    await admin.selectOption('.pic-panel select[name=kind]', 'level');
    await admin.fill('.pic-panel input[name=min]', '0');
    await admin.fill('.pic-panel input[name=max]', '100');
    await admin.click('.pic-panel button:text("Bind")');
    await admin.click('button:text("Save")');
    await admin.waitForURL(/pictures\?id=composed/);
    await admin.waitForFunction(() => document.getElementById('tank1-value')?.textContent === '60 °C', null, { timeout: 15000 });
    const h = await admin.$eval('#tank1-level', e => +e.getAttribute('height'));
    const pump = await admin.$$('#pump1-body');
    return { ok: Math.abs(h - 112 * 0.6) < 0.1 && pump.length === 1, detail: 'level height ' + h + ', pump ' + pump.length };
  }],
  ['a hostile picture renders inert', async () => {
    await admin.goto(base + '/pictures?id=evil');
    await admin.waitForSelector('.pic-wrap svg rect#r');
    await admin.hover('#r', { force: true });
    await admin.click('#r', { force: true });
    await admin.waitForTimeout(1500);
    const found = await admin.evaluate(() => {
      const s = document.querySelector('.pic-wrap svg');
      const bad = [];
      for (const e of s.querySelectorAll('*')) {
        if (/^(script|foreignObject|iframe|img|a|animate|set|use)$/i.test(e.localName) && !(e.localName === 'use' && /^(#.*)?$/.test(e.getAttribute('href') || ''))) bad.push(e.localName);
        for (const a of e.attributes) if (/^on/i.test(a.name) || /javascript:|http/i.test(a.value) && a.name !== 'xmlns') bad.push(e.localName + '@' + a.name);
      }
      for (const a of s.attributes) if (/^on/i.test(a.name)) bad.push('svg@' + a.name);
      return { bad, pwned: window.pwned || '' };
    });
    const ok = found.bad.length === 0 && !found.pwned && dialogs.length === 0 && foreign.length === 0;
    return { ok, detail: `kept ${found.bad}, pwned "${found.pwned}", dialogs ${dialogs.length}, foreign requests ${foreign}` };
  }],
];
for (const [name, fn] of steps) {
  if (!await check(name, fn)) break;
}
report('no page errors', problems.length === 0, problems.join('\n'));
await browser.close();
