#!/usr/bin/python3
"""The Keras guide convnet of configs/fashion_mnist_convnet.json in PyTorch
(Debian's python3-torch, CPU), for bench/convnet_bench.py and bench/RESULTS.md.

  convnet_torch.py speed --threads=1 --batch=64 [--device=cuda]
      forward + backward per example on random images (on a GPU: the batch
      uploaded and every gradient downloaded each step, as psflow's
      convnet_bench does): prints the median microseconds per example of
      --rounds rounds (the number only).

  convnet_torch.py train --epochs=10 --workers=2 [--mode=sync]
      trains on the real Fashion-MNIST files with psflow's schedule and data
      order (each worker's shard shuffled as data/batch_stream.cc does) and
      prints the final test accuracy. --mode=async (the default) takes the
      workers' batches in turn, one update each, as an async job without
      staleness would (--staleness=k computes each gradient on the
      parameters k updates old, as an async job with that staleness
      does); --mode=sync averages one batch of every worker per
      update, as a SYNC job does (each batch normalized by its own
      statistics, the moving statistics updated once with their mean).

The model matches psflow's layer for layer: NHWC "same"/"valid" padding as
TensorFlow pads (the odd row after the image), Glorot-uniform kernels, zero
biases, batch normalization with center and no scale (epsilon 1e-3; when
training, the moving mean and variance follow Keras and psflow exactly:
v = 0.99 v + 0.01 x with the biased batch variance, not PyTorch's unbiased
one), Adam with epsilon 1e-7 (Keras'), cosine decay to alpha over the run's
own updates. The speed mode uses PyTorch's own batch normalization.
"""
import argparse
import gzip
import math
import struct
import sys
import time

import torch
import torch.nn as nn
import torch.nn.functional as F

DATA = "/usr/share/datasets/fashion-mnist/"
MASK64 = (1 << 64) - 1


class CenterBatchNorm(nn.Module):
    """BatchNormalization(center=True, scale=False).

    With keras_statistics, training records each batch's mean and biased
    variance, and update_moving_statistics() moves the running ones by
    their mean (Keras' and psflow's rule); otherwise PyTorch's BatchNorm2d
    updates them itself, with the unbiased variance."""

    MOMENTUM = 0.99  # Keras' default, psflow's too

    def __init__(self, channels, keras_statistics=False):
        super().__init__()
        self.bn = nn.BatchNorm2d(channels, eps=1e-3, momentum=1 - self.MOMENTUM,
                                 affine=False)
        self.beta = nn.Parameter(torch.zeros(channels))
        self.keras_statistics = keras_statistics
        self.batch_statistics = []

    def forward(self, x):
        if self.training and self.keras_statistics:
            y = F.batch_norm(x, None, None, training=True, eps=self.bn.eps)
            with torch.no_grad():
                self.batch_statistics.append(
                    (x.mean(dim=(0, 2, 3)), x.var(dim=(0, 2, 3), unbiased=False)))
        else:
            y = self.bn(x)
        return y + self.beta.view(1, -1, 1, 1)

    @torch.no_grad()
    def update_moving_statistics(self):
        mean = torch.stack([m for m, _ in self.batch_statistics]).mean(0)
        var = torch.stack([v for _, v in self.batch_statistics]).mean(0)
        self.bn.running_mean.mul_(self.MOMENTUM).add_(mean, alpha=1 - self.MOMENTUM)
        self.bn.running_var.mul_(self.MOMENTUM).add_(var, alpha=1 - self.MOMENTUM)
        self.batch_statistics.clear()


def same_padding(size, kernel, stride):
    out = (size + stride - 1) // stride
    total = max((out - 1) * stride + kernel - size, 0)
    return total // 2, total - total // 2


