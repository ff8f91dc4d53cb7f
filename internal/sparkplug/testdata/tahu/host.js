// A Sparkplug B reader built on Eclipse Tahu's payload codec (npm
// sparkplug-payload) and mqtt.js, driven by a Go test to read back Pith's
// own edge node: one JSON command per line on stdin, one JSON event per
// line on stdout.
//
//   node host.js mqtt://127.0.0.1:1883 GROUP
//
// Events: {"ev":"subscribed"}, {"ev":"msg","topic":T,"seq":N,"timestamp":MS,"metrics":[...]}
// Commands: {"op":"publish","topic":T,"metrics":[...]} encodes a payload
// with sparkplug-payload and publishes it (an NCMD or DCMD).
'use strict';
const readline = require('readline');
const mqtt = require('mqtt');
const payload = require('sparkplug-payload').get('spBv1.0');

const [broker, group] = process.argv.slice(2);
const client = mqtt.connect(broker, { clientId: 'tahu-host-' + process.pid, clean: true });

function num(v) { return v && typeof v === 'object' && typeof v.toNumber === 'function' ? v.toNumber() : v; }
function out(ev) { process.stdout.write(JSON.stringify(ev) + '\n'); }

client.on('connect', () => {
  client.subscribe('spBv1.0/' + group + '/#', { qos: 0 }, (err) => {
    if (err) out({ ev: 'error', error: String(err) }); else out({ ev: 'subscribed' });
  });
});
client.on('message', (topic, buf) => {
  let p;
  try { p = payload.decodePayload(buf); } catch (e) { out({ ev: 'error', topic, error: String(e) }); return; }
  const metrics = (p.metrics || []).map((m) => ({
    name: m.name, alias: num(m.alias), type: m.type, value: num(m.value),
    timestamp: num(m.timestamp), isNull: m.isNull, properties: m.properties,
  }));
  out({ ev: 'msg', topic, seq: num(p.seq), timestamp: num(p.timestamp), metrics });
});
client.on('error', (e) => out({ ev: 'error', error: String(e) }));

const rl = readline.createInterface({ input: process.stdin });
rl.on('line', (line) => {
  const c = JSON.parse(line);
  if (c.op === 'publish') {
    client.publish(c.topic, Buffer.from(payload.encodePayload({ timestamp: Date.now(), metrics: c.metrics })), { qos: 0 }, () => out({ ev: 'done', op: 'publish' }));
  }
});
rl.on('close', () => { client.end(); process.exit(0); });
