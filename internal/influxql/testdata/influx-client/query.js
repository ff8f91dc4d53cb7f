// Runs InfluxQL statements through the influx npm client's query API
// against several servers (InfluxDB 1.x and Pith) and prints, per
// statement and server, what the client returned: the raw answer
// (queryRaw) and the parsed rows (query). The Go test
// (internal/influxql/interop_test.go) compares the servers' answers.
//
// Before the queries it writes the same points to every server with the
// client's writePoints (ms precision), creating the database first.
//
// Usage: node query.js PLAN.json, where PLAN is
// {"servers": [{"name", "host", "port", "database"}],
//  "write": ["m,k=v f=1 1700000000000", ...] (line protocol, no escapes),
//  "queries": [{"q", "precision"}]}
"use strict";
const fs = require("fs");
const Influx = require("influx");

async function run(server, q) {
  const client = new Influx.InfluxDB({ host: server.host, port: server.port, database: server.database });
  const opts = q.precision ? { precision: q.precision } : {};
  const out = {};
  try {
    out.raw = await client.queryRaw(q.q, opts);
  } catch (e) {
    out.rawError = String(e.message || e);
  }
  try {
    out.rows = JSON.parse(JSON.stringify(await client.query(q.q, opts)));
  } catch (e) {
    out.rowsError = String(e.message || e);
  }
  return out;
}

// point turns one unescaped line-protocol line into the client's point.
function point(line) {
  const [series, fields, ts] = line.split(" ");
  const [measurement, ...tagPairs] = series.split(",");
  const p = { measurement, tags: {}, fields: {}, timestamp: ts };
  for (const kv of tagPairs) {
    const [k, v] = kv.split("=");
    p.tags[k] = v;
  }
  for (const kv of fields.split(",")) {
    const [k, v] = kv.split("=");
    p.fields[k] = Number(v);
  }
  return p;
}

async function main() {
  const plan = JSON.parse(fs.readFileSync(process.argv[2], "utf8"));
  const points = (plan.write || []).map(point);
  for (const s of plan.servers) {
    const client = new Influx.InfluxDB({ host: s.host, port: s.port, database: s.database });
    await client.createDatabase(s.database);
    await client.writePoints(points, { precision: "ms" });
  }
  const results = [];
  for (const q of plan.queries) {
    const r = { q: q.q, precision: q.precision || "", answers: {} };
    for (const s of plan.servers) {
      r.answers[s.name] = await run(s, q);
    }
    results.push(r);
  }
  const measurements = {};
  const series = {};
  for (const s of plan.servers) {
    const client = new Influx.InfluxDB({ host: s.host, port: s.port, database: s.database });
    measurements[s.name] = await client.getMeasurements();
    series[s.name] = await client.getSeries();
  }
  process.stdout.write(JSON.stringify({ results, measurements, series }) + "\n");
}

main().catch((e) => {
  process.stderr.write(String(e && e.stack || e) + "\n");
  process.exit(1);
});
