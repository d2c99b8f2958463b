#!/usr/bin/env python3
"""Fails when an #include breaks psflow's layering (docs/architecture.md).

Every source folder has a floor; a file may include headers from its own
folder or from folders on lower floors only:

  0  common/                              status, logging, files, json
  1  proto/ common/rpc/                    messages; the only gRPC glue
  2  common/job/ common/metrics/ data/ model/device/
  3  ps/ checkpoint/ model/
  4  client/                              the client library
  5  evaluation/                          held-out metrics of a job's model
  6  chief/ worker/ evaluator/            the roles
  7  client/psctl/                        the operator's tool
  8  bench/ tests/ deploy/ fuzz/          leaves

Roles never include each other, with one declared exception: worker 0
runs the chief's duties through chief's public API (PUBLIC_ROLE_HEADERS).
Unit tests (*_test.cc) may include any floor (a checkpoint test drives the
real client), but never a role's internals from another folder.

Locks go through common/mutex.h (which ThreadSanitizer can see; see
docs/testing.md): only the files in ABSL_SYNC_ALLOWED include
absl/synchronization/ directly.

Usage: check_layering.py [ROOT]   (exit 0: clean; 1: violations listed)
"""

import os
import re
import sys

FLOORS = {
    "common": 0,
    "third_party": 0,
    "proto": 1,
    "common/rpc": 1,
    "common/job": 2,
    "common/metrics": 2,
    "data": 2,
    "model/device": 2,
    "ps": 3,
    "checkpoint": 3,
    "model": 3,
    "client": 4,
    "evaluation": 5,
    "chief": 6,
    "worker": 6,
    "evaluator": 6,
    "client/psctl": 7,
    "bench": 8,
    "tests": 8,
    "deploy": 8,
    "fuzz": 8,
}
ROLES = {"chief", "worker", "evaluator"}
# Headers a role offers to other roles.
PUBLIC_ROLE_HEADERS = {
    "chief/chief_runner.h",  # worker 0 runs the chief's duties
    "chief/job_coordinator.h",  # the job's state machine, in process
    "chief/local_coordinator_client.h",  # its in-process client
    "chief/termination.h",  # its save on SIGTERM (ChiefOptions.termination)
}
# Files that may include absl/synchronization/ (everything else locks
# through common/mutex.h).
ABSL_SYNC_ALLOWED = {
    "common/mutex.h",  # the aliases and the TSan twin
    "common/process_setup.cc",  # configures abseil's deadlock detection
}
SOURCE_SUFFIXES = (".h", ".cc", ".cu", ".cuh")
INCLUDE = re.compile(r'^\s*#\s*include\s+"([^"]+)"')


def folder_of(path):
    """The longest FLOORS key that is a folder prefix of `path`."""
    parts = path.split("/")
    for n in range(len(parts) - 1, 0, -1):
        key = "/".join(parts[:n])
        if key in FLOORS:
            return key
    return None


def violation(source, header):
    """Why `source` may not include `header`, or None when it may."""
    if header.startswith("absl/synchronization/") and \
            source not in ABSL_SYNC_ALLOWED:
        return "lock through common/mutex.h, which ThreadSanitizer can " \
               "see (docs/testing.md)"
    src, dst = folder_of(source), folder_of(header)
    if src is None or dst is None or src == dst:
        return None
    is_test = source.endswith("_test.cc")
    if dst in ROLES and header not in PUBLIC_ROLE_HEADERS and (
            src in ROLES or is_test or FLOORS[src] <= FLOORS[dst]):
        return "a role's internals (%s/) are private to it" % dst
    if is_test or header in PUBLIC_ROLE_HEADERS:
        return None
    if FLOORS[dst] >= FLOORS[src]:
        return "%s/ (floor %d) may only include lower floors, not %s/ " \
               "(floor %d)" % (src, FLOORS[src], dst, FLOORS[dst])
    return None


def check(root):
    problems = []
    for directory, dirs, files in os.walk(root):
        dirs[:] = [d for d in dirs
                   if not d.startswith((".", "bazel-")) and d != "bazel_stubs"]
        for name in files:
            if not name.endswith(SOURCE_SUFFIXES):
                continue
            path = os.path.join(directory, name)
            relative = os.path.relpath(path, root)
            with open(path, encoding="utf-8", errors="replace") as f:
                for number, line in enumerate(f, 1):
                    m = INCLUDE.match(line)
                    if not m:
                        continue
                    why = violation(relative, m.group(1))
                    if why:
                        problems.append("%s:%d: includes \"%s\": %s" %
                                        (relative, number, m.group(1), why))
    return sorted(problems)


def main():
    root = sys.argv[1] if len(sys.argv) > 1 else "."
    problems = check(root)
    for p in problems:
        print(p)
    if problems:
        print("check_layering: %d include(s) break the layering "
              "(docs/architecture.md, \"Layers\")" % len(problems))
        return 1
    print("check_layering: every include respects the layering")
    return 0


if __name__ == "__main__":
    sys.exit(main())