class Convnet(nn.Module):
    def __init__(self, keras_statistics=False):
        super().__init__()
        self.conv1 = nn.Conv2d(1, 12, 3, bias=False)
        self.bn1 = CenterBatchNorm(12, keras_statistics)
        self.conv2 = nn.Conv2d(12, 24, 6, stride=2, bias=False)
        self.bn2 = CenterBatchNorm(24, keras_statistics)
        self.conv3 = nn.Conv2d(24, 32, 6, stride=2, bias=True)
        self.bn3 = CenterBatchNorm(32, keras_statistics)
        self.dense = nn.Linear(32, 256)
        self.dropout = nn.Dropout(0.5)
        self.out = nn.Linear(256, 10)
        for m in self.modules():
            if isinstance(m, (nn.Conv2d, nn.Linear)):
                nn.init.xavier_uniform_(m.weight)
                if m.bias is not None:
                    nn.init.zeros_(m.bias)

    def forward(self, pixels):  # uint8-valued floats, N x 1 x 28 x 28
        x = pixels * (1.0 / 255)
        t, b = same_padding(28, 3, 1)
        x = F.relu(self.bn1(self.conv1(F.pad(x, (t, b, t, b)))))
        x = F.relu(self.bn2(self.conv2(x)))
        t, b = same_padding(x.shape[-1], 6, 2)
        x = F.relu(self.bn3(self.conv3(F.pad(x, (t, b, t, b)))))
        x = x.mean(dim=(2, 3))
        x = self.dropout(F.relu(self.dense(x)))
        return self.out(x)


