// An OPC UA server the acquisition tests run against: node-opcua, the
// most used open-source OPC UA stack outside Go, so that Pith's client is
// checked against a peer nobody here wrote.
//
// Usage: node server.js PORT PKI_DIR [COUNT] [RATE_HZ]
//
// It serves COUNT (default 1000) Double variables ns=1;s=v0000.. under
// Objects/Plant/Values. Every 1/RATE_HZ seconds (default 10 Hz) all of
// them take the tick number k as their value with the source timestamp
// EPOCH + k*period, so a client can check from the values alone that no
// change was missed and that source timestamps were kept: for every
// sample, T - k*period is the same EPOCH. EPOCH is printed at start.
//
// Objects/Plant/Setpoints holds writable variables of each numeric type
// (sp_double, sp_float, sp_int32, sp_uint16, sp_bool), Objects/Plant/Misc
// an array (arr, 4 Doubles), a String (text), a LocalizedText (label) and a
// value whose status is Uncertain (uncertain).
//
// Objects/Plant/Live changes with the tick k too: state, a String taking
// STATES[floor(k/5) % 5] (one of them on two lines, one of 1,500 bytes);
// names, a String array ["n<k>", "fixed"]; level, an AnalogItem (EURange
// 0..1000) of value k, for percent deadbands; skewed, a Double of value k
// whose source timestamp is an hour behind (EPOCH + k*period - 3600000),
// so that a client can tell the source from the server timestamp.
//
// Endpoints: security None, and Basic256Sha256 with Sign and
// SignAndEncrypt; identities anonymous and user "operator" with password
// "secret". Client certificates are accepted without a trust list (the
// client's trust of the server is what the tests check). The process
// prints "READY <port> <epoch>" once it listens and stops when its
// standard input closes.
"use strict";
const path = require("path");
const {
  OPCUAServer, Variant, DataType, StatusCodes, MessageSecurityMode, SecurityPolicy,
  OPCUACertificateManager, DataValue, VariantArrayType,
} = require("node-opcua");

const port = parseInt(process.argv[2] || "4840", 10);
const pki = process.argv[3] || path.join(__dirname, "pki");
const count = parseInt(process.argv[4] || "1000", 10);
const rate = parseFloat(process.argv[5] || "10");
const periodMs = Math.round(1000 / rate);

