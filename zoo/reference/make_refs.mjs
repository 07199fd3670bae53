// Reference outputs for the Kiln model zoo, computed by ONNX Runtime (CPU, 1 thread).
//
//   cd zoo/reference && npm install --ignore-scripts onnxruntime-node@1.30.0 && node make_refs.mjs
//
// Reads ../manifest.json (written by zoo/make_zoo.py), and for every model and case makes
// deterministic inputs (seeded PRNG), runs ONNX Runtime and writes
// zoo/cases/<model>/<case>/input_<i>.npy and output_<i>.npy (npy format 1.0, C order,
// float32 '<f4' / int64 '<i8'). Optional argument: model names to restrict to.

import fs from 'node:fs';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import ort from 'onnxruntime-node';

const HERE = path.dirname(fileURLToPath(import.meta.url));
const ZOO = path.resolve(HERE, '..');

// ---- deterministic PRNG ------------------------------------------------------------------

function fnv1a(str) {
  let h = 0x811c9dc5;
  for (let i = 0; i < str.length; i++) {
    h ^= str.charCodeAt(i);
    h = Math.imul(h, 0x01000193) >>> 0;
  }
  return h >>> 0;
}

// mulberry32: small, fast, fully deterministic across platforms.
function mulberry32(seed) {
  let a = seed >>> 0;
  return function next() {
    a = (a + 0x6d2b79f5) >>> 0;
    let t = a;
    t = Math.imul(t ^ (t >>> 15), t | 1);
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
  };
}

function normal(rand) {
  // Box-Muller; u1 in (0, 1].
  const u1 = 1 - rand();
  const u2 = rand();
  return Math.sqrt(-2 * Math.log(u1)) * Math.cos(2 * Math.PI * u2);
}

// ---- npy writer --------------------------------------------------------------------------

const NPY_DESCR = { float32: '<f4', int64: '<i8', int32: '<i4', uint8: '|u1', bool: '|b1' };

function npyBytes(dtype, shape, data) {
  const descr = NPY_DESCR[dtype];
  if (!descr) throw new Error(`npy: unsupported dtype ${dtype}`);
  const shapeStr = shape.length === 0 ? '()'
    : shape.length === 1 ? `(${shape[0]},)` : `(${shape.join(', ')})`;
  let header = `{'descr': '${descr}', 'fortran_order': False, 'shape': ${shapeStr}, }`;
  // magic(6) + version(2) + header_len(2) + header, padded with spaces, ending in '\n',
  // total a multiple of 64.
  const total = Math.ceil((10 + header.length + 1) / 64) * 64;
  header = header + ' '.repeat(total - 10 - header.length - 1) + '\n';
  const prefix = Buffer.alloc(10);
  prefix.write('\x93NUMPY', 0, 'latin1');
  prefix[6] = 1;
  prefix[7] = 0;
  prefix.writeUInt16LE(header.length, 8);
  const count = shape.reduce((a, b) => a * b, 1);
  if (data.length !== count) throw new Error(`npy: ${data.length} elements for shape ${shape}`);
  // Typed arrays are host-endian; every supported host (x64, arm64) is little-endian.
  const body = Buffer.from(data.buffer, data.byteOffset, data.byteLength);
  return Buffer.concat([prefix, Buffer.from(header, 'latin1'), body]);
}

function writeNpy(file, dtype, shape, data) {
  fs.mkdirSync(path.dirname(file), { recursive: true });
  fs.writeFileSync(file, npyBytes(dtype, shape, data));
}

// ---- inputs ------------------------------------------------------------------------------

function parseShapes(s) {
  return s.split(',').map((t) => t.split('x').map((v) => Number.parseInt(v, 10)));
}

// Valid (unpadded) length of each row of an attention mask [batch, seq]: row 0 is full,
// later rows are shorter (zeros at the end), every row keeps at least one 1. With batch 1
// and seq > 8 the single row is padded by a quarter.
function maskLengths(batch, seq) {
  const lens = [];
  for (let r = 0; r < batch; r++) {
    if (batch === 1) lens.push(seq > 8 ? seq - Math.floor(seq / 4) : seq);
    else lens.push(Math.max(1, seq - Math.floor((r * seq) / batch)));
  }
  return lens;
}

