// Times ONNX Runtime's CPU execution provider on one model, batch 1, with THREADS intra-op
// threads (default 1, the setting of issue 8's target). Prints one JSON line: {"model", "ort",
// "runs", "threads", "p10_ms", "median_ms", "p90_ms"}. Inputs are uniform random floats (timing
// does not depend on them).
//
// Usage: node ort_bench.js MODEL.onnx [RUNS] [THREADS]
'use strict';
const ort = require('onnxruntime-node');
const {randomFeeds} = require('./ort_feeds');

async function main() {
  const model = process.argv[2];
  const runs = parseInt(process.argv[3] || '300', 10);
  const threads = parseInt(process.argv[4] || '1', 10);
  if (!model || !(runs > 0) || !(threads > 0)) {
    console.error('usage: node ort_bench.js MODEL.onnx [RUNS] [THREADS]');
    process.exit(2);
  }
  const session = await ort.InferenceSession.create(model, {
    executionProviders: ['cpu'],
    intraOpNumThreads: threads,
    interOpNumThreads: 1,
    graphOptimizationLevel: 'all',
  });
  const feeds = randomFeeds(session);
  for (let i = 0; i < 20; ++i) await session.run(feeds);  // warm-up
  const ms = [];
  for (let i = 0; i < runs; ++i) {
    const start = process.hrtime.bigint();
    await session.run(feeds);
    ms.push(Number(process.hrtime.bigint() - start) / 1e6);
  }
  ms.sort((a, b) => a - b);
  const at = (q) => ms[Math.min(ms.length - 1, Math.floor(q * ms.length))];
  console.log(JSON.stringify({
    model,
    ort: require('onnxruntime-node/package.json').version,
    runs,
    threads,
    p10_ms: at(0.1),
    median_ms: at(0.5),
    p90_ms: at(0.9),
  }));
}

main().catch((e) => {
  console.error(`error: ${e.message}`);
  process.exit(1);
});
