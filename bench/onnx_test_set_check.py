#!/usr/bin/python3
"""onnx_test_set_check: each job's exported ONNX model against psflow's
evaluator on the job's whole test set (issue 34).

Per config:
  1. trains the job: `psctl local --ps=2 --workers=2 --evaluator
     --device=cpu` (a copy of the config whose CRITEO files live in
     --work_dir/data, generated there by the config's data.synthesize, the
     same files the shipped path would hold; --epochs shortens a job);
  2. exports its final checkpoint: `psctl ckpt export --format=onnx`;
  3. runs onnx.checker.check_model (tests/onnx_check/check_onnx.py, full
     check);
  4. psflow's prediction for every test example through the evaluator's
     own code (bench/evaluator_predictions: its test-data reader, model and
     row pulls on an in-process server restored from the checkpoint), and
     ONNX Runtime's (bench/onnx_predict.js, onnxruntime-node as
     tools/setup.sh installs it) on the same examples fed as
     docs/models.md documents: raw pixel values read from the IDX file
     here, or the raw Criteo columns turned into `dense` and `ids` by
     tools/ctr_feature_id.py, so the preprocessing inside the model runs;
  5. prints per model the examples, max |p_onnx - p_psflow|, AUC or
     accuracy from each side and the evaluator's own final metric
     (result.json), and exits 1 when a check fails.

An id no table row holds reads zeros, the table's default row, in the
ONNX model and in psflow's evaluator alike (docs/models.md, "Embedding
tables"; before 2026-11-27 the evaluator read its initializer's row). For
CRITEO jobs psflow is also run with the same tables under a ZEROS
initializer ("zero_rows"), which must give the evaluator's predictions.
Checks:
  - ONNX against psflow's evaluator: every example within --tolerance,
    the same AUC and accuracy; the examples holding an id the job never
    trained are counted and reported apart;
  - psflow evaluator's AUC, log loss and accuracy (recomputed here from
    its probabilities, and its own report) equal the evaluator's logged
    final metric, and the final evaluation's step is the checkpoint's.
Image jobs have no tables: ONNX against psflow on every example, the same
accuracy, the evaluator's logged accuracy.

  bazel build --config=opt //client/psctl:psctl //ps:ps_server //worker \\
      //chief //evaluator //bench:evaluator_predictions
  bash tools/setup.sh    # onnxruntime-node under ~/.cache/psflow
  /usr/bin/python3 bench/onnx_test_set_check.py [--bin_dir=bazel-bin] \\
      [--configs=configs/ctr_dlrm.json,...] [--epochs=NAME:N,...]

Needs numpy and onnx (Debian's python3-numpy, python3-onnx: run it with
/usr/bin/python3) and node.
"""

import argparse
import gzip
import json
import os
import re
import shutil
import struct
import subprocess
import sys
import time

import numpy as np

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.join(REPO, "tools"))
import ctr_feature_id  # noqa: E402  (tools/, standard-library Python)

CONFIGS = ["configs/ctr_dlrm.json", "configs/ctr_dcn_v2.json",
           "configs/ctr_deepfm.json", "configs/ctr_wide_deep_graph.json",
           "configs/fashion_mnist_mlp.json",
           "configs/fashion_mnist_convnet.json"]


class CheckFailed(Exception):
    pass


def run(cmd, log_path, timeout_s):
    """Runs `cmd`; returns its output. Raises CheckFailed with the log's
    tail when it fails."""
    out = subprocess.run(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                         text=True, timeout=timeout_s)
    with open(log_path, "w") as f:
        f.write(out.stdout)
    if out.returncode != 0:
        raise CheckFailed("%s failed (exit %d), log %s:\n%s" % (
            " ".join(cmd[:3]), out.returncode, log_path, out.stdout[-3000:]))
    return out.stdout


def job_copy(config, work, epochs):
    """The config, with CRITEO files under work/data and `epochs` if set;
    returns (path of the copy, job)."""
    job = json.load(open(config))
    name = job["name"]
    notes = []
    if job.get("data", {}).get("format") == "CRITEO":
        job["data"]["train_path"] = os.path.join(work, "data", "train.txt")
        job["data"]["test_path"] = os.path.join(work, "data", "test.txt")
    if name in epochs:
        notes.append("%d of its %d epochs" % (epochs[name],
                                              job["training"]["epochs"]))
        job["training"]["epochs"] = epochs[name]
    path = os.path.join(work, name, name + ".json")
    os.makedirs(os.path.dirname(path), exist_ok=True)
    with open(path, "w") as f:
        json.dump(job, f, indent=1)
    return path, job, notes


