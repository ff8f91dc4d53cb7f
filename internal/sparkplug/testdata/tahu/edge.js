// An Eclipse Tahu edge node (npm sparkplug-client) driven by a Go test:
// one JSON command per line on stdin, one JSON event per line on stdout.
//
//   node edge.js mqtt://127.0.0.1:1883 GROUP NODE
//
// Commands:
//   {"op":"nbirth","metrics":[...]}        publishNodeBirth (seq 0, bdSeq added)
//   {"op":"ndata","metrics":[...]}         publishNodeData
//   {"op":"dbirth","device":"D","metrics":[...]}
//   {"op":"ddata","device":"D","metrics":[...]}
//   {"op":"ddeath","device":"D"}
//   {"op":"skip","n":N}                    skip N sequence numbers (a gap)
//   {"op":"kill"}                          exit without DISCONNECT: the broker sends the NDEATH will
//   {"op":"stop"}                          publish NDEATH, disconnect and exit
// Events: {"ev":"connected"}, {"ev":"ncmd","metrics":[...]}, {"ev":"dcmd",...},
// {"ev":"done","op":OP} after each command.
'use strict';
const readline = require('readline');
const sparkplug = require('sparkplug-client');

const [broker, group, node] = process.argv.slice(2);
const client = sparkplug.newClient({
  serverUrl: broker, username: '', password: '', groupId: group, edgeNode: node,
  clientId: 'tahu-' + node + '-' + process.pid, publishDeath: true, keepalive: 5,
});

function out(ev) { process.stdout.write(JSON.stringify(ev) + '\n'); }

// Long values (64-bit) become numbers for JSON.
function plain(metrics) {
  return (metrics || []).map((m) => {
    const o = Object.assign({}, m);
    if (o.value && typeof o.value === 'object' && typeof o.value.toNumber === 'function') o.value = o.value.toNumber();
    if (o.timestamp && typeof o.timestamp === 'object' && typeof o.timestamp.toNumber === 'function') o.timestamp = o.timestamp.toNumber();
    if (o.alias && typeof o.alias === 'object' && typeof o.alias.toNumber === 'function') o.alias = o.alias.toNumber();
    return o;
  });
}

client.on('birth', () => out({ ev: 'connected' }));
client.on('ncmd', (p) => out({ ev: 'ncmd', metrics: plain(p.metrics) }));
client.on('dcmd', (d, p) => out({ ev: 'dcmd', device: d, metrics: plain(p.metrics) }));
client.on('error', (e) => out({ ev: 'error', error: String(e) }));

const rl = readline.createInterface({ input: process.stdin });
rl.on('line', (line) => {
  const c = JSON.parse(line);
  const now = Date.now();
  switch (c.op) {
    case 'nbirth': client.publishNodeBirth({ timestamp: now, metrics: c.metrics }); break;
    case 'ndata': client.publishNodeData({ timestamp: now, metrics: c.metrics }); break;
    case 'dbirth': client.publishDeviceBirth(c.device, { timestamp: now, metrics: c.metrics }); break;
    case 'ddata': client.publishDeviceData(c.device, { timestamp: now, metrics: c.metrics }); break;
    case 'ddeath': client.publishDeviceDeath(c.device, { timestamp: now }); break;
    case 'skip': client.seq += c.n; break;
    case 'kill': process.exit(0); break;
    case 'stop': client.stop(); setTimeout(() => process.exit(0), 200); break;
    default: out({ ev: 'error', error: 'unknown op ' + c.op }); return;
  }
  out({ ev: 'done', op: c.op });
});
rl.on('close', () => process.exit(0));
