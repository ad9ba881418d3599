// Where ONNX Runtime spends its time on one model: runs it with the CPU execution provider's
// profiler on (batch 1, THREADS intra-op threads, default 1), then prints, from the profile's
// per-node "kernel_time" events of the last RUNS runs, one JSON line per node
// {"node", "index", "op", "input", "output", "parameter_bytes", "median_us"} in decreasing order
// of time, and a last line {"total_us", "by_op": {op: us}, "run_median_us"}. `index` is the
// node's place in ONNX Runtime's optimized graph; shapes and constant bytes are as its profile
// records them after its graph optimizations (a QLinearConv's activations are NHWC there, and
// its prepacked weights are not counted). For side-by-side reading with
// `sim-bench --per-kernel`, whose lines give the simulator's time per NPU kernel
// (docs/simulator-speed.md). Inputs: ort_feeds.js (uniform random floats). Profiling
// adds a few percent to ONNX Runtime's own run time (compare run_median_us with ort_bench.js's
// median).
//
// Usage: node ort_layers.js MODEL.onnx [RUNS] [THREADS]   (installed by compare.sh into
// BUILD_DIR/ort-compare; run it from there)
'use strict';
const fs = require('fs');
const os = require('os');
const path = require('path');
const ort = require('onnxruntime-node');
const {randomFeeds} = require('./ort_feeds');

function median(values) {
  const v = [...values].sort((a, b) => a - b);
  return v[Math.floor(v.length / 2)];
}

async function main() {
  const model = process.argv[2];
  const runs = parseInt(process.argv[3] || '100', 10);
  const threads = parseInt(process.argv[4] || '1', 10);
  if (!model || !(runs > 0) || !(threads > 0)) {
    console.error('usage: node ort_layers.js MODEL.onnx [RUNS] [THREADS]');
    process.exit(2);
  }
  // The profile goes to a private temporary directory (ONNX Runtime appends a timestamp).
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'ort-layers-'));
  try {
    const session = await ort.InferenceSession.create(model, {
      executionProviders: ['cpu'],
      intraOpNumThreads: threads,
      interOpNumThreads: 1,
      graphOptimizationLevel: 'all',
      enableProfiling: true,
      profileFilePrefix: path.join(dir, 'profile'),
    });
    const feeds = randomFeeds(session);
    const warmup = 10;
    for (let i = 0; i < warmup + runs; ++i) await session.run(feeds);
    session.endProfiling();
    const files = fs.readdirSync(dir).filter((f) => f.endsWith('.json'));
    if (files.length !== 1)
      throw new Error(`expected one profile in ${dir}, found ${files.length}`);
    const events = JSON.parse(fs.readFileSync(path.join(dir, files[0]), 'utf8'));
    const runTimes = events.filter((e) => e.name === 'model_run').map((e) => e.dur);
    // Node events in run order; keep the last `runs` occurrences of each node (the warm-up's
    // are dropped).
    const perNode = new Map();
    for (const e of events) {
      if (e.cat !== 'Node' || !e.name.endsWith('_kernel_time')) continue;
      const name = e.name.slice(0, -'_kernel_time'.length);
      if (!perNode.has(name)) {
        perNode.set(name, {
          index: Number(e.args.node_index),
          op: e.args.op_name,
          input: (e.args.input_type_shape || []).slice(0, 1),
          output: e.args.output_type_shape,
          parameter_bytes: Number(e.args.parameter_size || 0),
          dur: [],
        });
      }
      perNode.get(name).dur.push(e.dur);
    }
    const rows = [];
    for (const [node, v] of perNode) {
      rows.push({
        node,
        index: v.index,
        op: v.op,
        input: v.input,
        output: v.output,
        parameter_bytes: v.parameter_bytes,
        median_us: median(v.dur.slice(-runs)),
      });
    }
    rows.sort((a, b) => b.median_us - a.median_us);
    const byOp = {};
    let total = 0;
    for (const r of rows) {
      console.log(JSON.stringify(r));
      byOp[r.op] = (byOp[r.op] || 0) + r.median_us;
      total += r.median_us;
    }
    console.log(JSON.stringify({
      total_us: total,
      by_op: byOp,
      run_median_us: median(runTimes.slice(-runs)),
      ort: require('onnxruntime-node/package.json').version,
      threads,
      runs,
    }));
  } finally {
    fs.rmSync(dir, {recursive: true, force: true});
  }
}

main().catch((e) => {
  console.error(`error: ${e.message}`);
  process.exit(1);
});
