#!/usr/bin/python3
"""A model-zoo job (a config's `model.graph`, docs/models.md) trained in
PyTorch by its twin (model/graph/parity/torch_twin.py, the graph that
//model/graph/parity:torch_parity_test checks against psflow's), on the
same files, with the same initial values, optimizer, learning rates,
batches and evaluation as psflow's job, in one process: what
bench/zoo_compare.py runs beside `psctl local`.

  /usr/bin/python3 bench/zoo_torch.py --config=configs/ctr_dlrm.json \\
      [--train=...] [--test=...] [--threads=2] [--workers=2]

(/usr/bin/python3: Debian's torch is installed for the system interpreter.)
The data paths default to the config's (written by `psctl local`, its
data.synthesize). Prints progress and a last line

  RESULT zoo_torch config=... examples_per_sec=... train_s=... test_auc=...
      test_logloss=... threads=... torch=... steps=... load_s=...

Everything but the model is bench/ctr_torch.py's, imported (the reasons
are in its docstring): Criteo parsing and id hashing (checked against the
planted model when planted.json is there), one row index per id of both
files, psflow's initial values bit for bit (Glorot kernels, including
Cross's kernel_u and kernel_v, from the job seed's SplitMix64 stream in
variable order; BatchNormalization gamma and moving variance ones; the
rest zero; rows from each table's initializer), Adagrad with psflow's
constants and each table's own learning rate and optimizer settings
(`model.graph.tables`; each group's accumulator is set after
construction, since torch 1.13's Adagrad starts every group's at the
constructor's value), the workers' batches in turn, exact AUC. The twin
runs in float32 with sparse table gradients. BatchNormalization's moving
statistics follow each step's batch statistics as the parameter servers
fold them (v = momentum v + (1 - momentum) stat).
"""
import argparse
import json
import math
import os
import sys
import time

BENCH = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.dirname(BENCH)
sys.path.insert(0, BENCH)
sys.path.insert(0, os.path.join(REPO, "model", "graph", "parity"))
# ctr_torch sizes OpenBLAS's and OpenMP's threads from --threads before it
# imports torch: import it first.
import ctr_torch as ct  # noqa: E402

import numpy as np  # noqa: E402
import torch  # noqa: E402
import torch_twin  # noqa: E402

GLOROT = ("kernel", "kernel_u", "kernel_v")


def initial_values(twin, seed):
    """model/initializer.cc's InitialValues for the twin's variables."""
    glorot = [(name, shape) for name, shape, _, _ in twin.variables
              if name.rsplit("/", 1)[1] in GLOROT]
    for name, shape in glorot:
        if len(shape) != 2:
            sys.exit("zoo_torch: %s has shape %s; only 2-D kernels are "
                     "mirrored" % (name, shape))
    kernels = dict(zip([n for n, _ in glorot],
                       ct.glorot_kernels([tuple(s) for _, s in glorot],
                                         seed)))
    values = {}
    for name, shape, _, _ in twin.variables:
        suffix = name.rsplit("/", 1)[1]
        if name in kernels:
            values[name] = kernels[name]
        elif suffix in ("gamma", "moving_variance"):
            values[name] = np.ones(shape, dtype=np.float32)
        else:
            values[name] = np.zeros(shape, dtype=np.float32)
    return values


def bags(idx):
    """(ids, offsets) of a [batch, fields] row-index block, -1 missing: one
    bag per example and field, example-major (SparseBatch's layout)."""
    present = (idx >= 0).view(-1)
    counts = present.to(torch.int64)
    offsets = torch.zeros(counts.numel() + 1, dtype=torch.int64)
    torch.cumsum(counts, 0, out=offsets[1:])
    return idx.view(-1)[present], offsets


