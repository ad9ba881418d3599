// The inputs ort_bench.js and ort_layers.js run a model on: uniform random floats in [0, 1) for
// every input, symbolic dims taken as 1 (batch 1). Timing does not depend on the values. Throws
// for an input that is not float32 (the models compared all take float images).
'use strict';
const ort = require('onnxruntime-node');

function randomFeeds(session) {
  const feeds = {};
  for (const meta of session.inputMetadata) {
    if (meta.type !== 'float32') throw new Error(`input ${meta.name}: ${meta.type} is not float32`);
    const dims = meta.shape.map((d) => (typeof d === 'number' ? d : 1));
    const data = new Float32Array(dims.reduce((a, b) => a * b, 1));
    for (let i = 0; i < data.length; ++i) data[i] = Math.random();
    feeds[meta.name] = new ort.Tensor('float32', data, dims);
  }
  return feeds;
}

module.exports = {randomFeeds};
