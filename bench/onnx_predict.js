// Runs a psflow ONNX export with ONNX Runtime (onnxruntime-node, the
// runtime //tests:onnx_export_test uses, independent of psflow) on inputs
// held in raw little-endian files, a chunk of examples at a time, and
// writes its "probabilities" as raw little-endian float32.
//
//   node onnx_predict.js <node_modules> <model.onnx> <inputs.json> <out.f32>
//       [<examples per run>]
//
// <inputs.json>: [{"name", "type": "float32"|"int64", "dims", "path"}, ...],
// every input's first dimension the examples. bench/onnx_test_set_check.py
// writes it. Prints "onnx_predict: <examples> examples, <columns>
// probabilities each, <seconds> s"; exits 1 naming the problem otherwise.
"use strict";
const fs = require("fs");
const path = require("path");

function fail(message) {
  console.log("onnx_predict: " + message);
  process.exit(1);
}

// The whole file as a typed array of `type` (copied: a Buffer's offset
// need not be aligned for 8-byte elements).
function readArray(file, type, count) {
  const bytes = fs.readFileSync(file);
  const Kind = type === "float32" ? Float32Array :
               type === "int64" ? BigInt64Array : null;
  if (Kind === null) fail("unknown input type " + type);
  if (bytes.length !== count * Kind.BYTES_PER_ELEMENT) {
    fail(file + " holds " + bytes.length + " bytes, not " + count + " " +
         type + " values");
  }
  const aligned = new Uint8Array(bytes.length);
  aligned.set(bytes);
  return new Kind(aligned.buffer);
}

async function main() {
  const [modules, model, inputsPath, outPath, chunkText] =
      process.argv.slice(2);
  if (outPath === undefined) {
    fail("usage: onnx_predict.js <node_modules> <model.onnx> <inputs.json> " +
         "<out.f32> [<examples per run>]");
  }
  const ort = require(path.join(modules, "onnxruntime-node"));
  const chunk = Number(chunkText || 4096);
  const inputs = JSON.parse(fs.readFileSync(inputsPath, "utf8")).map((i) => {
    const count = i.dims.reduce((a, b) => a * b, 1);
    return Object.assign({}, i, {
      data: readArray(i.path, i.type, count),
      perExample: count / i.dims[0],
    });
  });
  const examples = inputs[0].dims[0];
  for (const i of inputs) {
    if (i.dims[0] !== examples) fail(i.name + " has " + i.dims[0] + " rows");
  }
  const session = await ort.InferenceSession.create(model);
  for (const name of session.inputNames) {
    if (!inputs.some((i) => i.name === name)) {
      fail("no data for the model's input " + name);
    }
  }
  const started = Date.now();
  const out = fs.openSync(outPath, "w");
  let columns = 0;
  for (let begin = 0; begin < examples; begin += chunk) {
    const n = Math.min(chunk, examples - begin);
    const feeds = {};
    for (const i of inputs) {
      const slice = i.data.slice(begin * i.perExample,
                                 (begin + n) * i.perExample);
      feeds[i.name] = new ort.Tensor(i.type, slice, [n].concat(i.dims.slice(1)));
    }
    const probabilities = (await session.run(feeds)).probabilities;
    columns = Number(probabilities.dims[1]);
    if (Number(probabilities.dims[0]) !== n) {
      fail("probabilities are [" + probabilities.dims + "] for " + n +
           " examples");
    }
    fs.writeSync(out, Buffer.from(probabilities.data.buffer,
                                  probabilities.data.byteOffset,
                                  probabilities.data.byteLength));
  }
  fs.closeSync(out);
  console.log("onnx_predict: " + examples + " examples, " + columns +
              " probabilities each, " +
              ((Date.now() - started) / 1000).toFixed(1) + " s");
}

main().catch((e) => fail(String(e && e.stack ? e.stack : e)));
