#!/usr/bin/python3
"""The click-through-rate job of configs/ctr_wide_deep.json in PyTorch
(Debian's python3-torch 1.13, CPU): the same model, initial values,
optimizer, batches and data files as psflow's job, in one process, so that
whole-job training throughput (examples/s) and test AUC can be compared with
psflow's at the same number of threads.

  bash tools/setup.sh --bench      # python3-torch (Debian's; no pip)
  /usr/bin/python3 bench/ctr_torch.py \\
      --train=/tmp/psflow-data/ctr_synthetic/train.txt \\
      --test=/tmp/psflow-data/ctr_synthetic/test.txt \\
      [--epochs=2] [--batch_size=256] [--threads=2] [--learning_rate=0.05] \\
      [--workers=2] [--config=configs/ctr_wide_deep.json]

(/usr/bin/python3, not a python3 of its own found first on PATH: Debian's
torch is installed for the system interpreter.) It prints the load time
(untimed), training progress, the training time and examples/s (timed:
training steps only), the test AUC and log loss, and a last line

  RESULT ctr_torch examples_per_sec=... train_s=... test_auc=...
      test_logloss=... threads=... torch=...

The psflow side, on the same files (the config's data paths are these):

  bash tools/setup.sh && bazel build --config=opt //client/psctl:psctl \\
      //ps:ps_server //worker //chief //evaluator
  bazel-bin/client/psctl/psctl local --job=configs/ctr_wide_deep.json \\
      --ps=2 --workers=2 --evaluator --device=cpu --dir=/tmp/ctr
  # result: /tmp/ctr/result.json (test_auc, test_loss, training_seconds);
  # examples/s = global_step x batch_size / training_seconds.
  # 2M examples: python3 bench/ctr_accuracy.py --train_examples=2000000
  #   (its default batch is 512: give this script --batch_size=512 and the
  #   ctr_2m files then)

What is the same as psflow (model/graph/wide_deep_graph.cc, ps/optimizer.cc,
ps/row_initializer.cc, model/initializer.cc, data/criteo_parser.cc,
data/batch_stream.cc, common/binary_metrics.cc):

- Input: Criteo text, plain or gzipped (by the magic bytes), "\\r\\n" read
  as "\\n". Integer x -> log(1 + max(x, 0)) as a float32 (missing: 0).
  Categorical hex value v of field f (0-based) -> the int64 id
  (f << 48) | (SplitMix64Mix(v) & (2^48 - 1)) (docs/data.md). Checked at
  start-up against data/criteo_test.cc's vector, and, when the test file's
  directory holds psctl's planted.json, against the whole data set: the
  planted model's test AUC recomputed from these ids and dense features must
  equal the one psctl wrote, and the distinct training ids its count.
- Ids are unbounded in psflow (tables keyed by id, rows created on first
  use). Here every id of both files gets a row index at load time (sorted
  unique ids, np.unique: the id -> index dictionary), outside the timed
  region; test-only ids keep their initial row, as an id the evaluator pulls
  but no worker trained does in psflow.
- Model: ONE embedding table shared by every field (the field is in the id),
  embedding_dim floats per id (nn.EmbeddingBag, sparse=True, sum pooling
  per field; a missing value is an empty bag: zeros), the fields' pooled
  vectors then the dense features -> Linear/ReLU per hidden size -> Linear
  to one logit; plus the wide part: ONE linear table (1 float per id,
  nn.EmbeddingBag of dim 1 summed over every id of the example) and a
  Linear(num_dense, 1) with its own bias. logit = wide + deep; loss = mean
  binary cross-entropy with logits over the batch.
- Initial values are psflow's, bit for bit: the MLP kernels Glorot-uniform
  from the SplitMix64 stream of the job seed (biases, wide kernel and bias
  zero), embedding rows uniform in [-scale, scale) from (table seed, id),
  the linear table zero.
- Optimizer: torch.optim.Adagrad (it takes the sparse gradients) on every
  parameter and both tables, with psflow's constants: initial accumulator
  0.1, epsilon 1e-7 added after the square root (psflow's, not PyTorch's
  default 1e-10), the config's constant learning rate; a row's update is
  from its gradient summed over the batch (psflow pushes per distinct id).
  A table's own ADAGRAD optimizer (initial accumulator, epsilon) and
  learning-rate schedule in the config (model.wide_deep.embedding /
  .linear) become its own param group; other optimizer kinds are refused.
  Schedules (CONSTANT, EXPONENTIAL_DECAY, COSINE_DECAY, warm-up) follow
  ps/lr_schedule.cc at the global step.
- Batches: psflow's job trains ceil(epochs x examples / batch) global steps
  of `batch_size` examples; worker w of W trains examples w, w+W, ...,
  reshuffled every pass with BatchStream::EpochOrder(seed, pass) and the
  last partial batch of a pass dropped. Here the W workers' batches are
  taken in turn, one update each: async training without staleness (the
  only difference from psflow's run that cannot be mirrored in one
  process: psflow's workers update concurrently from parameters pulled a
  step or so earlier). The order is computed before the timed region.
- Evaluation: every test example, probabilities as float32 sigmoid of the
  logit computed in double; exact AUC with ties counting one half; log loss
  with probabilities clipped to [1e-7, 1 - 1e-7].
"""
import argparse
import gzip
import json
import math
import os
import sys
import time


