// Browser test of people and roles, run by people_test.go against a
// running Pith with a Modbus server, a station and an alarm: the first
// admin sets up from the one-time link and adds an operator and a viewer;
// the operator signs in, writes a permitted setpoint, is refused a
// forbidden one with a clear message and acknowledges the alarm; the
// viewer sees no control at all; the audit page shows each action with
// the right person. Prints one JSON result per line, as run.mjs.
import { chromium } from 'playwright-core';

const env = process.env;
const base = env.PITH_URL, setupLink = env.PITH_SETUP_LINK;
const pw = 'correct horse battery';
const problems = [];

function report(name, ok, detail) {
  console.log(JSON.stringify({ name, ok: !!ok, detail: detail || '', metrics: {} }));
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
async function person() {
  const ctx = await browser.newContext({ viewport: { width: 1280, height: 800 } });
  const page = await ctx.newPage();
  page.on('pageerror', e => problems.push('page error: ' + e.message));
  page.on('console', m => {
    // 401/403 answers the test provokes show as console errors of fetch.
    if (m.type() === 'error' && !/status of 40[13]/.test(m.text())) problems.push('console: ' + m.text());
  });
  return page;
}
async function signIn(page, name) {
  await page.goto(base + '/');
  await page.waitForURL(/#\/signin/);
  await page.fill('input[name=name]', name);
  await page.fill('input[name=password]', pw);
  await page.click('button:text("Sign in")');
  try {
    await page.waitForFunction(n => document.getElementById('who').textContent.startsWith(n + ' ('), name, { timeout: 15000 });
  } catch (e) {
    throw new Error('not signed in: url ' + page.url() + ', who ' + await page.textContent('#who') + ', message ' + await page.textContent('.msg').catch(() => '?'));
  }
}

// need waits for selector on page and, when it does not come, says where
// the page is and what it shows instead.
async function need(page, selector) {
  try {
    await page.waitForSelector(selector, { timeout: 30000 });
  } catch (e) {
    const view = await page.textContent('#view').catch(() => '?');
    throw new Error(`no ${selector}: url ${page.url()}, who ${await page.textContent('#who').catch(() => '?')}, view ${JSON.stringify(view.slice(0, 300))}`);
  }
}

const admin = await person(), op = await person(), viewer = await person();

const steps = [
  ['setup from the one-time link', async () => {
    await admin.goto(setupLink);
    await admin.fill('input[name=name]', 'ada');
    await admin.fill('input[name=password]', pw);
    await admin.fill('input[name=again]', pw);
    await admin.click('button[type=submit]');
    await admin.waitForSelector('input[name=new-name]');
    const who = await admin.textContent('#who');
    if (who !== 'ada (admin)') return { ok: false, detail: 'nav says ' + who };
    // The link works once.
    const again = await admin.evaluate(async u => (await fetch('/api/v1/setup', { method: 'POST', headers: { 'Content-Type': 'application/json' },
      body: JSON.stringify({ token: new URL(u).hash.split('token=')[1], name: 'eve', password: 'another long one' }) })).status, setupLink);
    return { ok: again === 403, detail: 'second use answered ' + again };
  }],
  ['admin adds an operator and a viewer', async () => {
    for (const [name, role] of [['otto', 'operator'], ['vera', 'viewer']]) {
      await admin.fill('input[name=new-name]', name);
      await admin.selectOption('select[name=new-role]', role);
      await admin.fill('input[name=new-password]', pw);
      await admin.click('button:text("Add")');
      await admin.waitForSelector(`tr[data-user="${name}"]`);
    }
    const roles = await admin.$$eval('tr[data-user] select', s => s.map(x => x.value));
    return { ok: roles.join() === 'admin,operator,viewer', detail: 'roles ' + roles };
  }],
  ['operator signs in', async () => { await signIn(op, 'otto'); }],
  ['operator writes a permitted setpoint', async () => {
    await op.goto(base + '/#/control');
    await need(op, 'input[name=tag]');
    await op.fill('input[name=tag]', 'boiler.setpoint');
    await op.fill('input[name=value]', '60');
    await op.click('button:text("Write")');
    await op.waitForFunction(() => /Written|Refused|Failed/.test(document.querySelector('.msg').textContent));
    const msg = await op.textContent('.msg');
    return { ok: msg.startsWith('Written: boiler.setpoint = 60'), detail: msg };
  }],
  ['operator is refused a forbidden setpoint, clearly', async () => {
    await op.fill('input[name=tag]', 'turbine.setpoint');
    await op.fill('input[name=value]', '10');
    await op.click('button:text("Write")');
    await op.waitForFunction(() => /Refused|Failed/.test(document.querySelector('.msg').textContent));
    const msg = await op.textContent('.msg');
    return { ok: /^Refused: .*user "otto" \(operator\) may not write this tag/.test(msg), detail: msg };
  }],
  ['viewer sees no control at all', async () => {
    await signIn(viewer, 'vera');
    await viewer.goto(base + '/#/live');
    await viewer.waitForSelector('.alarms:not([hidden]) tbody tr', { timeout: 30000 });
    const acks = await viewer.$$('.alarms button');
    const links = await viewer.$$eval('#nav a[data-perm]', as => as.filter(a => !a.hidden).map(a => a.textContent));
    await viewer.goto(base + '/#/control');
    await viewer.waitForSelector('text=Your role may not write tags.');
    const forms = await viewer.$$('form.control');
    return { ok: acks.length === 0 && links.length === 0 && forms.length === 0, detail: `ack buttons ${acks.length}, links ${links}, forms ${forms.length}` };
  }],
  ['operator acknowledges the alarm', async () => {
    await op.goto(base + '/#/live');
    await op.waitForSelector('.alarms button:text("Ack")', { timeout: 30000 });
    await op.click('.alarms button:text("Ack")');
    await op.waitForFunction(() => !document.querySelector('.alarms button'), null, { timeout: 15000 });
  }],
  ['the audit journal shows each action with the right person', async () => {
    await admin.goto(base + '/#/audit');
    await admin.waitForSelector('table.audit tbody tr');
    const rows = await admin.$$eval('table.audit tbody tr', trs => trs.map(tr => [...tr.children].map(td => td.textContent)));
    // Time, Who, Role, From, Action, Target, Old, New, Result, Detail
    const has = (who, action, target, result) => rows.some(r => r[1] === who && r[4] === action && r[5] === target && result(r[8]));
    const want = [
      ['ada', 'setup', 'ada', r => r === 'ok'],
      ['ada', 'user', 'otto', r => r === 'ok'],
      ['otto', 'sign-in', 'otto', r => r === 'ok'],
      ['otto', 'control', 'boiler.setpoint', r => r === 'ok'],
      ['otto', 'control', 'turbine.setpoint', r => r.includes('may not write')],
      ['otto', 'alarm-ack', 'boiler.high', r => r === 'ok'],
      ['vera', 'sign-in', 'vera', r => r === 'ok'],
    ];
    const missing = want.filter(w => !has(...w)).map(w => w.slice(0, 3).join(' '));
    // The filter narrows to one person.
    await admin.fill('input[aria-label=Who]', 'otto');
    await admin.waitForFunction(() => [...document.querySelectorAll('table.audit tbody tr')].every(tr => tr.children[1].textContent === 'otto'));
    return { ok: missing.length === 0, detail: missing.length ? 'missing: ' + missing.join('; ') + ' in ' + JSON.stringify(rows) : rows.length + ' rows' };
  }],
];
for (const [name, fn] of steps) {
  if (!await check(name, fn)) break;
}
report('no page errors', problems.length === 0, problems.join('\n'));
await browser.close();
