// Runs one ONNX model under ONNX Runtime (CPU, 1 thread) on float32 .npy inputs and prints
// each output as JSON {name, dims, data}. A development aid for checking a model outside the
// zoo against Kiln:  node run_ort.mjs MODEL.onnx a.npy [b.npy ...]
import fs from 'node:fs';
import ort from 'onnxruntime-node';

function readNpy(path) {
  const b = fs.readFileSync(path);
  const hlen = b.readUInt16LE(8);
  const header = b.toString('latin1', 10, 10 + hlen);
  const descr = /'descr':\s*'([^']+)'/.exec(header)[1];
  const shape = /'shape':\s*\(([^)]*)\)/.exec(header)[1].split(',').map((s) => s.trim()).filter((s) => s).map(Number);
  const body = b.subarray(10 + hlen);
  const copy = new Uint8Array(body).buffer;
  if (descr === '<f4') return new ort.Tensor('float32', new Float32Array(copy), shape);
  if (descr === '<i8') return new ort.Tensor('int64', new BigInt64Array(copy), shape);
  throw new Error(`${path}: dtype ${descr} not handled`);
}

const [model, ...inputs] = process.argv.slice(2);
const session = await ort.InferenceSession.create(model, { intraOpNumThreads: 1, interOpNumThreads: 1 });
const feeds = {};
session.inputNames.forEach((name, i) => { feeds[name] = readNpy(inputs[i]); });
const results = await session.run(feeds);
const out = session.outputNames.map((name) => ({ name, dims: results[name].dims, data: Array.from(results[name].data, Number) }));
process.stdout.write(JSON.stringify(out));
