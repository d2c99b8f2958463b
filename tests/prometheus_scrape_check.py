#!/usr/bin/env python3
"""A real Prometheus (Debian's `prometheus`) scrapes a running local job.

Starts `psctl local --metrics` (1 ps, 2 workers with worker 0 as chief, an
evaluator) on a job long enough to outlast the checks, points Prometheus
at the targets file psctl writes (file_sd), and waits, on progress only,
until Prometheus's query API shows every task up with its labels, the step
counters growing, and each role's metrics; then parses every endpoint with
the Python client's parser (python3-prometheus-client) and stops both.
Exit status 0 when every check passed.
"""

import argparse
import json
import os
import random
import signal
import socket
import subprocess
import sys
import tempfile
import time
import urllib.parse
import urllib.request

from prometheus_client.parser import text_string_to_metric_families

DATA = "/usr/share/datasets/fashion-mnist/"
DEADLINE_S = 600  # a bound on a hung run, not a speed requirement


def free_port():
    """A free port outside the kernel's ephemeral range, as psflow's own
    launchers pick (common/free_port.h): no outgoing connection can take it
    before Prometheus binds it."""
    try:
        with open("/proc/sys/net/ipv4/ip_local_port_range") as f:
            low, high = (int(x) for x in f.read().split())
    except (OSError, ValueError):
        low, high = 32768, 60999
    candidates = [p for p in range(10000, 65536) if p < low or p > high]
    rng = random.SystemRandom()
    for _ in range(256 if len(candidates) >= 1024 else 0):
        port = rng.choice(candidates)
        with socket.socket() as s:
            try:
                s.bind(("127.0.0.1", port))
            except OSError:
                continue
            return port
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def get(url):
    with urllib.request.urlopen(url, timeout=10) as response:
        return response.read().decode()


