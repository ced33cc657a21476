#!/usr/bin/env node
// Decodes an OTLP trace request with OpenTelemetry's own code, not
// flightrec's: the protobuf classes @opentelemetry/otlp-transformer 0.52
// generated from opentelemetry-proto (protobufjs). Prints the request as
// OTLP/JSON (hex ids, int64 as strings), so a test compares it with what
// flightrec wrote as otlp-json, member for member.
//
// usage: otlp_decode.js MODULES_DIR FILE.pb   (MODULES_DIR holds node_modules;
//        tools/install-deps.sh puts it in /opt/flightrec-test-otel)
const fs = require("fs");
const path = require("path");
const [modules, file] = process.argv.slice(2);
const root = require(path.join(modules, "node_modules/@opentelemetry/otlp-transformer/build/src/generated/root"));
const Request = root.opentelemetry.proto.collector.trace.v1.ExportTraceServiceRequest;
const message = Request.decode(fs.readFileSync(file));
const verdict = Request.verify(message);
if (verdict) {
  console.error("not a valid ExportTraceServiceRequest: " + verdict);
  process.exit(1);
}
const object = Request.toObject(message, { longs: String, enums: Number, bytes: String, defaults: false });
// OTLP/JSON writes trace and span ids in hex, where proto3 JSON has base64.
const hex = (b64) => Buffer.from(b64, "base64").toString("hex");
for (const rs of object.resourceSpans || [])
  for (const ss of rs.scopeSpans || [])
    for (const s of ss.spans || []) {
      for (const k of ["traceId", "spanId", "parentSpanId"]) if (s[k] !== undefined) s[k] = hex(s[k]);
    }
process.stdout.write(JSON.stringify(object));
