// Runs a psflow ONNX export with ONNX Runtime (onnxruntime-node, an
// implementation independent of psflow) on the inputs of a reference file
// that tests/onnx_reference.h wrote, and compares its "probabilities" with
// psflow's own.
//
//   node run_onnx.js <node_modules> <model.onnx> <reference.json> <tolerance>
//       [<inputs.json>]
//
// With <inputs.json> ({"inputs": [...]}, what tools/ctr_feature_id.py
// prints), the model's inputs come from it instead of the reference.
//
// Prints "max_abs_diff=<d> examples=<n> classes_agree=<k>
// probabilities_in=[<low>, <high>]" and exits 0 when d <= tolerance, the
// predicted classes agree wherever psflow's two best classes are further
// apart than the tolerance, and psflow's probabilities vary (a constant
// model would prove nothing); prints the problem and exits 1 otherwise.
"use strict";
const fs = require("fs");
const path = require("path");

function fail(message) {
  console.log("run_onnx: " + message);
  process.exit(1);
}

function tensorOf(ort, input) {
  if (input.type === "float32") {
    return new ort.Tensor("float32", Float32Array.from(input.data), input.dims);
  }
  if (input.type === "int64") {
    return new ort.Tensor(
        "int64", BigInt64Array.from(input.data.map((v) => BigInt(v))),
        input.dims);
  }
  fail("unknown input type " + input.type);
}

// The best class per row; for one column, probability >= 0.5.
function classes(data, rows, columns) {
  const out = [];
  for (let r = 0; r < rows; ++r) {
    if (columns === 1) {
      out.push(data[r] >= 0.5 ? 1 : 0);
      continue;
    }
    let best = 0;
    for (let c = 1; c < columns; ++c) {
      if (data[r * columns + c] > data[r * columns + best]) best = c;
    }
    out.push(best);
  }
  return out;
}

// How far apart row r's decision is from flipping.
function margin(data, r, columns) {
  if (columns === 1) return Math.abs(data[r] - 0.5);
  const row = Array.from(data.slice(r * columns, (r + 1) * columns));
  row.sort((a, b) => b - a);
  return row[0] - row[1];
}

async function main() {
  const [modules, model, referencePath, toleranceText, inputsPath] =
      process.argv.slice(2);
  if (toleranceText === undefined) {
    fail("usage: run_onnx.js <node_modules> <model.onnx> <reference.json> " +
         "<tolerance>");
  }
  const ort = require(path.join(modules, "onnxruntime-node"));
  const reference = JSON.parse(fs.readFileSync(referencePath, "utf8"));
  if (inputsPath !== undefined) {
    reference.inputs = JSON.parse(fs.readFileSync(inputsPath, "utf8")).inputs;
  }
  const tolerance = Number(toleranceText);
  const session = await ort.InferenceSession.create(model);
  const feeds = {};
  for (const input of reference.inputs) {
    if (!session.inputNames.includes(input.name)) {
      fail("the model has no input " + input.name + "; its inputs: " +
           session.inputNames.join(", "));
    }
    feeds[input.name] = tensorOf(ort, input);
  }
  for (const name of session.inputNames) {
    if (!(name in feeds)) fail("the reference gives no input " + name);
  }
  const results = await session.run(feeds);
  const got = results.probabilities;
  const want = reference.probabilities;
  if (JSON.stringify(got.dims.map(Number)) !== JSON.stringify(want.dims)) {
    fail("probabilities are [" + got.dims + "], psflow's [" + want.dims + "]");
  }
  const [rows, columns] = want.dims;
  let worst = 0;
  let at = 0;
  for (let i = 0; i < want.data.length; ++i) {
    const d = Math.abs(got.data[i] - want.data[i]);
    if (!(d <= worst)) {
      worst = d;
      at = i;
    }
  }
  const ours = classes(got.data, rows, columns);
  let agree = 0;
  for (let r = 0; r < rows; ++r) {
    if (ours[r] === reference.classes[r]) {
      ++agree;
    } else if (margin(want.data, r, columns) > tolerance) {
      fail("example " + r + ": ONNX Runtime predicts class " + ours[r] +
           ", psflow " + reference.classes[r]);
    }
  }
  const low = Math.min(...want.data), high = Math.max(...want.data);
  console.log("max_abs_diff=" + worst.toExponential(3) + " examples=" + rows +
              " classes_agree=" + agree + " probabilities_in=[" +
              low.toFixed(4) + ", " + high.toFixed(4) + "]");
  // A model that says the same for every example proves nothing. Its
  // probabilities may all sit near 0 (or 1) and still differ: the spread
  // is measured in log-odds, which do not crowd there.
  const logOdds = (p) => {
    const q = Math.min(Math.max(p, 1e-30), 1 - 1e-7);
    return Math.log(q / (1 - q));
  };
  const odds = Array.from(want.data, logOdds);
  const spread = Math.max(...odds) - Math.min(...odds);
  if (!(spread > 0.1)) {
    fail("psflow's probabilities span only [" + low + ", " + high +
         "] (log-odds spread " + spread + "): not a trained model, or " +
         "inputs that do not vary");
  }
  if (!(worst <= tolerance)) {
    fail("probability " + at + " differs by " + worst + " (ONNX Runtime " +
         got.data[at] + ", psflow " + want.data[at] + "), over " + tolerance);
  }
}

main().catch((e) => fail(String(e && e.stack ? e.stack : e)));