def _threads_flag(argv, default=2):
    for k, arg in enumerate(argv):
        if arg.startswith("--threads="):
            return arg.split("=", 1)[1]
        if arg == "--threads" and k + 1 < len(argv):
            return argv[k + 1]
    return str(default)


# Debian's torch (BLAS_INFO=generic) and numpy do their GEMMs in OpenBLAS,
# whose own thread pool torch.set_num_threads does not size and which reads
# its size when loaded: --threads sets it, and OpenMP's, before the imports.
# OpenMP threads waiting passively: by default (spinning) torch's idle
# OpenMP threads take the cores from OpenBLAS's during every GEMM, which
# made training about 2.5x slower on 2 cores (an environment setting given
# to the script wins). PyTorch's own wheels (one OpenMP pool for all) are
# the other way round: 2.11 trained 1.27x faster on 2 cores with
# OMP_WAIT_POLICY=ACTIVE (bench/RESULTS.md, "Whole job against PyTorch"), so
# give them that.
os.environ["OPENBLAS_NUM_THREADS"] = _threads_flag(sys.argv[1:])
os.environ["OMP_NUM_THREADS"] = _threads_flag(sys.argv[1:])
os.environ.setdefault("OMP_WAIT_POLICY", "PASSIVE")

import numpy as np  # noqa: E402
import torch  # noqa: E402  (after the thread settings)
import torch.nn as nn  # noqa: E402
import torch.nn.functional as F  # noqa: E402

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
U64 = np.uint64
GOLDEN = U64(0x9e3779b97f4a7c15)
FIELD_SHIFT = 48
VALUE_MASK = U64((1 << FIELD_SHIFT) - 1)
LOG_LOSS_EPSILON = 1e-7


# ---------------------------------------------------------------- hashing

def mix(z):
    """SplitMix64Mix (common/splitmix64.h) of a uint64 array, wrapping."""
    z = np.asarray(z, dtype=U64)
    with np.errstate(over="ignore"):
        z = (z ^ (z >> U64(30))) * U64(0xbf58476d1ce4e5b9)
        z = (z ^ (z >> U64(27))) * U64(0x94d049bb133111eb)
    return z ^ (z >> U64(31))


def mix_int(z):
    """SplitMix64Mix of one Python int (the reference for mix())."""
    m = (1 << 64) - 1
    z &= m
    z = ((z ^ (z >> 30)) * 0xbf58476d1ce4e5b9) & m
    z = ((z ^ (z >> 27)) * 0x94d049bb133111eb) & m
    return z ^ (z >> 31)


def splitmix_stream(state, count):
    """The first `count` values SplitMix64(state) returns, state advancing
    by the golden gamma each call: Mix(state + k gamma), k = 1..count."""
    k = np.arange(1, count + 1, dtype=U64)
    with np.errstate(over="ignore"):
        return mix(U64(state & ((1 << 64) - 1)) + k * GOLDEN)


def feature_ids(field, values):
    """CtrFeatureId(field, v) for a uint64 array of categorical values."""
    return ((U64(field) << U64(FIELD_SHIFT)) | (mix(values) & VALUE_MASK)
            ).astype(np.int64)


def check_hash_vector():
    """data/criteo_test.cc's vector: SplitMix64Mix(1) and CtrFeatureId(3, 1)."""
    expected_mix = 0x5692161d100b05e5
    expected_id = (3 << 48) | 0x161d100b05e5
    got_mix = int(mix(np.array([1], dtype=U64))[0])
    got_id = int(feature_ids(3, np.array([1], dtype=U64))[0])
    if (got_mix, mix_int(1), got_id) != (expected_mix, expected_mix,
                                         expected_id):
        sys.exit("ctr_torch: the id hash does not reproduce "
                 "data/criteo_test.cc's vector (SplitMix64Mix(1) = %#x, "
                 "CtrFeatureId(3, 1) = %#x)" % (got_mix, got_id))
    return "SplitMix64Mix(1) = %#x, CtrFeatureId(3, 1) = %#x as in " \
           "data/criteo_test.cc" % (got_mix, got_id)