def final_checkpoint(directory):
    state = open(os.path.join(directory, "checkpoint")).read()
    m = re.search(r'^model_checkpoint_path: "([^"]+)"', state, re.M)
    if not m:
        raise CheckFailed("no checkpoint named in %s/checkpoint" % directory)
    return os.path.join(directory, m.group(1))


def read_idx(path):
    """An IDX file's array (uint8 data) as numpy."""
    with gzip.open(path, "rb") if path.endswith(".gz") else open(path,
                                                                 "rb") as f:
        data = f.read()
    zero, kind, rank = struct.unpack(">HBB", data[:4])
    if zero != 0 or kind != 0x08:
        raise CheckFailed("%s is not an IDX file of bytes" % path)
    dims = struct.unpack(">" + "I" * rank, data[4:4 + 4 * rank])
    return np.frombuffer(data[4 + 4 * rank:], dtype=np.uint8).reshape(dims)


def onnx_inputs(model_path):
    """The model's inputs: [(name, "float32"|"int64")]."""
    import onnx
    model = onnx.load(model_path)
    kinds = {onnx.TensorProto.FLOAT: "float32", onnx.TensorProto.INT64: "int64"}
    return [(i.name, kinds[i.type.tensor_type.elem_type])
            for i in model.graph.input]


def write_inputs(job, model_path, out_dir):
    """ONNX's inputs for the whole test set, as docs/models.md documents
    them, in raw files; returns (inputs.json path, labels)."""
    inputs = []
    data = job["data"]
    if data.get("format") == "CRITEO":
        num_dense = data.get("num_dense", 13)
        num_fields = data.get("num_fields", 26)
        labels = []
        with open(data["test_path"]) as f:
            lines = [line for line in f if line.strip()]
        for line in lines:
            labels.append(int(line.split("\t", 1)[0]))
        dense, ids = ctr_feature_id.criteo_inputs(lines, num_dense, num_fields)
        arrays = {"dense": np.array(dense, dtype=np.int64),
                  "ids": np.array(ids, dtype=np.int64)}
        labels = np.array(labels, dtype=np.int64)
    else:
        pixels = read_idx(data["test_images"]).astype(np.float32)
        labels = read_idx(data["test_labels"]).astype(np.int64)
        arrays = {"pixels": pixels}
    for name, kind in onnx_inputs(model_path):
        # "ids" by name; the one other input is the features (a graph's
        # features input keeps its own name).
        key = "ids" if name == "ids" else (
            "dense" if kind == "int64" else "pixels")
        array = arrays[key]
        if array.dtype != np.dtype(kind):
            raise CheckFailed("input %s is %s; the data are %s" % (
                name, kind, array.dtype))
        path = os.path.join(out_dir, "input_%s.bin" % key)
        np.ascontiguousarray(array).astype("<" + array.dtype.str[1:]).tofile(
            path)
        inputs.append({"name": name, "type": kind,
                       "dims": list(array.shape), "path": path})
    inputs_path = os.path.join(out_dir, "inputs.json")
    with open(inputs_path, "w") as f:
        json.dump(inputs, f)
    return inputs_path, labels


def auc(scores, labels):
    """The exact ROC AUC, ties counting one half (as
    common/binary_metrics.h computes it)."""
    scores = np.asarray(scores, dtype=np.float64)
    order = np.argsort(scores, kind="mergesort")
    _, inverse, counts = np.unique(scores[order], return_inverse=True,
                                   return_counts=True)
    ends = np.cumsum(counts)
    average = ends - (counts - 1) / 2.0  # 1-based mean rank of each value
    ranks = np.empty(len(scores))
    ranks[order] = average[inverse]
    positive = labels == 1
    n1 = positive.sum()
    n0 = len(labels) - n1
    return (ranks[positive].sum() - n1 * (n1 + 1) / 2.0) / (n1 * n0)


def log_loss(p, labels):
    p = np.clip(np.asarray(p, dtype=np.float64), 1e-7, 1 - 1e-7)
    return float(-np.mean(labels * np.log(p) + (1 - labels) * np.log(1 - p)))


def classes(p):
    return (p[:, 0] >= 0.5).astype(np.int64) if p.shape[1] == 1 else \
        np.argmax(p, axis=1)