def query(port, promql):
    url = "http://127.0.0.1:%d/api/v1/query?%s" % (
        port, urllib.parse.urlencode({"query": promql}))
    try:
        answer = json.loads(get(url))
    except OSError:
        return []
    return answer.get("data", {}).get("result", [])


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--psctl", required=True)
    parser.add_argument("--bin_dir", required=True)
    args = parser.parse_args()
    tmp = tempfile.mkdtemp(prefix="prometheus_test_",
                           dir=os.environ.get("TEST_TMPDIR"))
    job = {
        "name": "prometheus_test",
        "model": {"mlp": {"hidden_sizes": [32]}},
        "optimizer": {"kind": "ADAM"},
        "learning_rate": {"learning_rate": 0.001},
        "data": {"train_images": DATA + "train-images-idx3-ubyte.gz",
                 "train_labels": DATA + "train-labels-idx1-ubyte.gz",
                 "test_images": DATA + "t10k-images-idx3-ubyte.gz",
                 "test_labels": DATA + "t10k-labels-idx1-ubyte.gz"},
        # Far more than the checks need: the test stops the job itself.
        "training": {"batch_size": 32, "steps": 10000000, "mode": "ASYNC"},
        "logging": {"log_every_steps": 100000},
        "evaluation": {"every_secs": 1, "batch_size": 2000},
        # The evaluator scores each new checkpoint: save often.
        "checkpoint": {"save_every_steps": 300, "max_to_keep": 2},
    }
    job_path = os.path.join(tmp, "job.json")
    with open(job_path, "w") as f:
        json.dump(job, f)
    run_dir = os.path.join(tmp, "run")
    psctl = subprocess.Popen(
        [args.psctl, "local", "--job=" + job_path, "--dir=" + run_dir,
         "--bin_dir=" + args.bin_dir, "--device=cpu", "--metrics",
         "--ps=1", "--workers=2", "--stall_timeout_s=300"],
        stdout=open(os.path.join(tmp, "psctl.log"), "w"),
        stderr=subprocess.STDOUT)
    prometheus = None
    failures = []
    try:
        targets_file = os.path.join(run_dir, "prometheus_targets.json")
        deadline = time.monotonic() + DEADLINE_S
        while not os.path.exists(targets_file):
            if psctl.poll() is not None or time.monotonic() > deadline:
                raise RuntimeError("psctl wrote no targets file")
            time.sleep(0.1)
        with open(targets_file) as f:
            targets = json.load(f)
        tasks = sorted(t["labels"]["task"] for t in targets)
        if tasks != ["evaluator-0", "ps-0", "worker-0", "worker-1"]:
            failures.append("targets file lists %s" % tasks)

        port = free_port()
        config = os.path.join(tmp, "prometheus.yml")
        with open(config, "w") as f:
            f.write("""global:
  scrape_interval: 1s
  scrape_timeout: 1s
scrape_configs:
  - job_name: psflow
    file_sd_configs:
      - files: [%s]
        refresh_interval: 1s
""" % json.dumps(targets_file))
        prometheus = subprocess.Popen(
            ["prometheus", "--config.file=" + config,
             "--storage.tsdb.path=" + os.path.join(tmp, "tsdb"),
             "--web.listen-address=127.0.0.1:%d" % port, "--log.level=warn"],
            stdout=open(os.path.join(tmp, "prometheus.log"), "w"),
            stderr=subprocess.STDOUT)

        # `job` is the scrape config's (no honor_labels needed); the
        # psflow job's name is psflow_job.
        checks = {
            "every target up": lambda: len(
                query(port, 'up{job="psflow"} == 1')) == 4,
            "both workers' steps grow": lambda: len(query(
                port, 'increase(psflow_worker_steps_total{psflow_job="prometheus_test",'
                      'task_type="worker"}[5s]) > 0')) == 2,
            "ps pulls and staleness": lambda: bool(query(
                port, 'psflow_ps_pulls_total{task_type="ps",task_index="0",'
                      'mode="async"} > 0')) and bool(query(
                port, 'psflow_ps_gradient_staleness_count > 0')),
            "chief's global step and checkpoints": lambda: bool(query(
                port, 'psflow_chief_global_step{task_type="worker",'
                      'task_index="0"} > 0')) and bool(query(
                port, 'psflow_chief_checkpoints_total{outcome="saved"} > 0')),
            "evaluator's accuracy": lambda: bool(query(
                port, 'psflow_evaluator_accuracy{psflow_job="prometheus_test",'
                      'task_type="evaluator"} > 0')),
            "system metrics of every task": lambda: len(query(
                port, 'process_resident_memory_bytes{'
                      'psflow_job="prometheus_test"} > 0')) == 4,
            "step phases": lambda: bool(query(
                port, 'psflow_worker_step_phase_seconds_count{phase="compute"}'
                      ' > 0')),
            "standard process metrics, Prometheus' own job label": lambda:
                len(query(port, 'process_cpu_seconds_total{job="psflow",'
                                'psflow_job="prometheus_test"} > 0')) == 4,
            "shared-memory traffic counted": lambda: bool(query(
                port, 'psflow_ps_transferred_bytes_total{'
                      'transport="shared_memory"} > 0')) and bool(query(
                port, 'psflow_ps_shared_memory_sessions > 0')),
            "pulls and pushes through call rings counted": lambda: bool(query(
                port, 'psflow_ps_shared_memory_rings > 0')) and bool(query(
                port, 'psflow_ps_shared_memory_ring_calls_total > 0')),
        }
        pending = dict(checks)
        while pending:
            if psctl.poll() is not None:
                raise RuntimeError("the job ended early (exit %d)" %
                                   psctl.returncode)
            if prometheus.poll() is not None:
                raise RuntimeError("prometheus exited (%d)" %
                                   prometheus.returncode)
            if time.monotonic() > deadline:
                failures.extend("never true: " + name for name in pending)
                break
            for name, check in list(pending.items()):
                if check():
                    print("ok:", name)
                    del pending[name]
            time.sleep(0.5)

        # The exposition parses with the reference parser.
        for target in targets:
            address = target["targets"][0]
            text = get("http://%s/metrics" % address)
            names = {family.name for family in
                     text_string_to_metric_families(text)}
            if not names:
                failures.append("%s: no metrics" % address)
            print("parsed %d families from %s (%s)" %
                  (len(names), address, target["labels"]["task"]))
    except Exception as error:  # report, then clean up
        failures.append(str(error))
    finally:
        if psctl.poll() is None:
            psctl.send_signal(signal.SIGINT)
            try:
                psctl.wait(timeout=60)
            except subprocess.TimeoutExpired:
                psctl.kill()
        if prometheus is not None and prometheus.poll() is None:
            prometheus.terminate()
            prometheus.wait(timeout=30)
    if failures:
        for name in ("psctl.log", "prometheus.log"):
            path = os.path.join(tmp, name)
            if os.path.exists(path):
                with open(path) as f:
                    sys.stderr.write("---- %s (tail)\n%s\n" %
                                     (name, f.read()[-3000:]))
        for failure in failures:
            print("FAIL:", failure, file=sys.stderr)
        return 1
    print("PASS")
    return 0


if __name__ == "__main__":
    sys.exit(main())
