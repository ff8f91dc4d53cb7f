// Writes Sparkplug B payloads encoded by Eclipse Tahu's codec (npm
// sparkplug-payload) as the golden files and fuzz seeds of Pith's decoder:
//
//   node dump.js ../payloads
//
// Each NAME.bin has a NAME.json beside it: what Tahu encoded.
'use strict';
const fs = require('fs');
const path = require('path');
const pako = require('pako');
const payload = require('sparkplug-payload').get('spBv1.0');

const dir = process.argv[2];
const ts = 1700000000000;
const cases = {
  nbirth: { timestamp: ts, seq: 0, metrics: [
    { name: 'bdSeq', type: 'UInt64', value: 3 },
    { name: 'Node Control/Rebirth', type: 'Boolean', value: false },
    { name: 'Inputs/Temperature', alias: 1, type: 'Double', value: 21.5, timestamp: ts },
    { name: 'Inputs/Count', alias: 2, type: 'Int32', value: -7 },
    { name: 'Inputs/Small', alias: 3, type: 'Int8', value: -100 },
    { name: 'Inputs/Word', alias: 4, type: 'UInt16', value: 65535 },
    { name: 'Inputs/Big', alias: 5, type: 'Int64', value: -1234567890123 },
    { name: 'Inputs/Counter', alias: 6, type: 'UInt64', value: 9007199254740991 },
    { name: 'Inputs/U32', alias: 7, type: 'UInt32', value: 4000000000 },
    { name: 'Inputs/Ratio', alias: 8, type: 'Float', value: 0.25 },
    { name: 'Inputs/Running', alias: 9, type: 'Boolean', value: true },
    { name: 'Inputs/Label', alias: 10, type: 'String', value: 'hello' },
    { name: 'Inputs/When', alias: 11, type: 'DateTime', value: ts },
    { name: 'Inputs/Missing', alias: 12, type: 'Double', value: null, isNull: true },
  ] },
  ndata_alias: { timestamp: ts + 1000, seq: 1, metrics: [
    { alias: 1, type: 'Double', value: 22.25, timestamp: ts + 1000 },
    { alias: 2, type: 'Int32', value: 42 },
    { alias: 9, type: 'Boolean', value: false },
  ] },
  ndata_names: { timestamp: ts + 2000, seq: 2, metrics: [
    { name: 'Inputs/Temperature', type: 'Double', value: 23 },
  ] },
  ndeath: { timestamp: ts, metrics: [{ name: 'bdSeq', type: 'UInt64', value: 3 }] },
  ncmd_rebirth: { timestamp: ts, metrics: [{ name: 'Node Control/Rebirth', type: 'Boolean', value: true }] },
  dataset: { timestamp: ts, seq: 5, metrics: [{ name: 'Table', type: 'DataSet', value: {
    numOfColumns: 2, types: ['Int32', 'String'], columns: ['a', 'b'], rows: [[1, 'x'], [2, 'y']] } }] },
  template: { timestamp: ts, seq: 6, metrics: [{ name: 'Motor', type: 'Template', value: {
    version: 'v1', templateRef: 'MotorType', isDefinition: false,
    metrics: [{ name: 'speed', type: 'Float', value: 1.5 }], parameters: [] } }] },
  properties: { timestamp: ts, seq: 7, metrics: [{ name: 'Flow', alias: 20, type: 'Double', value: 3.5,
    properties: { engUnit: { type: 'String', value: 'm3/h' } } }] },
};
fs.mkdirSync(dir, { recursive: true });
for (const [name, obj] of Object.entries(cases)) {
  const bytes = payload.encodePayload(obj);
  fs.writeFileSync(path.join(dir, name + '.bin'), Buffer.from(bytes));
  fs.writeFileSync(path.join(dir, name + '.json'), JSON.stringify(obj, null, 1) + '\n');
}
// A payload compressed as sparkplug-client does (DEFLATE in zlib framing).
const inner = payload.encodePayload(cases.ndata_alias);
const z = { uuid: 'SPBV1.0_COMPRESSED', seq: 1, metrics: [{ name: 'algorithm', type: 'String', value: 'DEFLATE' }],
  body: pako.deflate(inner) };
fs.writeFileSync(path.join(dir, 'compressed_deflate.bin'), Buffer.from(payload.encodePayload(z)));
fs.writeFileSync(path.join(dir, 'compressed_deflate.json'), JSON.stringify({ compressed: 'ndata_alias' }) + '\n');
const g = { uuid: 'SPBV1.0_COMPRESSED', seq: 1, metrics: [{ name: 'algorithm', type: 'String', value: 'GZIP' }],
  body: pako.gzip(inner) };
fs.writeFileSync(path.join(dir, 'compressed_gzip.bin'), Buffer.from(payload.encodePayload(g)));
fs.writeFileSync(path.join(dir, 'compressed_gzip.json'), JSON.stringify({ compressed: 'ndata_alias' }) + '\n');
