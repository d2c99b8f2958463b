#!/usr/bin/env python3
"""ctr_accuracy: the wide-and-deep model of configs/ctr_wide_deep.json on a
larger planted-model data set, against the planted model's own AUC (the
best any model can do on that data).

Runs the job through `psctl local` (2 workers, 2 parameter servers, an
evaluator; CPU workers), with the data set generated on first use into
--data_dir (2M training examples by default: 26 fields, about 1.26M
distinct ids, power-law frequencies), and prints one markdown row: the
planted AUC, the job's final test AUC and log loss, the gap, training
time and examples/s, and where the workers' time went.

  bazel build --config=opt //client/psctl:psctl //ps:ps_server //worker \\
      //chief //evaluator
  python3 bench/ctr_accuracy.py --train_examples=2000000 --epochs=2

Any other setting of the job config is changed with --set PATH=JSON
(repeatable; PATH is dot-separated field names, created when missing), e.g.
a table's own optimizer and learning rate:

  --set 'model.wide_deep.linear.optimizer={"kind": "FTRL", "l2": 0.01}' \\
  --set model.wide_deep.linear.learning_rate.learning_rate=5

PATH=null removes the field (e.g. a table's learning_rate: the table then
follows the job's). The row's "settings" column lists every --set, so the
row names its command.
"""

import argparse
import json
import os
import re
import subprocess
import sys
import tempfile

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--train_examples", type=int, default=2000000)
    parser.add_argument("--test_examples", type=int, default=200000)
    parser.add_argument("--epochs", type=float, default=2)
    parser.add_argument("--batch_size", type=int, default=512)
    parser.add_argument("--mode", default="async", choices=["async", "sync"])
    parser.add_argument("--learning_rate", type=float, default=0,
                        help="overrides the job's rate (the dense variables'"
                        ", and a table's without its own; 0: keep it)")
    parser.add_argument("--set", action="append", default=[],
                        metavar="PATH=JSON",
                        help="sets one field of the job config, e.g. "
                        "model.wide_deep.linear.learning_rate.learning_rate=5"
                        " (repeatable)")
    parser.add_argument("--log", default="",
                        help="also writes psctl's whole output here (the "
                        "workers' batch losses)")
    parser.add_argument("--write_job", default="",
                        help="also writes the job config run here (for "
                        "bench/ctr_torch.py --config)")
    parser.add_argument("--data_dir", default="/tmp/psflow-data/ctr_2m")
    parser.add_argument("--bin_dir", default=os.path.join(REPO, "bazel-bin"))
    args = parser.parse_args()

    with open(os.path.join(REPO, "configs", "ctr_wide_deep.json")) as f:
        job = json.load(f)
    job.pop("checkpoint", None)
    data = job["data"]
    data["train_path"] = os.path.join(args.data_dir, "train.txt")
    data["test_path"] = os.path.join(args.data_dir, "test.txt")
    data["synthesize"]["train_examples"] = args.train_examples
    data["synthesize"]["test_examples"] = args.test_examples
    job["training"]["epochs"] = args.epochs
    job["training"]["batch_size"] = args.batch_size
    job["training"]["mode"] = args.mode.upper()
    job["evaluation"]["every_secs"] = 60
    if args.learning_rate > 0:
        job["learning_rate"]["learning_rate"] = args.learning_rate
    for setting in args.set:
        apply_setting(job, setting, parser)

    if args.write_job:
        with open(args.write_job, "w") as f:
            json.dump(job, f, indent=2)
    with tempfile.TemporaryDirectory(prefix="ctr_accuracy_") as tmp:
        job_path = os.path.join(tmp, "job.json")
        with open(job_path, "w") as f:
            json.dump(job, f)
        cmd = [os.path.join(args.bin_dir, "client/psctl/psctl"), "local",
               "--job=" + job_path, "--ps=2", "--workers=2", "--evaluator",
               "--device=cpu", "--dir=" + os.path.join(tmp, "run"),
               "--bin_dir=" + args.bin_dir]
        run = subprocess.run(cmd, stdout=subprocess.PIPE,
                             stderr=subprocess.STDOUT, text=True)
        out = run.stdout
        if args.log:
            with open(args.log, "w") as f:
                f.write(out)
        if run.returncode != 0:
            sys.stdout.write(out[-4000:])
            sys.exit("psctl local failed")
        with open(os.path.join(tmp, "run", "result.json")) as f:
            result = json.load(f)
    planted_path = os.path.join(args.data_dir, "planted.json")
    with open(planted_path) as f:
        planted = json.load(f)
    planted_auc = planted["planted_test_auc"]
    shares = re.findall(r"finished: .*?\((\d+) examples/s\).*?time: ([^\n]*)",
                        out)
    rate = sum(int(s[0]) for s in shares)
    auc = result["test_auc"]
    settings = ["lr %g" % job["learning_rate"]["learning_rate"],
                "batch %d" % args.batch_size] + ["`%s`" % s for s in args.set]
    train_loss = last_epoch_train_loss(out, args.epochs)
    print("| mode | train examples | epochs | settings | planted AUC | "
          "psflow AUC | gap | log loss | train loss (last epoch) | "
          "training s | examples/s | worker time |")
    print("|---|---:|---:|---|---:|---:|---:|---:|---:|---:|---:|---|")
    print("| %s | %d | %g | %s | %.4f | %.4f | %.4f | %.4f | %s | %.0f | %d "
          "| %s |" % (
              args.mode.upper(), args.train_examples, args.epochs,
              ", ".join(settings), planted_auc, auc, planted_auc - auc,
              result["test_loss"],
              "%.4f" % train_loss if train_loss is not None else "-",
              result["training_seconds"], rate,
              shares[0][1] if shares else ""))


def apply_setting(job, setting, parser):
    """Sets job[a][b][c] = value for "a.b.c=<JSON value>"."""
    path, sep, value = setting.partition("=")
    if not sep or not path:
        parser.error("--set %r: use PATH=JSON, e.g. "
                     "model.wide_deep.linear.learning_rate.learning_rate=5"
                     % setting)
    try:
        value = json.loads(value)
    except ValueError:
        value = value  # a bare string such as FTRL
    node = job
    keys = path.split(".")
    for key in keys[:-1]:
        node = node.setdefault(key, {})
        if not isinstance(node, dict):
            parser.error("--set %r: %s is not an object in the job config"
                         % (setting, key))
    if value is None:
        node.pop(keys[-1], None)  # PATH=null: back to the field's default
    else:
        node[keys[-1]] = value


def last_epoch_train_loss(out, epochs):
    """The mean of the workers' logged batch losses over the last epoch
    (the model as it trains on examples it has seen epochs - 1 times), or
    None when the log has none."""
    losses = [(int(e), float(l)) for e, l in re.findall(
        r"epoch (\d+), batch loss ([0-9.]+)", out)]
    if not losses:
        return None
    last = max(e for e, _ in losses)
    tail = [l for e, l in losses if e == last]
    return sum(tail) / len(tail)


if __name__ == "__main__":
    main()