# ---------------------------------------------------------------- reading

DIGITS = b"0123456789-"
HEX = b"0123456789abcdefABCDEF"


def read_blocks(path, block_bytes=1 << 24):
    """Complete lines of `path` (plain or gzip by magic bytes), a block of
    them at a time, without the last newline of the block."""
    with open(path, "rb") as raw:
        magic = raw.read(2)
    opener = gzip.open if magic == b"\x1f\x8b" else open
    rest = b""
    with opener(path, "rb") as f:
        while True:
            block = f.read(block_bytes)
            if not block:
                break
            block = rest + block
            cut = block.rfind(b"\n")
            if cut < 0:
                rest = block
                continue
            yield block[:cut]
            rest = block[cut + 1:]
    if rest:
        yield rest


def bad_line(name, first_line, lines, columns):
    for k, line in enumerate(lines):
        n = line.count(b"\t") + 1
        if not line:
            return "%s:%d: empty line" % (name, first_line + k)
        if n != columns:
            return "%s:%d: %d tab-separated columns, expected %d" % (
                name, first_line + k, n, columns)
    return "%s: bad line near line %d" % (name, first_line)


def load_criteo(path, num_dense, num_fields):
    """(labels uint8 [n], dense float32 [n, num_dense], ids int64
    [n, num_fields] with -1 for a missing value), as data/criteo.h reads."""
    columns = 1 + num_dense + num_fields
    labels, dense, ids = [], [], []
    line = 1
    for text in read_blocks(path):
        if b"\r" in text:
            text = text.replace(b"\r\n", b"\n")
            if text.endswith(b"\r"):
                text = text[:-1]
        lines = text.split(b"\n")
        n = len(lines)
        if any(l.count(b"\t") != columns - 1 for l in lines):
            sys.exit("ctr_torch: " + bad_line(path, line, lines, columns))
        del lines
        flat = text.replace(b"\n", b"\t").split(b"\t")
        label = b"".join(flat[0::columns])
        if len(label) != n or label.translate(None, b"01"):
            sys.exit("ctr_torch: %s: a label is not 0 or 1 (lines %d-%d)" %
                     (path, line, line + n - 1))
        labels.append(np.frombuffer(label, dtype=np.uint8) - ord("0"))
        block_dense = np.empty((n, num_dense), dtype=np.float32)
        for d in range(num_dense):
            col = flat[1 + d::columns]
            if b"".join(col).translate(None, DIGITS):
                sys.exit("ctr_torch: %s: integer column I%d holds a "
                         "non-decimal value (lines %d-%d)" %
                         (path, d + 1, line, line + n - 1))
            x = np.array([int(s) if s else 0 for s in col], dtype=np.int64)
            # CtrDenseFeature: log1p in double, then float.
            block_dense[:, d] = np.where(
                x > 0, np.log1p(np.maximum(x, 0).astype(np.float64)), 0.0)
        dense.append(block_dense)
        block_ids = np.empty((n, num_fields), dtype=np.int64)
        for f in range(num_fields):
            col = flat[1 + num_dense + f::columns]
            lengths = np.fromiter(map(len, col), dtype=np.int64, count=n)
            if (lengths > 16).any() or b"".join(col).translate(None, HEX):
                sys.exit("ctr_torch: %s: categorical column C%d holds a value "
                         "that is not 1 to 16 hex digits (lines %d-%d)" %
                         (path, f + 1, line, line + n - 1))
            v = np.array([int(s, 16) if s else 0 for s in col], dtype=U64)
            block_ids[:, f] = np.where(lengths > 0, feature_ids(f, v), -1)
        ids.append(block_ids)
        line += n
    if not labels:
        sys.exit("ctr_torch: %s holds no examples" % path)
    return (np.concatenate(labels), np.concatenate(dense),
            np.concatenate(ids))


# ------------------------------------------------------------ planted check

def std_normal_from_hash(bits):
    """StandardNormalFromHash (data/planted_ctr_model.cc), vectorized."""
    with np.errstate(over="ignore"):
        second = mix(bits ^ GOLDEN)
    u1 = ((bits >> U64(11)) + U64(1)).astype(np.float64) * 2.0 ** -53
    u2 = (second >> U64(11)).astype(np.float64) * 2.0 ** -53
    return np.sqrt(-2 * np.log(u1)) * np.cos(6.283185307179586 * u2)


