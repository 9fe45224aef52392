// read_trace.js loads vramscope traces with @tracerbench/trace-model, a
// maintained reader of Chrome trace events (it sorts events, assigns
// process and thread names from metadata, and nests complete events by
// containment, as trace viewers do), and prints what it built as JSON for
// the Go test to check. Usage: node read_trace.js TRACE.json...
'use strict';
const fs = require('fs');
const { buildModel } = require('@tracerbench/trace-model');

const out = {};
for (const path of process.argv.slice(2)) {
  const model = buildModel(JSON.parse(fs.readFileSync(path, 'utf8')));
  out[path] = model.processes.map((p) => ({
    pid: p.id,
    sortIndex: p.sortIndex,
    name: p.name,
    labels: p.labels,
    threads: p.threads.map((t) => ({
      tid: t.id,
      name: t.name,
      slices: t.events.filter((e) => e.isComplete()).map((e) => ({
        name: e.name, start: e.start, end: e.end,
        parent: e.parent === undefined ? null : e.parent.name,
      })),
      instants: t.events.filter((e) => e.ph === 'i' || e.ph === 'I').length,
    })),
    counters: p.events.filter((e) => e.ph === 'C').length
      + p.threads.reduce((n, t) => n + t.events.filter((e) => e.ph === 'C').length, 0),
  }));
}
process.stdout.write(JSON.stringify(out));