def margin(p):
    """How far each example's decision is from flipping."""
    if p.shape[1] == 1:
        return np.abs(p[:, 0] - 0.5)
    top = np.sort(p, axis=1)
    return top[:, -1] - top[:, -2]


def compare(name, onnx_p, psflow_p, labels, tolerance, mask=None):
    """ONNX's probabilities against psflow's on the examples of `mask`
    (default all): max |difference| and its example, class flips beyond
    the tolerance's margin, and the metrics on every example."""
    diff = np.abs(onnx_p - psflow_p).max(axis=1)
    where = np.arange(len(diff)) if mask is None else np.flatnonzero(mask)
    worst = int(where[np.argmax(diff[where])]) if len(where) else -1
    flips = np.flatnonzero(classes(onnx_p) != classes(psflow_p))
    hard_flips = [int(i) for i in flips if margin(psflow_p[i:i + 1])[0] >
                  tolerance and (mask is None or mask[i])]
    return {"name": name, "examples": len(where),
            "max_diff": float(diff[worst]) if worst >= 0 else 0.0,
            "at": worst, "flips": len(flips), "hard_flips": hard_flips,
            "over": int((diff[where] > tolerance).sum())}


def metrics(p, labels):
    if p.shape[1] == 1:
        return {"auc": auc(p[:, 0], labels), "loss": log_loss(p[:, 0], labels),
                "accuracy": float((classes(p) == labels).mean())}
    chosen = np.clip(p[np.arange(len(labels)), labels].astype(np.float64),
                     1e-30, 1)
    return {"loss": float(-np.mean(np.log(chosen))),
            "accuracy": float((classes(p) == labels).mean())}


