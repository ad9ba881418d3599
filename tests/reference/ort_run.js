// Runs a model with ONNX Runtime (onnxruntime-node, CPU execution provider, one thread, all graph
// optimizations) on inputs given as raw files, and writes the outputs as raw files: the reference
// half of the tests in this folder.
//
// Usage: node ort_run.js MODEL.onnx JOB.json
// JOB.json: {"runs": [{"inputs": {"<name>": {"file": "<path>", "dims": [..]}, ...},
//                      "output_dir": "<dir>"}, ...],
//            "graph_optimization_level": "all" (default) | "disabled"}
// Input files hold float32 little-endian values, row-major. For each run the script writes
// <output_dir>/<output name>.bin (float32 little-endian, row-major) and <output_dir>/outputs.json
// ({"ort": version, "outputs": {"<name>": {"file", "dims"}}}). Exits 1 with a message naming the
// model, input or output on any failure (non-float32 tensors included).
'use strict';
const fs = require('fs');
const path = require('path');
const ort = require('onnxruntime-node');

async function main() {
  const [model, jobFile] = process.argv.slice(2);
  if (!model || !jobFile) {
    console.error('usage: node ort_run.js MODEL.onnx JOB.json');
    process.exit(2);
  }
  const job = JSON.parse(fs.readFileSync(jobFile, 'utf8'));
  const session = await ort.InferenceSession.create(model, {
    executionProviders: ['cpu'],
    intraOpNumThreads: 1,
    interOpNumThreads: 1,
    // 'all' (the default) or 'disabled': the graph as written, e.g. QDQ's literal float semantics.
    graphOptimizationLevel: job.graph_optimization_level || 'all',
  });
  const version = require('onnxruntime-node/package.json').version;
  for (const run of job.runs) {
    const feeds = {};
    for (const [name, spec] of Object.entries(run.inputs)) {
      const buf = fs.readFileSync(spec.file);
      const count = spec.dims.reduce((a, b) => a * b, 1);
      if (buf.length !== count * 4) {
        throw new Error(`${model}: input '${name}' file ${spec.file} has ${buf.length} bytes, ` +
                        `expected ${count * 4} (float32 ${JSON.stringify(spec.dims)})`);
      }
      const data = new Float32Array(count);
      for (let i = 0; i < count; ++i) data[i] = buf.readFloatLE(i * 4);
      feeds[name] = new ort.Tensor('float32', data, spec.dims);
    }
    const results = await session.run(feeds);
    fs.mkdirSync(run.output_dir, { recursive: true });
    const written = {};
    for (const [name, t] of Object.entries(results)) {
      if (t.type !== 'float32') throw new Error(`${model}: output '${name}' is ${t.type}, not float32`);
      const out = Buffer.alloc(t.data.length * 4);
      for (let i = 0; i < t.data.length; ++i) out.writeFloatLE(t.data[i], i * 4);
      const file = path.join(run.output_dir, `${name}.bin`);
      fs.writeFileSync(file, out);
      written[name] = { file, dims: t.dims };
    }
    fs.writeFileSync(path.join(run.output_dir, 'outputs.json'),
                     JSON.stringify({ ort: version, outputs: written }));
  }
}

main().catch((e) => {
  console.error(`ort_run: error: ${e.message}`);
  process.exit(1);
});
