#!/usr/bin/env python3
"""PyTorch eager twin of step_bench: the same model, batch and step.

One step, as step_bench defines it (a worker's step without the parameter
servers):

  upload the parameters from page-locked host buffers (non_blocking),
  upload the batch from ordinary (pageable) host memory, forward (addmm +
  ReLU per layer, softmax cross-entropy), backward, copy every gradient into
  page-locked host buffers (non_blocking), read the batch's loss and the
  number of correct predictions, synchronize.

Weights are stored [in, out] as psflow stores them (x @ W + b). Matmuls run
in float32 unless --tf32 (PyTorch's default is float32 too). Prints one
"RESULT torch_step_bench ..." line: examples/s, the median of --repeats
timed runs of --steps steps, after --warmup steps.

  python3 bench/gpu/torch_step_bench.py --model=default   # 784-256-10, 64
  python3 bench/gpu/torch_step_bench.py --model=large     # 784-4096-4096-10, 1024
"""

import argparse
import math
import statistics
import sys
import time

import torch
import torch.nn.functional as F

# name: (input, hidden widths, classes, batch, timed steps per run)
MODELS = {
    "default": (784, [256], 10, 64, 2000),
    "large": (784, [4096, 4096], 10, 1024, 100),
}


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--model", choices=sorted(MODELS), default="default")
    parser.add_argument("--steps", type=int, default=0,
                        help="timed steps per run; 0 picks by model")
    parser.add_argument("--warmup", type=int, default=20)
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--tf32", action="store_true",
                        help="allow TF32 tensor-core matmuls")
    args = parser.parse_args()
    if not torch.cuda.is_available():
        sys.exit("torch_step_bench: PyTorch sees no CUDA device")

    torch.backends.cuda.matmul.allow_tf32 = args.tf32
    torch.backends.cudnn.allow_tf32 = args.tf32
    inputs, hidden, classes, batch, default_steps = MODELS[args.model]
    steps = args.steps or default_steps
    dev = torch.device("cuda")
    widths = [inputs] + hidden + [classes]

    gen = torch.Generator().manual_seed(1)
    params, host_params, host_grads = [], [], []
    for fan_in, fan_out in zip(widths[:-1], widths[1:]):
        limit = math.sqrt(6.0 / (fan_in + fan_out))  # Glorot uniform
        w = (torch.rand(fan_in, fan_out, generator=gen) * 2 - 1) * limit
        b = torch.zeros(fan_out)
        for value in (w, b):
            params.append(torch.empty_like(value, device=dev,
                                           requires_grad=True))
            host_params.append(value.pin_memory())
            host_grads.append(torch.empty_like(value).pin_memory())
    features = [torch.rand(batch, inputs, generator=gen) for _ in range(8)]
    labels = [torch.randint(0, classes, (batch,), generator=gen)
              for _ in range(8)]
    stats_host = torch.empty(2).pin_memory()

    def step(i):
        with torch.no_grad():
            for p, h in zip(params, host_params):
                p.copy_(h, non_blocking=True)
        x = features[i % 8].to(dev)
        y = labels[i % 8].to(dev)
        z = x
        layers = len(widths) - 1
        for layer in range(layers):
            z = torch.addmm(params[2 * layer + 1], z, params[2 * layer])
            if layer + 1 < layers:
                z = torch.relu(z)
        loss = F.cross_entropy(z, y)  # mean over the batch, as psflow
        for p in params:
            p.grad = None
        loss.backward()
        with torch.no_grad():
            for p, g in zip(params, host_grads):
                g.copy_(p.grad, non_blocking=True)
            correct = (z.argmax(dim=1) == y).sum()
            stats = torch.stack([loss.detach() * batch, correct.float()])
            stats_host.copy_(stats, non_blocking=True)
        torch.cuda.synchronize()
        return stats_host[0].item() / batch

    count = 0
    loss = float("nan")
    for _ in range(args.warmup):
        loss = step(count)
        count += 1
    rates = []
    for _ in range(max(1, args.repeats)):
        start = time.perf_counter()
        for _ in range(steps):
            loss = step(count)
            count += 1
        rates.append(steps * batch / (time.perf_counter() - start))
    median = statistics.median(rates)
    print("RESULT torch_step_bench model=%s layers=%s batch=%d device=\"%s\" "
          "torch=%s tf32=%d steps=%d examples_per_sec=%.0f step_ms=%.4f "
          "runs=%s loss=%.4f" % (
              args.model, "-".join(map(str, widths)), batch,
              torch.cuda.get_device_name(0), torch.__version__,
              int(args.tf32), steps, median, 1000.0 * batch / median,
              ",".join("%d" % r for r in rates), loss))


if __name__ == "__main__":
    main()