def optimizer_groups(twin, job, graph):
    """Adagrad groups: the variables at the job's schedule, each table at
    its own (model.graph.tables[].learning_rate and optimizer)."""
    optimizer = job["optimizer"]
    if optimizer.get("kind") != "ADAGRAD":
        sys.exit("zoo_torch: mirrors ADAGRAD jobs only, the config's is %s" %
                 optimizer.get("kind"))
    accumulator = optimizer.get("initial_accumulator_value", 0.1)
    epsilon = optimizer.get("epsilon", 1e-7)
    schedule = job.get("learning_rate", {})
    settings = {t["name"]: t for t in graph.get("tables", [])}
    groups = [{"params": list(twin.params.values()), "lr": 1.0,
               "initial_accumulator_value": accumulator, "eps": epsilon}]
    schedules = [schedule]
    for name in twin.table_dims:
        table = settings.get(name, {})
        own = table.get("optimizer", {})
        if own.get("kind", "ADAGRAD") != "ADAGRAD":
            sys.exit("zoo_torch: mirrors ADAGRAD tables only; table %s's "
                     "optimizer is %s" % (name, own["kind"]))
        groups.append({"params": [twin.tables[name]], "lr": 1.0,
                       "initial_accumulator_value": own.get(
                           "initial_accumulator_value", accumulator),
                       "eps": own.get("epsilon", epsilon)})
        schedules.append(table.get("learning_rate", schedule))
    return groups, schedules


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--config", required=True)
    parser.add_argument("--train", help="default: the config's train_path")
    parser.add_argument("--test", help="default: the config's test_path")
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--workers", type=int, default=2,
                        help="psflow workers whose batches are taken in turn")
    args = parser.parse_args()

    with open(args.config) as f:
        job = json.load(f)
    graph = torch_twin.normalized(job["model"]["graph"])
    data = job.get("data", {})
    train_path = args.train or data["train_path"]
    test_path = args.test or data["test_path"]
    num_dense = data.get("num_dense", 0) or 13
    num_fields = data.get("num_fields", 0) or 26
    training = job.get("training", {})
    batch_size = training.get("batch_size", 256)
    epochs = training.get("epochs", 1)
    seed = int(training.get("seed", 0))
    eval_batch = job.get("evaluation", {}).get("batch_size", 4096)

    torch.set_num_threads(args.threads)
    print("zoo_torch: %s; torch %s, %d threads (OPENBLAS_NUM_THREADS=%s, "
          "OMP_WAIT_POLICY=%s); %s" % (
              os.path.basename(args.config), torch.__version__,
              torch.get_num_threads(), os.environ["OPENBLAS_NUM_THREADS"],
              os.environ["OMP_WAIT_POLICY"], ct.check_hash_vector()))

    # ---- load (untimed), as ctr_torch.py.
    start = time.perf_counter()
    train = ct.load_criteo(train_path, num_dense, num_fields)
    test = ct.load_criteo(test_path, num_dense, num_fields)
    train_present = train[2][train[2] >= 0]
    test_present = test[2][test[2] >= 0]
    unique_ids, inverse = np.unique(
        np.concatenate([train_present, test_present]), return_inverse=True)
    distinct_train = int((np.bincount(inverse[:len(train_present)],
                                      minlength=len(unique_ids)) > 0).sum())

    def to_rows(ids, rows):
        out = np.full(ids.shape, -1, dtype=np.int64)
        out[ids >= 0] = rows
        return out
    train_idx = torch.from_numpy(to_rows(train[2],
                                         inverse[:len(train_present)]))
    test_idx = torch.from_numpy(to_rows(test[2],
                                        inverse[len(train_present):]))
    planted = os.path.join(os.path.dirname(os.path.abspath(test_path)),
                           "planted.json")
    if os.path.exists(planted):
        ok, message = ct.planted_check(planted, test, distinct_train)
        print("zoo_torch: %s: %s" % ("hash check passed" if ok else
                                     "HASH CHECK FAILED", message))
        if not ok:
            sys.exit(1)

    twin = torch_twin.GraphTwin(graph, [num_dense], num_fields, 2,
                                len(unique_ids), torch.float32, sparse=True)
    table_settings = {t["name"]: t for t in graph.get("tables", [])}
    twin.load_values(initial_values(twin, seed), {
        name: ct.table_rows(unique_ids, dim, table_settings.get(
            name, {}).get("initializer", {}))
        for name, dim in twin.table_dims.items()})
    groups, schedules = optimizer_groups(twin, job, graph)
    opt = torch.optim.Adagrad(groups, lr=1.0)
    # torch 1.13's Adagrad fills every accumulator with the constructor's
    # initial_accumulator_value (default 0), not its group's: set each
    # group's here (a 0 start makes the first step lr * sign(g)).
    with torch.no_grad():
        for group in opt.param_groups:
            for p in group["params"]:
                opt.state[p]["sum"].fill_(group["initial_accumulator_value"])
    rates = torch.optim.lr_scheduler.LambdaLR(
        opt, [lambda step, c=c: ct.psflow_rate(c, step) for c in schedules])
    moving = [(name, momentum) for name, _, trainable, momentum
              in twin.variables if not trainable]
    order = torch.from_numpy(ct.training_batches(
        len(train[0]), batch_size, epochs, args.workers, seed))
    train_dense = torch.from_numpy(train[1])
    train_labels = torch.from_numpy(train[0].astype(np.float32))
    load_s = time.perf_counter() - start
    print("zoo_torch: loaded %d training and %d test examples in %.1f s "
          "(untimed); %d rows per table; %d variables, tables %s; batch %d, "
          "%g epochs = %d steps" % (
              len(train[0]), len(test[0]), load_s, len(unique_ids),
              len(twin.variables), dict(twin.table_dims), batch_size,
              epochs, len(order)))
    sys.stdout.flush()

    # ---- train (timed: the steps only, as ctr_torch.py).
    steps = len(order)
    log_every = max(1, math.ceil(len(train[0]) / batch_size))
    loss_sum, loss_count = 0.0, 0
    t0 = time.perf_counter()
    for step in range(steps):
        rows = order[step]
        ids, offsets = bags(train_idx[rows])
        logits = twin(train_dense[rows], ids, offsets, training=True)
        loss = twin.loss_of(logits, train_labels[rows])
        opt.zero_grad(set_to_none=True)
        loss.backward()
        opt.step()
        rates.step()
        with torch.no_grad():
            for name, m in moving:
                twin.moving[name] = (m * twin.moving[name] +
                                     (1 - m) * twin.batch_stats[name])
        loss_sum += loss.item()
        loss_count += 1
        if (step + 1) % log_every == 0 or step + 1 == steps:
            print("zoo_torch: step %d/%d, %.1f s, mean training loss %.4f" % (
                step + 1, steps, time.perf_counter() - t0,
                loss_sum / loss_count))
            sys.stdout.flush()
            loss_sum, loss_count = 0.0, 0
    train_s = time.perf_counter() - t0
    rate = steps * batch_size / train_s

    # ---- evaluate (untimed).
    probabilities = []
    test_dense = torch.from_numpy(test[1])
    with torch.no_grad():
        for begin in range(0, len(test[0]), eval_batch):
            ids, offsets = bags(test_idx[begin:begin + eval_batch])
            logits = twin(test_dense[begin:begin + eval_batch], ids, offsets,
                          training=False)
            probabilities.append(ct.sigmoid64(
                logits.reshape(-1).numpy()).astype(np.float32))
    probabilities = np.concatenate(probabilities)
    auc = ct.auc_exact(probabilities, test[0])
    log_loss = ct.log_loss(probabilities, test[0])
    print("RESULT zoo_torch config=%s examples_per_sec=%.0f train_s=%.3f "
          "test_auc=%.6f test_logloss=%.6f threads=%d torch=%s steps=%d "
          "load_s=%.1f" % (os.path.basename(args.config), rate, train_s, auc,
                           log_loss, args.threads, torch.__version__, steps,
                           load_s))


if __name__ == "__main__":
    main()