def planted_check(planted_path, test, distinct_train_ids):
    """Recomputes the planted model's test AUC and log loss from this
    script's ids and dense features; psctl computed them from psflow's."""
    with open(planted_path) as f:
        planted = json.load(f)
    opts = planted["options"]
    seed, scale = int(opts["seed"]), float(opts["weight_scale"])
    labels, dense, ids = test
    id_key = mix_int(seed ^ 0x6964776569676874)
    dense_key = mix_int(seed ^ 0x64656e7365776774)
    dense_w = [scale / 2 * float(std_normal_from_hash(
        mix(np.array([(dense_key + d) & ((1 << 64) - 1)], dtype=U64)))[0])
               for d in range(dense.shape[1])]
    logit = np.full(len(labels), float(planted["bias"]))
    for d in range(dense.shape[1]):
        logit += dense_w[d] * dense[:, d].astype(np.float64)
    for f in range(ids.shape[1]):
        present = ids[:, f] >= 0
        w = scale * std_normal_from_hash(
            mix(ids[:, f].astype(U64) ^ U64(id_key)))
        logit += np.where(present, w, 0.0)
    p = sigmoid64(logit).astype(np.float32)
    auc, loss = auc_exact(p, labels), log_loss(p, labels)
    ok = (abs(auc - planted["planted_test_auc"]) < 1e-9 and
          abs(loss - planted["planted_test_log_loss"]) < 1e-9 and
          distinct_train_ids == planted["distinct_train_ids"])
    return ok, ("planted model on these ids: test AUC %.10f (psctl: %.10f), "
                "log loss %.10f (psctl: %.10f), distinct training ids %d "
                "(psctl: %d)" % (auc, planted["planted_test_auc"], loss,
                                 planted["planted_test_log_loss"],
                                 distinct_train_ids,
                                 planted["distinct_train_ids"]))


# ---------------------------------------------------------------- metrics

def sigmoid64(x):
    x = np.asarray(x, dtype=np.float64)
    e = np.exp(-np.abs(x))
    return np.where(x >= 0, 1 / (1 + e), e / (1 + e))


def auc_exact(scores, labels):
    """ROC AUC, a tie counting one half (common/binary_metrics.cc)."""
    scores = np.asarray(scores)
    labels = np.asarray(labels).astype(np.int64)
    positives = int(labels.sum())
    negatives = len(labels) - positives
    if positives == 0 or negatives == 0:
        return float("nan")
    _, group = np.unique(scores, return_inverse=True)
    group_pos = np.bincount(group, weights=labels).astype(np.int64)
    group_all = np.bincount(group).astype(np.int64)
    group_neg = group_all - group_pos
    negatives_below = np.cumsum(group_neg) - group_neg
    twice_u = int((group_pos * (2 * negatives_below + group_neg)).sum())
    return twice_u / (2.0 * positives * negatives)


def log_loss(probabilities, labels):
    p = np.clip(np.asarray(probabilities, dtype=np.float64), LOG_LOSS_EPSILON,
                1 - LOG_LOSS_EPSILON)
    y = np.asarray(labels) != 0
    return float(np.mean(np.where(y, -np.log(p), -np.log1p(-p))))


# ------------------------------------------------------------ initial values

def glorot_kernels(shapes, seed):
    """InitialValues (model/initializer.cc) of the Glorot-uniform kernels,
    in variable order, drawing from one SplitMix64 stream; [in, out]."""
    total = sum(a * b for a, b in shapes)
    u = (splitmix_stream(seed ^ 0x5eed5eed5eed5eed, total) >> U64(11)
         ).astype(np.float64) * (1.0 / 9007199254740992.0)
    out, at = [], 0
    for fan_in, fan_out in shapes:
        limit = math.sqrt(6.0 / (fan_in + fan_out))
        n = fan_in * fan_out
        out.append(((2 * u[at:at + n] - 1) * limit).astype(np.float32)
                   .reshape(fan_in, fan_out))
        at += n
    return out