def check_one(config, args, work, epochs):
    name = os.path.splitext(os.path.basename(config))[0]
    path, job, notes = job_copy(config, work, epochs)
    out = os.path.join(work, name)
    problems = []

    started = time.monotonic()
    run_dir = os.path.join(out, "run")
    run([os.path.join(args.bin_dir, "client/psctl/psctl"), "local",
         "--job=" + path, "--ps=2", "--workers=2", "--evaluator",
         "--device=cpu", "--dir=" + run_dir, "--bin_dir=" + args.bin_dir],
        os.path.join(out, "psctl_local.log"), args.timeout_s)
    train_s = time.monotonic() - started
    result = json.load(open(os.path.join(run_dir, "result.json")))
    checkpoint = final_checkpoint(os.path.join(run_dir, "checkpoints"))
    evaluator_log = open(os.path.join(run_dir, "evaluator-0.log")).read()
    m = re.search(r"final evaluation, step (\d+)", evaluator_log)
    final_step = int(m.group(1)) if m else None

    onnx_path = os.path.join(out, name + ".onnx")
    exported = run([os.path.join(args.bin_dir, "client/psctl/psctl"), "ckpt",
                    "export", checkpoint, "--format=onnx",
                    "--out=" + onnx_path],
                   os.path.join(out, "export.log"), args.timeout_s)
    checked = run(["/usr/bin/python3",
                   os.path.join(REPO, "tests/onnx_check/check_onnx.py"),
                   onnx_path], os.path.join(out, "check_onnx.log"), 600)
    if "check_onnx: OK" not in checked:
        problems.append("check_onnx: " + checked.strip())

    pred_dir = os.path.join(out, "predictions")
    run([os.path.join(args.bin_dir, "bench/evaluator_predictions"),
         "--job=" + path, "--checkpoint=" + checkpoint, "--out=" + pred_dir],
        os.path.join(out, "evaluator_predictions.log"), args.timeout_s)
    summary = json.load(open(os.path.join(pred_dir, "summary.json")))
    inputs_path, labels = write_inputs(job, onnx_path, pred_dir)
    onnx_f32 = os.path.join(pred_dir, "onnx.f32")
    ran = run(["node", os.path.join(REPO, "bench/onnx_predict.js"),
               args.node_modules, onnx_path, inputs_path, onnx_f32],
              os.path.join(out, "onnx_predict.log"), args.timeout_s)

    n, columns = summary["examples"], summary["classes"]
    if len(labels) != n:
        problems.append("psflow read %d test examples, this script %d" % (
            n, len(labels)))
    load = lambda f: np.fromfile(os.path.join(pred_dir, f),
                                 dtype="<f4").reshape(n, columns)
    onnx_p = load("onnx.f32")
    variants = {v: load(v + ".f32") for v in summary["variants"]}
    ctr = summary["kind"] == "ctr"
    unseen = (np.fromfile(os.path.join(pred_dir, "unseen.u8"), dtype=np.uint8)
              if ctr else np.zeros(n, dtype=np.uint8))
    seen = unseen == 0

    # Psflow's side is the evaluator's: its report, recomputed here, and
    # the job's own final evaluation.
    evaluator = variants["evaluator"]
    reported = summary["variants"]["evaluator"]
    ours = metrics(evaluator, labels)
    logged = {"accuracy": result.get("test_accuracy"),
              "loss": result.get("test_loss")}
    if ctr:
        logged["auc"] = result.get("test_auc")
    for key, value in ours.items():
        if abs(value - reported[key]) > 1e-6:
            problems.append("psflow's %s recomputed here is %.6f, its "
                            "report %.6f" % (key, value, reported[key]))
        if logged.get(key) is None or abs(reported[key] - logged[key]) > 1e-6:
            problems.append("psflow's %s on the final checkpoint is %.6f; "
                            "the job's final evaluation logged %s" % (
                                key, reported[key], logged.get(key)))
    if final_step != summary["global_step"]:
        problems.append("the final evaluation was at step %s, the final "
                        "checkpoint is step %d" % (final_step,
                                                   summary["global_step"]))

    # ONNX against psflow's evaluator: every example must agree (an unseen
    # id reads the default row, zeros, on both sides); the examples whose
    # ids were all seen and the others are also reported apart.
    strict_name = "evaluator"
    strict = compare(strict_name, onnx_p, variants[strict_name], labels,
                     args.tolerance)
    if ctr:
        zero_rows = compare("zero_rows", evaluator, variants["zero_rows"],
                            labels, args.tolerance)
        if zero_rows["max_diff"] > args.tolerance:
            problems.append("psflow's evaluator against the same tables "
                            "under a ZEROS initializer: example %d differs "
                            "by %.3g" % (zero_rows["at"],
                                         zero_rows["max_diff"]))
    against_evaluator = compare("evaluator", onnx_p, evaluator, labels,
                                args.tolerance, mask=seen)
    affected = compare("evaluator", onnx_p, evaluator, labels, args.tolerance,
                       mask=~seen) if ctr else None
    onnx_metrics = metrics(onnx_p, labels)
    strict_metrics = metrics(variants[strict_name], labels)
    for c in [strict, against_evaluator]:
        if c["max_diff"] > args.tolerance:
            problems.append("ONNX against psflow %s%s: example %d differs by "
                            "%.3g (ONNX %s, psflow %s)" % (
                                c["name"], "" if c is strict else
                                " (examples with every id seen)", c["at"],
                                c["max_diff"], onnx_p[c["at"]],
                                variants[c["name"]][c["at"]]))
        if c["hard_flips"]:
            problems.append("ONNX against psflow %s: %d examples change "
                            "class beyond the tolerance's margin (first %d)" %
                            (c["name"], len(c["hard_flips"]),
                             c["hard_flips"][0]))
    for key, value in onnx_metrics.items():
        # Near-ties of the two sides may reorder: a few pairs at most.
        bound = 1e-5 if key != "accuracy" else strict["flips"] / n
        if abs(value - strict_metrics[key]) > bound:
            problems.append("ONNX's %s is %.6f, psflow %s's %.6f" % (
                key, value, strict_name, strict_metrics[key]))

    return {"name": name, "notes": notes, "examples": n,
            "step": summary["global_step"], "train_s": train_s,
            "strict": strict, "evaluator": against_evaluator,
            "affected": affected, "unseen_ids": summary.get("unseen_ids"),
            "onnx": onnx_metrics, "psflow": strict_metrics,
            "psflow_evaluator": ours, "logged": logged,
            "onnx_seconds": re.search(r"([\d.]+) s$", ran.strip()).group(1),
            "problems": problems, "exported": exported.strip().splitlines()[-1]}


