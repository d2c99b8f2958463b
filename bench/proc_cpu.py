#!/usr/bin/env python3
"""proc_cpu: runs a command and says how much CPU time each of its
processes used (user + system, from /proc/<pid>/stat, sampled every
--every seconds; a process's last sample counts, so up to --every seconds
of a process's end are missed). For psctl local's job: which role (ps
servers, workers, evaluator, chief) the cores went to.

  python3 bench/proc_cpu.py [--every=0.2] [--threads] [--out=FILE] -- COMMAND ARGS...

Prints (or writes to --out) one line per process name: processes, CPU
seconds, and the share of all of them; then the command's wall time. With
--threads, under each process name the CPU seconds of its threads by
thread name (gRPC's reactors are `nexting_thread`; a role's main thread
carries the process's name). The exit status is the command's.
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


def cpu_of(pid, path=None):
    """(name, CPU seconds) of pid (or of the /proc stat file at `path`),
    or None once it is gone."""
    try:
        with open(path or "/proc/%d/stat" % pid) as f:
            stat = f.read()
    except OSError:
        return None
    name = stat[stat.find("(") + 1:stat.rfind(")")]
    fields = stat[stat.rfind(")") + 2:].split()
    return name, (int(fields[11]) + int(fields[12])) / TICKS


def threads_of(pid):
    """{tid: (thread name, CPU seconds)} of pid's threads."""
    out = {}
    try:
        tids = os.listdir("/proc/%d/task" % pid)
    except OSError:
        return out
    for tid in tids:
        got = cpu_of(pid, "/proc/%d/task/%s/stat" % (pid, tid))
        if got is not None:
            out[int(tid)] = got
    return out


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--every", type=float, default=0.2)
    parser.add_argument("--out", default="")
    parser.add_argument("--threads", action="store_true",
                        help="also CPU seconds by thread name")
    parser.add_argument("command", nargs=argparse.REMAINDER)
    args = parser.parse_args()
    command = args.command[1:] if args.command[:1] == ["--"] else args.command
    if not command:
        parser.error("no command")
    start = time.perf_counter()
    child = subprocess.Popen(command)
    last = {}  # pid -> (name, cpu seconds)
    last_threads = {}  # (pid, tid) -> (process name, thread name, cpu s)
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
                if args.threads:
                    for tid, (tname, cpu) in threads_of(pid).items():
                        last_threads[(pid, tid)] = (got[0], tname, cpu)
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
    by_thread = collections.defaultdict(lambda: collections.defaultdict(float))
    for pname, tname, cpu in last_threads.values():
        by_thread[pname][tname] += cpu
    for name, (count, cpu) in sorted(by_name.items(), key=lambda kv: -kv[1][1]):
        lines.append("  %-16s %d process%s %7.1f CPU s  %5.1f%%" % (
            name, count, "" if count == 1 else "es", cpu, 100 * cpu / total))
        for tname, tcpu in sorted(by_thread[name].items(), key=lambda kv: -kv[1]):
            if tcpu >= 0.05:
                lines.append("      thread %-16s %7.2f CPU s" % (tname, tcpu))
    text = "\n".join(lines) + "\n"
    if args.out:
        with open(args.out, "w") as f:
            f.write(text)
    else:
        sys.stderr.write(text)
    sys.exit(child.returncode)


if __name__ == "__main__":
    main()