def uniform_rows(ids, dim, scale, seed):
    """RowInitializer::Fill (ps/row_initializer.cc), kind UNIFORM: row of
    id in [-scale, scale) from (seed, id). `scale` is the proto's float."""
    scale = float(np.float32(scale))
    with np.errstate(over="ignore"):
        state = mix(U64(seed) ^ mix(ids.astype(U64) ^
                                    U64(0xa54ff53a5f1d36f1)))
        rows = np.empty((len(ids), dim), dtype=np.float32)
        for j in range(dim):
            state = state + GOLDEN
            u = ((mix(state) >> U64(11)).astype(np.float64) + 0.5) * 2.0 ** -53
            rows[:, j] = (2.0 * u - 1.0) * scale
    return rows


def truncated_normal_rows(ids, dim, scale, seed):
    """RowInitializer::Fill, kind TRUNCATED_NORMAL (redraws beyond 2 sigma);
    per id in Python: only for configs that ask for it."""
    m = (1 << 64) - 1
    rows = np.empty((len(ids), dim), dtype=np.float32)
    for r, i in enumerate(ids.tolist()):
        state = mix_int((seed ^ mix_int((i & m) ^ 0xa54ff53a5f1d36f1)) & m)

        def uniform01():
            nonlocal state
            state = (state + 0x9e3779b97f4a7c15) & m
            return ((mix_int(state) >> 11) + 0.5) * 2.0 ** -53
        for j in range(dim):
            while True:
                radius = math.sqrt(-2.0 * math.log(uniform01()))
                z = radius * math.cos(6.283185307179586 * uniform01())
                if abs(z) <= 2.0:
                    break
            rows[r, j] = z * scale
    return rows


def table_rows(ids, dim, initializer):
    kind = initializer.get("kind", "KIND_UNSPECIFIED")
    seed = int(initializer.get("seed", 0))
    if kind == "ZEROS":
        return np.zeros((len(ids), dim), dtype=np.float32)
    if kind == "UNIFORM":
        return uniform_rows(ids, dim, initializer.get("scale", 0.0), seed)
    scale = initializer.get("scale", 0.0) if kind == "TRUNCATED_NORMAL" \
        else 1.0 / math.sqrt(dim)
    return truncated_normal_rows(ids, dim, float(np.float32(scale)), seed)


# ---------------------------------------------------------------- the model

class WideDeep(nn.Module):
    def __init__(self, num_rows, num_fields, num_dense, dim, hidden, pooling):
        super().__init__()
        self.num_fields, self.dim = num_fields, dim
        # One table over every field, as psflow's "embedding" and "linear".
        self.embedding = nn.EmbeddingBag(num_rows, dim, mode=pooling,
                                         sparse=True)
        self.linear = nn.EmbeddingBag(num_rows, 1, mode="sum", sparse=True)
        self.wide = nn.Linear(num_dense, 1)
        widths = [num_fields * dim + num_dense] + list(hidden) + [1]
        layers = []
        for l in range(len(widths) - 1):
            layers.append(nn.Linear(widths[l], widths[l + 1]))
            if l + 2 < len(widths):
                layers.append(nn.ReLU())
        self.mlp = nn.Sequential(*layers)

    def load_psflow_values(self, kernels, embedding_rows):
        with torch.no_grad():
            dense_layers = [m for m in self.mlp if isinstance(m, nn.Linear)]
            for layer, kernel in zip(dense_layers, kernels):
                layer.weight.copy_(torch.from_numpy(kernel.T.copy()))
                layer.bias.zero_()
            self.wide.weight.zero_()
            self.wide.bias.zero_()
            self.embedding.weight.copy_(torch.from_numpy(embedding_rows))
            self.linear.weight.zero_()

    def forward(self, idx, dense):
        """idx: [B, num_fields] row indices, -1 where missing."""
        batch = idx.shape[0]
        present = (idx >= 0).view(-1)
        flat_ids = idx.view(-1)[present]
        counts = present.to(torch.int64)
        bag_offsets = torch.cumsum(counts, 0) - counts  # one bag per field
        pooled = self.embedding(flat_ids, bag_offsets)
        x = torch.cat([pooled.view(batch, self.num_fields * self.dim), dense],
                      1)
        deep = self.mlp(x)
        example_offsets = bag_offsets.view(batch, self.num_fields)[:, 0] \
            .contiguous()
        wide = self.linear(flat_ids, example_offsets) + self.wide(dense)
        return (deep + wide).view(batch)


# ---------------------------------------------------- learning-rate schedules