def show(r):
    metric = "auc" if "auc" in r["onnx"] else "accuracy"
    print("%s: %d test examples, final step %d, trained in %.0f s%s" % (
        r["name"], r["examples"], r["step"], r["train_s"],
        " (" + ", ".join(r["notes"]) + ")" if r["notes"] else ""))
    print("  ONNX vs psflow %s: max |diff| %.3g (example %d), %d over the "
          "tolerance, %d class flips" % (
              r["strict"]["name"], r["strict"]["max_diff"], r["strict"]["at"],
              r["strict"]["over"], r["strict"]["flips"]))
    if r["affected"] is not None:
        print("  ONNX vs psflow evaluator, %d examples with every id seen: max "
              "|diff| %.3g" % (r["evaluator"]["examples"],
                               r["evaluator"]["max_diff"]))
        print("  ONNX vs psflow evaluator, %d examples holding one of %d "
              "unseen ids: max |diff| %.3g, %d over the tolerance" % (
                  r["affected"]["examples"], r["unseen_ids"],
                  r["affected"]["max_diff"], r["affected"]["over"]))
    print("  %s: ONNX %.6f, psflow evaluator %.6f, the job's final "
          "evaluation %.6f" % (metric, r["onnx"][metric],
                               r["psflow_evaluator"][metric],
                               r["logged"][metric]))
    for p in r["problems"]:
        print("  FAILED: " + p)
    sys.stdout.flush()


def table(results, tolerance):
    print()
    print("| model | test examples | max \\|p_onnx - p_evaluator\\| | "
          "examples with an unseen id | max \\|p_onnx - p_evaluator\\|: all "
          "ids seen / some unseen | metric | ONNX | psflow evaluator | "
          "evaluator's logged final | check |")
    print("|---|---:|---:|---:|---:|---|---:|---:|---:|---|")
    for r in results:
        metric = "auc" if "auc" in r["onnx"] else "accuracy"
        if r["affected"] is not None:
            unseen = "%d (%d ids)" % (r["affected"]["examples"],
                                      r["unseen_ids"])
            against = "%.2g / %.2g" % (r["evaluator"]["max_diff"],
                                       r["affected"]["max_diff"])
        else:
            unseen, against = "none (no tables)", "%.2g / -" % (
                r["evaluator"]["max_diff"])
        print("| %s%s | %d | %.2g | %s | %s | %s | %.6f | %.6f | %.6f | "
              "%s |" % (
                  r["name"], " (" + ", ".join(r["notes"]) + ")"
                  if r["notes"] else "", r["examples"],
                  r["strict"]["max_diff"], unseen, against,
                  "AUC" if metric == "auc" else "accuracy",
                  r["onnx"][metric], r["psflow_evaluator"][metric],
                  r["logged"][metric],
                  "FAILED" if r["problems"] else "pass (<= %g)" % tolerance))


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--configs", default=",".join(CONFIGS))
    parser.add_argument("--bin_dir", default=os.path.join(REPO, "bazel-bin"))
    parser.add_argument("--epochs", default="",
                        help="NAME:EPOCHS,...: train these jobs for that many "
                        "epochs instead of their configs' (e.g. "
                        "fashion_mnist_convnet:2; its 20 take about 20 "
                        "minutes on 2 cores)")
    parser.add_argument("--tolerance", type=float, default=1e-4)
    parser.add_argument("--node_modules", default=os.path.expanduser(
        "~/.cache/psflow/onnxruntime/node_modules"))
    parser.add_argument("--work_dir", default="/tmp/psflow-onnx-check",
                        help="runs, exports and predictions; CRITEO data in "
                        "its data/ (kept between runs)")
    parser.add_argument("--clean", action="store_true",
                        help="remove each job's folder once it passed")
    parser.add_argument("--timeout_s", type=int, default=3600)
    args = parser.parse_args()
    epochs = {}
    for item in filter(None, args.epochs.split(",")):
        key, _, value = item.partition(":")
        epochs[key] = int(value)
    os.makedirs(args.work_dir, exist_ok=True)
    print("onnx_test_set_check: work in %s, %d cores, tolerance %g" % (
        args.work_dir, os.cpu_count(), args.tolerance))
    results, failed = [], []
    for config in args.configs.split(","):
        if not os.path.isabs(config):
            config = os.path.join(REPO, config)
        try:
            r = check_one(config, args, args.work_dir, epochs)
        except CheckFailed as e:
            print("%s: FAILED: %s" % (os.path.basename(config), e))
            failed.append(config)
            continue
        show(r)
        results.append(r)
        if r["problems"]:
            failed.append(config)
        elif args.clean:
            shutil.rmtree(os.path.join(args.work_dir, r["name"]))
    table(results, args.tolerance)
    if failed:
        print("\nonnx_test_set_check: FAILED: " + ", ".join(failed))
        sys.exit(1)
    print("\nonnx_test_set_check: all %d passed" % len(results))


if __name__ == "__main__":
    main()
