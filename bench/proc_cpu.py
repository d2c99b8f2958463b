#!/usr/bin/env python3
"""proc_cpu: runs a command and says how much CPU time each of its
processes used (user + system, from /proc/<pid>/stat, sampled every
--every seconds; a process's last sample counts, so up to --every seconds
of a process's end are missed). For psctl local's job: which role (ps
servers, workers, evaluator, chief) the cores went to.

  python3 bench/proc_cpu.py [--every=0.2] [--out=FILE] -- COMMAND ARGS...

Prints (or writes to --out) one line per process name: processes, CPU
seconds, and the share of all of them; then the command's wall time. The
exit status is the command's.
"""
import argparse
import collections
import os
import subprocess
import sys
import time

TICKS = os.sysconf("SC_CLK_TCK")


def children_map():
    """{parent pid: [child pids]} over every process."""
    kids = collections.defaultdict(list)
    for name in os.listdir("/proc"):
        if not name.isdigit():
            continue
        try:
            with open("/proc/%s/stat" % name) as f:
                stat = f.read()
        except OSError:
            continue
        fields = stat[stat.rfind(")") + 2:].split()
        kids[int(fields[1])].append(int(name))
    return kids


def cpu_of(pid):
    """(name, CPU seconds) of pid, or None once it is gone."""
    try:
        with open("/proc/%d/stat" % pid) as f:
            stat = f.read()
    except OSError:
        return None
    name = stat[stat.find("(") + 1:stat.rfind(")")]
    fields = stat[stat.rfind(")") + 2:].split()
    return name, (int(fields[11]) + int(fields[12])) / TICKS


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--every", type=float, default=0.2)
    parser.add_argument("--out", default="")
    parser.add_argument("command", nargs=argparse.REMAINDER)
    args = parser.parse_args()
    command = args.command[1:] if args.command[:1] == ["--"] else args.command
    if not command:
        parser.error("no command")
    start = time.perf_counter()
    child = subprocess.Popen(command)
    last = {}  # pid -> (name, cpu seconds)
    while True:
        done = child.poll() is not None
        kids = children_map()
        stack, seen = [child.pid], []
        while stack:
            pid = stack.pop()
            seen.append(pid)
            stack.extend(kids.get(pid, []))
        for pid in seen:
            got = cpu_of(pid)
            if got is not None:
                last[pid] = got
        if done:
            break
        time.sleep(args.every)
    wall = time.perf_counter() - start
    by_name = collections.defaultdict(lambda: [0, 0.0])
    for name, cpu in last.values():
        by_name[name][0] += 1
        by_name[name][1] += cpu
    total = sum(v[1] for v in by_name.values()) or 1e-9
    lines = ["CPU by process (user + system, sampled every %gs): %.1f CPU s "
             "in %.1f s wall" % (args.every, total, wall)]
    for name, (count, cpu) in sorted(by_name.items(), key=lambda kv: -kv[1][1]):
        lines.append("  %-16s %d process%s %7.1f CPU s  %5.1f%%" % (
            name, count, "" if count == 1 else "es", cpu, 100 * cpu / total))
    text = "\n".join(lines) + "\n"
    if args.out:
        with open(args.out, "w") as f:
            f.write(text)
    else:
        sys.stderr.write(text)
    sys.exit(child.returncode)


if __name__ == "__main__":
    main()