function makeInput(dtype, gen, shape, rand) {
  const count = shape.reduce((a, b) => a * b, 1);
  if (gen.kind === 'normal') {
    if (dtype !== 'float32') throw new Error(`normal generator needs float32, got ${dtype}`);
    const a = new Float32Array(count);
    for (let i = 0; i < count; i++) a[i] = normal(rand);
    return a;
  }
  if (gen.kind === 'int') {
    const span = gen.high - gen.low;
    const vals = Array.from({ length: count }, () => gen.low + Math.floor(rand() * span));
    return dtype === 'int64' ? BigInt64Array.from(vals, BigInt) : Int32Array.from(vals);
  }
  if (gen.kind === 'mask') {
    if (shape.length !== 2) throw new Error('mask generator needs [batch, seq]');
    const [batch, seq] = shape;
    const lens = maskLengths(batch, seq);
    const vals = [];
    for (let r = 0; r < batch; r++) for (let c = 0; c < seq; c++) vals.push(c < lens[r] ? 1 : 0);
    if (dtype === 'int64') return BigInt64Array.from(vals, BigInt);
    if (dtype === 'float32') return Float32Array.from(vals);
    return Int32Array.from(vals);
  }
  throw new Error(`unknown generator ${gen.kind}`);
}

// ---- main --------------------------------------------------------------------------------

function sameShape(a, b) {
  return a.length === b.length && a.every((v, i) => v === b[i]);
}

async function main() {
  const manifest = JSON.parse(fs.readFileSync(path.join(ZOO, 'manifest.json'), 'utf8'));
  const only = new Set(process.argv.slice(2));
  const options = {
    executionProviders: ['cpu'],
    intraOpNumThreads: 1,
    interOpNumThreads: 1,
    executionMode: 'sequential',
    // Literal graph semantics: no fusions that could change rounding.
    graphOptimizationLevel: 'disabled',
  };
  let failures = 0;
  for (const model of manifest.models) {
    if (only.size && !only.has(model.name)) continue;
    const session = await ort.InferenceSession.create(path.join(ZOO, model.onnx), options);
    if (!sameShape(session.inputNames, model.inputs) || !sameShape(session.outputNames, model.outputs)) {
      throw new Error(`${model.name}: ORT io names ${session.inputNames}/${session.outputNames} ` +
                      `differ from the manifest ${model.inputs}/${model.outputs}`);
    }
    fs.rmSync(path.join(ZOO, 'cases', model.name), { recursive: true, force: true });
    for (const c of model.cases) {
      const rand = mulberry32(fnv1a(`${model.name}/${c.name}`));
      const shapes = parseShapes(c.input_shapes);
      const feeds = {};
      model.inputs.forEach((name, i) => {
        const dtype = model.input_dtypes[i];
        const data = makeInput(dtype, model.input_generators[i], shapes[i], rand);
        feeds[name] = new ort.Tensor(dtype, data, shapes[i]);
        writeNpy(path.join(ZOO, c.inputs[i]), dtype, shapes[i], data);
      });
      const t0 = process.hrtime.bigint();
      const results = await session.run(feeds);
      const ms = Number(process.hrtime.bigint() - t0) / 1e6;
      const summary = [];
      model.outputs.forEach((name, i) => {
        const t = results[name];
        const dims = Array.from(t.dims);
        if (c.output_shapes && !sameShape(dims, c.output_shapes[i])) {
          console.error(`  MISMATCH ${model.name}/${c.name} output '${name}': ORT shape ` +
                        `[${dims}] but manifest says [${c.output_shapes[i]}]`);
          failures++;
        }
        let finite = true;
        if (t.type === 'float32') for (const v of t.data) if (!Number.isFinite(v)) { finite = false; break; }
        if (!finite) {
          console.error(`  NON-FINITE values in ${model.name}/${c.name} output '${name}'`);
          failures++;
        }
        writeNpy(path.join(ZOO, c.outputs[i]), t.type, dims, t.data);
        summary.push(`${name}[${dims.join('x')}]`);
      });
      console.log(`${model.name.padEnd(14)} ${c.name.padEnd(12)} ${c.input_shapes.padEnd(22)} ` +
                  `-> ${summary.join(' ')}  (${ms.toFixed(1)} ms)`);
    }
    await session.release();
  }
  if (failures) {
    console.error(`${failures} problem(s)`);
    process.exit(1);
  }
}

main().catch((e) => {
  console.error(e);
  process.exit(1);
});