def psflow_rate(config, step):
    """ps/lr_schedule.cc's LrSchedule::At for a LearningRateSchedule in JSON
    form, at global step `step` (0 for the first update)."""
    lr = config.get("learning_rate", 0.01)
    kind = config.get("kind", "CONSTANT")
    if kind == "EXPONENTIAL_DECAY":
        exponent = step / config["decay_steps"]
        if config.get("staircase"):
            exponent = math.floor(exponent)
        lr *= config.get("decay_rate", 0.0) ** exponent
    elif kind == "COSINE_DECAY":
        steps = config["decay_steps"]
        cosine = 0.5 * (1 + math.cos(math.pi * min(step, steps) / steps))
        alpha = config.get("alpha", 0.0)
        lr *= alpha + (1 - alpha) * cosine
    elif kind not in ("CONSTANT", "KIND_UNSPECIFIED"):
        sys.exit("ctr_torch: learning-rate schedule kind %s is unknown" % kind)
    warmup = config.get("warmup_steps", 0)
    if step < warmup:
        lr *= (step + 1) / warmup
    return lr


def describe_schedule(config):
    kind = config.get("kind", "CONSTANT")
    text = "lr %g" % config.get("learning_rate", 0.01)
    if kind not in ("CONSTANT", "KIND_UNSPECIFIED"):
        text += " %s over %d steps" % (kind, config.get("decay_steps", 0))
    if config.get("warmup_steps", 0):
        text += ", warm-up %d steps" % config["warmup_steps"]
    return text


# ------------------------------------------------------------------ batches

def epoch_order(n, seed, epoch):
    """BatchStream::EpochOrder(n, seed, epoch, shuffle=true)."""
    order = list(range(n))
    if n < 2:
        return order
    m = (1 << 64) - 1
    r = splitmix_stream((seed * 0x100000001b3 + epoch) & m, n - 1)
    i = np.arange(n - 1, 0, -1, dtype=U64)  # the i of draw k
    js = (r % (i + U64(1))).astype(np.int64).tolist()
    for k, j in enumerate(js):
        a = n - 1 - k
        order[a], order[j] = order[j], order[a]
    return order


def training_batches(num_examples, batch_size, epochs, workers, seed):
    """[steps, batch_size] example indices: ceil(epochs x n / batch) global
    steps, the workers' batches in turn (each worker's shard reshuffled per
    pass, its last partial batch dropped)."""
    steps = max(1, math.ceil(epochs * num_examples / batch_size))
    streams = []
    for w in range(workers):
        shard = np.arange(w, num_examples, workers, dtype=np.int64)
        per_pass = len(shard) // batch_size
        if per_pass == 0:
            sys.exit("ctr_torch: worker %d's shard has %d examples, fewer "
                     "than a batch of %d" % (w, len(shard), batch_size))
        need = math.ceil((steps - w) / workers) if steps > w else 0
        batches, epoch = [], 0
        while sum(len(b) for b in batches) < need:
            order = np.array(epoch_order(len(shard), seed, epoch),
                             dtype=np.int64)
            batches.append(shard[order[:per_pass * batch_size]]
                           .reshape(per_pass, batch_size))
            epoch += 1
        streams.append(np.concatenate(batches)[:need] if need else
                       np.empty((0, batch_size), dtype=np.int64))
    out = np.empty((steps, batch_size), dtype=np.int64)
    for w in range(workers):
        out[w::workers] = streams[w]
    return out


# ------------------------------------------------------------------- main

