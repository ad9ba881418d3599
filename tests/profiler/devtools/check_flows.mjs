// Loads a furiosa Chrome trace with Chrome DevTools' own trace engine (npm @paulirish/trace_engine,
// the DevTools frontend's models/trace) and checks the Enqueue -> Execution flow arrows as DevTools
// binds them (handlers/FlowsHandler: a flow phase binds to the slice with the same ts, pid, tid and
// cat): every flow start of the trace must give one DevTools flow of exactly two events, an
// Enqueue on the host process (pid 1) and an Execution on an NPU process (pid >= 100). And no
// slice may be dropped: every complete ("X") event of the trace must be a node of the call trees
// DevTools' Renderer handler builds per track (entryToNode; a slice that does not nest inside
// the slices of its track is left out of the tree, so the flame chart does not draw it).
// Usage: NODE_PATH=DIR/node_modules node check_flows.mjs TRACE.json   (exit 1 with the reason)
import fs from 'node:fs';
import path from 'node:path';
import {pathToFileURL} from 'node:url';

const [trace] = process.argv.slice(2);
const modules = process.env.NODE_PATH;
if (!trace || !modules) {
  console.error('usage: NODE_PATH=DIR/node_modules node check_flows.mjs TRACE.json');
  process.exit(2);
}
// The engine measures layout with DOMRect in a browser; a plain value class is enough here.
globalThis.DOMRect ??= class {
  constructor(x = 0, y = 0, width = 0, height = 0) { Object.assign(this, {x, y, width, height}); }
};
const engine = path.join(modules, '@paulirish', 'trace_engine', 'models', 'trace', 'trace.js');
const Trace = await import(pathToFileURL(engine).href);

const events = JSON.parse(fs.readFileSync(trace, 'utf8')).traceEvents;
const starts = events.filter(e => e.ph === 's').length;
const model = Trace.TraceModel.Model.createWithAllHandlers();
await model.parse(events);
const parsed = model.parsedTrace();
const flows = (parsed.data ?? parsed).Flows.flows;

const fail = (why) => { console.error(`check_flows: ${trace}: ${why}`); process.exit(1); };
if (starts === 0) fail('the trace has no flow start events (no Enqueue -> Execution pairs)');
if (flows.length !== starts) fail(`DevTools bound ${flows.length} flows, the trace starts ${starts}`);
for (const flow of flows) {
  const names = flow.map(e => `${e.name} (pid ${e.pid}, tid ${e.tid}, cat ${e.cat})`).join(' -> ');
  if (flow.length !== 2 || flow[0].name !== 'Enqueue' || flow[1].name !== 'Execution' || flow[0].pid !== 1 ||
      flow[1].pid < 100) {
    fail(`a flow is not Enqueue (host) -> Execution (NPU): ${names}`);
  }
}
const slices = events.filter(e => e.ph === 'X').length;
const drawn = [...(parsed.data ?? parsed).Renderer.entryToNode.keys()].filter(e => e.ph === 'X').length;
if (drawn !== slices) fail(`DevTools placed ${drawn} of the trace's ${slices} slices in its track trees`);
console.log(`check_flows: DevTools binds all ${flows.length} Enqueue -> Execution flows and places ` +
            `all ${slices} slices of ${trace}`);