async function main() {
  const serverCertificateManager = new OPCUACertificateManager({
    automaticallyAcceptUnknownCertificate: true,
    rootFolder: path.join(pki, "own"),
  });
  const userCertificateManager = new OPCUACertificateManager({
    automaticallyAcceptUnknownCertificate: true,
    rootFolder: path.join(pki, "user"),
  });
  const server = new OPCUAServer({
    port,
    resourcePath: "/pith",
    serverCertificateManager,
    userCertificateManager,
    securityPolicies: [SecurityPolicy.None, SecurityPolicy.Basic256Sha256],
    securityModes: [MessageSecurityMode.None, MessageSecurityMode.Sign, MessageSecurityMode.SignAndEncrypt],
    allowAnonymous: true,
    userManager: { isValidUser: (user, pass) => user === "operator" && pass === "secret" },
    maxConnectionsPerEndpoint: 50,
    serverCapabilities: { maxMonitoredItemsPerCall: 100000, minSupportedSampleRate: 0 },
    serverInfo: { applicationUri: "urn:pith:test:node-opcua", productUri: "pith-test" },
  });
  await server.initialize();
  const ns = server.engine.addressSpace.getOwnNamespace();
  const objects = server.engine.addressSpace.rootFolder.objects;
  const plant = ns.addFolder(objects, { browseName: "Plant" });
  const values = ns.addFolder(plant, { browseName: "Values" });
  const vars = [];
  for (let i = 0; i < count; i++) {
    const name = "v" + String(i).padStart(4, "0");
    vars.push(ns.addVariable({
      componentOf: values, browseName: name, nodeId: "s=" + name, dataType: "Double",
      minimumSamplingInterval: 0,
    }));
  }
  const setpoints = ns.addFolder(plant, { browseName: "Setpoints" });
  const sp = [["sp_double", "Double", DataType.Double, 0], ["sp_float", "Float", DataType.Float, 0],
    ["sp_int32", "Int32", DataType.Int32, 0], ["sp_uint16", "UInt16", DataType.UInt16, 0],
    ["sp_bool", "Boolean", DataType.Boolean, false]];
  for (const [name, typeName, dt, init] of sp) {
    const v = ns.addVariable({
      componentOf: setpoints, browseName: name, nodeId: "s=" + name, dataType: typeName,
      accessLevel: "CurrentRead | CurrentWrite", userAccessLevel: "CurrentRead | CurrentWrite",
      minimumSamplingInterval: 0,
    });
    v.setValueFromSource(new Variant({ dataType: dt, value: init }));
  }
  const misc = ns.addFolder(plant, { browseName: "Misc" });
  const arr = ns.addVariable({
    componentOf: misc, browseName: "arr", nodeId: "s=arr", dataType: "Double", valueRank: 1,
    arrayDimensions: [4], minimumSamplingInterval: 0,
  });
  arr.setValueFromSource(new Variant({ dataType: DataType.Double, arrayType: VariantArrayType.Array, value: new Float64Array([1.5, 2.5, 3.5, 4.5]) }));
  const text = ns.addVariable({ componentOf: misc, browseName: "text", nodeId: "s=text", dataType: "String" });
  text.setValueFromSource(new Variant({ dataType: DataType.String, value: "hello" }));
  const label = ns.addVariable({ componentOf: misc, browseName: "label", nodeId: "s=label", dataType: "LocalizedText" });
  label.setValueFromSource(new Variant({ dataType: DataType.LocalizedText, value: { text: "Pump", locale: "en" } }));
  const unc = ns.addVariable({ componentOf: misc, browseName: "uncertain", nodeId: "s=uncertain", dataType: "Double", minimumSamplingInterval: 0 });
  unc.setValueFromSource(new Variant({ dataType: DataType.Double, value: 7 }), StatusCodes.UncertainLastUsableValue);

  const live = ns.addFolder(plant, { browseName: "Live" });
  const STATES = ["Idle", "Running", "Alarm: level high\r\nPump 2 tripped", "x".repeat(1497) + "END", "Stopped"];
  const state = ns.addVariable({ componentOf: live, browseName: "state", nodeId: "s=state", dataType: "String", minimumSamplingInterval: 0 });
  state.setValueFromSource(new Variant({ dataType: DataType.String, value: STATES[0] }));
  const names = ns.addVariable({ componentOf: live, browseName: "names", nodeId: "s=names", dataType: "String", valueRank: 1, arrayDimensions: [2], minimumSamplingInterval: 0 });
  names.setValueFromSource(new Variant({ dataType: DataType.String, arrayType: VariantArrayType.Array, value: ["n0", "fixed"] }));
  const level = ns.addAnalogDataItem({ componentOf: live, browseName: "level", nodeId: "s=level", dataType: "Double",
    engineeringUnitsRange: { low: 0, high: 1000 }, minimumSamplingInterval: 0 });
  level.setValueFromSource(new Variant({ dataType: DataType.Double, value: 0 }));
  const skewed = ns.addVariable({ componentOf: live, browseName: "skewed", nodeId: "s=skewed", dataType: "Double", minimumSamplingInterval: 0 });
  // Its first value is an hour behind too: a client whose subscription
  // delivers it before the first tick must not see it as the newest value.
  skewed._internal_set_dataValue(new DataValue({ value: new Variant({ dataType: DataType.Double, value: 0 }),
    statusCode: StatusCodes.Good, sourceTimestamp: new Date(Date.now() - 3600000), serverTimestamp: new Date() }));

  await server.start();
  const epoch = Math.floor(Date.now() / periodMs) * periodMs;
  let k = 0;
  const tick = () => {
    k++;
    const t = new Date(epoch + k * periodMs);
    for (const v of vars) {
      v.setValueFromSource(new Variant({ dataType: DataType.Double, value: k }), StatusCodes.Good, t);
    }
    state.setValueFromSource(new Variant({ dataType: DataType.String, value: STATES[Math.floor(k / 5) % STATES.length] }), StatusCodes.Good, t);
    names.setValueFromSource(new Variant({ dataType: DataType.String, arrayType: VariantArrayType.Array, value: ["n" + k, "fixed"] }), StatusCodes.Good, t);
    level.setValueFromSource(new Variant({ dataType: DataType.Double, value: k }), StatusCodes.Good, t);
    // setValueFromSource gives both timestamps the same value: set them apart.
    skewed._internal_set_dataValue(new DataValue({ value: new Variant({ dataType: DataType.Double, value: k }),
      statusCode: StatusCodes.Good, sourceTimestamp: new Date(t.getTime() - 3600000), serverTimestamp: new Date() }));
    const next = epoch + (k + 1) * periodMs - Date.now();
    setTimeout(tick, Math.max(0, next));
  };
  setTimeout(tick, periodMs);
  process.stdout.write("READY " + port + " " + epoch + "\n");
  process.stdin.on("end", async () => { await server.shutdown(0); process.exit(0); });
  process.stdin.resume();
}

main().catch((err) => { console.error(err); process.exit(1); });