def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--train", required=True)
    parser.add_argument("--test", required=True)
    parser.add_argument("--config",
                        default=os.path.join(REPO, "configs",
                                             "ctr_wide_deep.json"),
                        help="psflow job config the model, optimizer and "
                             "defaults come from")
    parser.add_argument("--epochs", type=float, default=None,
                        help="default: the config's")
    parser.add_argument("--batch_size", type=int, default=None,
                        help="default: the config's")
    parser.add_argument("--learning_rate", type=float, default=None,
                        help="default: the config's (constant)")
    parser.add_argument("--threads", type=int, default=2,
                        help="torch.set_num_threads")
    parser.add_argument("--workers", type=int, default=2,
                        help="psflow workers whose shards' batches are "
                             "taken in turn (the demo job runs 2)")
    parser.add_argument("--eval_batch_size", type=int, default=None,
                        help="default: the config's evaluation batch")
    args = parser.parse_args()

    with open(args.config) as f:
        job = json.load(f)
    spec = job["model"]["wide_deep"]
    data = job.get("data", {})
    num_dense = data.get("num_dense", 0) or 13
    num_fields = data.get("num_fields", 0) or 26
    dim = spec.get("embedding_dim", 16)
    hidden = spec.get("hidden_sizes", [256, 128])
    pooling = spec.get("pooling", "sum")
    optimizer = job["optimizer"]
    if optimizer.get("kind") != "ADAGRAD":
        sys.exit("ctr_torch: mirrors ADAGRAD jobs only, the config's is %s" %
                 optimizer.get("kind"))
    schedule = job.get("learning_rate", {})
    if args.learning_rate is not None:
        schedule = dict(schedule, learning_rate=args.learning_rate)
    # A table's own optimizer and rate (EmbeddingTableSpec), as param groups.
    for name in ("embedding", "linear"):
        table = spec.get(name, {})
        if table.get("optimizer", {}).get("kind", "ADAGRAD") != "ADAGRAD":
            sys.exit("ctr_torch: mirrors ADAGRAD tables only; table %s's "
                     "optimizer is %s" % (name, table["optimizer"]["kind"]))
    training = job.get("training", {})
    lr = schedule.get("learning_rate", 0.01)
    batch_size = args.batch_size or training.get("batch_size", 256)
    epochs = args.epochs if args.epochs is not None else \
        training.get("epochs", 1)
    seed = int(training.get("seed", 0))
    eval_batch = args.eval_batch_size or \
        job.get("evaluation", {}).get("batch_size", 4096)
    accumulator = optimizer.get("initial_accumulator_value", 0.1)
    epsilon = optimizer.get("epsilon", 1e-7)

    torch.set_num_threads(args.threads)
    print("ctr_torch: torch %s, %d threads (OPENBLAS_NUM_THREADS=%s, "
          "OMP_WAIT_POLICY=%s); %s" % (
              torch.__version__, torch.get_num_threads(),
              os.environ["OPENBLAS_NUM_THREADS"],
              os.environ["OMP_WAIT_POLICY"], check_hash_vector()))

    # ---- load (untimed): parse, hash, id -> row index, initial values.
    start = time.perf_counter()
    train = load_criteo(args.train, num_dense, num_fields)
    test = load_criteo(args.test, num_dense, num_fields)
    parse_s = time.perf_counter() - start
    train_present = train[2][train[2] >= 0]
    test_present = test[2][test[2] >= 0]
    unique_ids, inverse = np.unique(
        np.concatenate([train_present, test_present]), return_inverse=True)
    in_train = np.bincount(inverse[:len(train_present)],
                           minlength=len(unique_ids)) > 0
    distinct_train = int(in_train.sum())

    def to_rows(ids, rows):
        out = np.full(ids.shape, -1, dtype=np.int64)
        out[ids >= 0] = rows
        return out
    train_idx = to_rows(train[2], inverse[:len(train_present)])
    test_idx = to_rows(test[2], inverse[len(train_present):])
    index_s = time.perf_counter() - start - parse_s

    planted = os.path.join(os.path.dirname(os.path.abspath(args.test)),
                           "planted.json")
    if os.path.exists(planted):
        ok, message = planted_check(planted, test, distinct_train)
        print("ctr_torch: %s: %s" % ("hash check passed" if ok else
                                     "HASH CHECK FAILED", message))
        if not ok:
            sys.exit(1)

    model = WideDeep(len(unique_ids), num_fields, num_dense, dim, hidden,
                     pooling)
    widths = [num_fields * dim + num_dense] + list(hidden) + [1]
    kernels = glorot_kernels(list(zip(widths[:-1], widths[1:])), seed)
    if spec.get("linear", {}).get("initializer", {}).get("kind",
                                                         "ZEROS") != "ZEROS":
        sys.exit("ctr_torch: mirrors a ZEROS linear table only")
    model.load_psflow_values(
        kernels, table_rows(unique_ids, dim,
                            spec.get("embedding", {}).get("initializer", {})))
    groups = [{"params": [p for n, p in model.named_parameters()
                          if n not in ("embedding.weight", "linear.weight")]}]
    schedules = [schedule]
    table_settings = []
    for name in ("embedding", "linear"):
        table = spec.get(name, {})
        own = table.get("optimizer", {})
        table_schedule = table.get("learning_rate", schedule)
        group = {"params": [getattr(model, name).weight], "lr": 1.0,
                 "initial_accumulator_value": own.get(
                     "initial_accumulator_value", accumulator)
                 if own else accumulator,
                 "eps": own.get("epsilon", epsilon) if own else epsilon}
        groups.append(group)
        schedules.append(table_schedule)
        table_settings.append("%s %s, accumulator %g" % (
            name, describe_schedule(table_schedule),
            group["initial_accumulator_value"]))
    # Every group's rate is psflow's schedule at the global step (the base
    # rates are 1 and the LambdaLR factor is the whole rate).
    opt = torch.optim.Adagrad(groups, lr=1.0,
                              initial_accumulator_value=accumulator,
                              eps=epsilon)
    # torch 1.13's Adagrad starts every accumulator at the constructor's
    # value, not its group's: a table's own initial_accumulator_value
    # needs setting here.
    with torch.no_grad():
        for group in opt.param_groups:
            for p in group["params"]:
                opt.state[p]["sum"].fill_(group.get(
                    "initial_accumulator_value", accumulator))
    rates = torch.optim.lr_scheduler.LambdaLR(
        opt, [lambda step, c=c: psflow_rate(c, step) for c in schedules])
    order = training_batches(len(train[0]), batch_size, epochs,
                             args.workers, seed)
    train_idx_t = torch.from_numpy(train_idx)
    train_dense_t = torch.from_numpy(train[1])
    train_labels_t = torch.from_numpy(train[0].astype(np.float32))
    order_t = torch.from_numpy(order)
    load_s = time.perf_counter() - start
    print("ctr_torch: loaded %d training and %d test examples in %.1f s "
          "(untimed: parsing and hashing %.1f s, id -> row index %.1f s, the "
          "rest initial values and batch order); %d rows (%d distinct "
          "training ids, %d test-only); Adagrad with sparse gradients on the "
          "tables" % (len(train[0]), len(test[0]), load_s, parse_s, index_s,
                      len(unique_ids), distinct_train,
                      len(unique_ids) - distinct_train))
    print("ctr_torch: model %d fields x %d (%s) + %d dense -> mlp %s relu; "
          "wide linear; %s (%s), batch %d, %g epochs = %d steps, %d "
          "workers' batches in turn" % (
              num_fields, dim, pooling, num_dense, "-".join(map(str, widths)),
              describe_schedule(schedule), ", ".join(table_settings),
              batch_size, epochs, len(order), args.workers))
    sys.stdout.flush()

    # ---- train (timed).
    steps = len(order)
    log_every = max(1, math.ceil(len(train[0]) / batch_size))
    model.train()
    loss_sum, loss_count = 0.0, 0
    cpu0 = time.process_time()
    t0 = time.perf_counter()
    for step in range(steps):
        rows = order_t[step]
        logits = model(train_idx_t[rows], train_dense_t[rows])
        loss = F.binary_cross_entropy_with_logits(logits, train_labels_t[rows])
        opt.zero_grad(set_to_none=True)
        loss.backward()
        opt.step()
        rates.step()
        loss_sum += loss.item()
        loss_count += 1
        if (step + 1) % log_every == 0 or step + 1 == steps:
            print("ctr_torch: step %d/%d, %.1f s, mean training loss %.4f" % (
                step + 1, steps, time.perf_counter() - t0,
                loss_sum / loss_count))
            sys.stdout.flush()
            loss_sum, loss_count = 0.0, 0
    train_s = time.perf_counter() - t0
    cpu_s = time.process_time() - cpu0
    examples = steps * batch_size
    rate = examples / train_s

    # ---- evaluate (untimed).
    t1 = time.perf_counter()
    model.eval()
    test_idx_t = torch.from_numpy(test_idx)
    test_dense_t = torch.from_numpy(test[1])
    probabilities = []
    with torch.no_grad():
        for begin in range(0, len(test[0]), eval_batch):
            logits = model(test_idx_t[begin:begin + eval_batch],
                           test_dense_t[begin:begin + eval_batch])
            probabilities.append(sigmoid64(logits.numpy()).astype(np.float32))
    probabilities = np.concatenate(probabilities)
    auc = auc_exact(probabilities, test[0])
    loss = log_loss(probabilities, test[0])
    eval_s = time.perf_counter() - t1

    print("ctr_torch: trained %d examples (%d steps of %d) in %.2f s: %.0f "
          "examples/s, %.2f CPU s (%.0f%% of %d threads); evaluated %d test "
          "examples in %.1f s: AUC %.4f, log loss %.4f" % (
              examples, steps, batch_size, train_s, rate, cpu_s,
              100 * cpu_s / train_s / args.threads, args.threads,
              len(test[0]), eval_s, auc, loss))
    print("RESULT ctr_torch examples_per_sec=%.0f train_s=%.3f test_auc=%.6f "
          "test_logloss=%.6f threads=%d torch=%s batch_size=%d epochs=%g "
          "steps=%d load_s=%.1f" % (rate, train_s, auc, loss, args.threads,
                                    torch.__version__, batch_size, epochs,
                                    steps, load_s))


if __name__ == "__main__":
    main()