def speed(args):
    """Like convnet_bench's train step: the batch goes to the device, and
    every gradient comes back to the host, each step."""
    torch.set_num_threads(args.threads)
    torch.manual_seed(1)
    device = torch.device(args.device)
    model = Convnet().train().to(device)
    x = torch.rand(args.batch, 1, 28, 28) * 255
    y = torch.randint(0, 10, (args.batch,))
    on_gpu = device.type == "cuda"
    if on_gpu:
        x, y = x.pin_memory(), y.pin_memory()

    def step():
        model.zero_grad(set_to_none=True)
        F.cross_entropy(model(x.to(device, non_blocking=True)),
                        y.to(device, non_blocking=True)).backward()
        if on_gpu:
            for p in model.parameters():
                p.grad.to("cpu")
            torch.cuda.synchronize()

    for _ in range(3):
        step()
    rounds = []
    for _ in range(args.rounds):
        start = time.perf_counter()
        for _ in range(args.steps):
            step()
        rounds.append((time.perf_counter() - start) / args.steps / args.batch * 1e6)
    rounds.sort()
    print("%.3f" % rounds[len(rounds) // 2])


def read_idx(path):
    with gzip.open(path, "rb") as f:
        data = f.read()
    dims = data[3]
    shape = struct.unpack(">" + "I" * dims, data[4:4 + 4 * dims])
    return torch.frombuffer(bytearray(data[4 + 4 * dims:]), dtype=torch.uint8).reshape(shape)


def splitmix64(state):
    state = (state + 0x9E3779B97F4A7C15) & MASK64
    z = state
    z = ((z ^ (z >> 30)) * 0xBF58476D1CE4E5B9) & MASK64
    z = ((z ^ (z >> 27)) * 0x94D049BB133111EB) & MASK64
    return state, z ^ (z >> 31)


def epoch_order(n, seed, epoch):
    """data/batch_stream.cc's EpochOrder, bit for bit."""
    order = list(range(n))
    state = (seed * 0x100000001B3 + epoch) & MASK64
    for i in range(n - 1, 0, -1):
        state, r = splitmix64(state)
        j = r % (i + 1)
        order[i], order[j] = order[j], order[i]
    return order


def train(args):
    torch.set_num_threads(args.threads)
    torch.manual_seed(args.seed)
    images = read_idx(DATA + "train-images-idx3-ubyte.gz").float().unsqueeze(1)
    labels = read_idx(DATA + "train-labels-idx1-ubyte.gz").long()
    test_images = read_idx(DATA + "t10k-images-idx3-ubyte.gz").float().unsqueeze(1)
    test_labels = read_idx(DATA + "t10k-labels-idx1-ubyte.gz").long()
    n = images.shape[0]
    shards = [list(range(w, n, args.workers)) for w in range(args.workers)]
    per_worker = [len(s) // args.batch for s in shards]
    # One update per batch (async), or per batch of every worker (sync), as
    # common/job/job_config.cc's TotalGlobalSteps counts them.
    per_update = args.workers if args.mode == "sync" else 1
    total_steps = math.ceil(args.epochs * n / args.batch / per_update)
    model = Convnet(keras_statistics=True)
    norms = [m for m in model.modules() if isinstance(m, CenterBatchNorm)]
    optimizer = torch.optim.Adam(model.parameters(), lr=args.lr, betas=(args.beta1, 0.999),
                                 eps=1e-7)
    step = 0
    start = time.perf_counter()

    params = list(model.parameters())
    # Parameters after each of the last `staleness` updates (oldest first):
    # with --staleness=k a gradient is computed on the parameters k updates
    # old, as an async parameter server applies it.
    history = []

    def update(batch_indexes):
        """One update from the mean gradient of these batches."""
        progress = min(step, total_steps) / total_steps
        lr = args.lr * (args.alpha + (1 - args.alpha) * 0.5 * (1 + math.cos(math.pi * progress)))
        if step < args.warmup_steps:  # ps/lr_schedule.cc's linear warm-up
            lr *= (step + 1) / args.warmup_steps
        for group in optimizer.param_groups:
            group["lr"] = lr
        optimizer.zero_grad(set_to_none=True)
        current = [p.detach().clone() for p in params]
        stale = current
        if args.staleness > 0:
            history.append(current)
            stale = history[0]
            with torch.no_grad():
                for p, old in zip(params, stale):
                    p.copy_(old)
        for indexes in batch_indexes:
            index = torch.tensor(indexes)
            loss = F.cross_entropy(model(images[index]), labels[index])
            (loss / len(batch_indexes)).backward()
        if args.staleness > 0:
            with torch.no_grad():
                for p, now in zip(params, current):
                    p.copy_(now)
        optimizer.step()
        del history[:-args.staleness or len(history)]
        for norm in norms:
            norm.update_moving_statistics()

    for epoch in range(math.ceil(args.epochs)):
        batches = []
        for w, shard in enumerate(shards):
            order = epoch_order(len(shard), args.seed, epoch)
            batches.append([[shard[order[b * args.batch + i]] for i in range(args.batch)]
                            for b in range(per_worker[w])])
        model.train()
        for b in range(max(per_worker)):
            ready = [batches[w][b] for w in range(args.workers) if b < len(batches[w])]
            if args.mode == "sync":
                if step < total_steps:
                    update(ready)
                    step += 1
                continue
            for indexes in ready:
                if step < total_steps:
                    update([indexes])
                    step += 1
        print("epoch %d: %d steps, %.0f s" % (epoch + 1, step, time.perf_counter() - start),
              file=sys.stderr)
    model.eval()
    with torch.no_grad():
        correct = sum(int((model(test_images[i:i + 1000]).argmax(1) == test_labels[i:i + 1000]).sum())
                      for i in range(0, test_images.shape[0], 1000))
    print("final test accuracy %.4f after %d steps (%.0f s)" %
          (correct / test_images.shape[0], step, time.perf_counter() - start))


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("mode", choices=["speed", "train"])
    parser.add_argument("--threads", type=int, default=1)
    parser.add_argument("--device", default="cpu", help="speed: cpu or cuda")
    parser.add_argument("--batch", type=int, default=64)
    parser.add_argument("--steps", type=int, default=30)
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--epochs", type=float, default=10)
    parser.add_argument("--workers", type=int, default=2)
    parser.add_argument("--mode", choices=["async", "sync"], default="async")
    parser.add_argument("--lr", type=float, default=0.001)
    parser.add_argument("--alpha", type=float, default=0.05)
    parser.add_argument("--beta1", type=float, default=0.9)
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--warmup_steps", type=int, default=0)
    parser.add_argument("--staleness", type=int, default=0,
                        help="train: gradients computed on the parameters "
                        "this many updates old (async mode's staleness)")
    args = parser.parse_args()
    speed(args) if args.mode == "speed" else train(args)


if __name__ == "__main__":
    main()
