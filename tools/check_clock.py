#!/usr/bin/env python3
"""Fails when production code sleeps on the system clock directly.

Time goes through common/clock.h (a Clock: RealClock() in production, a
FakeClock in tests), so behaviour that depends on time can be tested in
process without waiting. Tests, benchmarks and the clock itself may sleep.
"""
import pathlib
import re
import sys

ROOT = pathlib.Path(__file__).resolve().parent.parent
SOURCE_DIRS = ["checkpoint", "chief", "client", "common", "data", "evaluation",
               "evaluator", "model", "ps", "worker"]
ALLOWED = {"common/clock.cc"}
SLEEP = re.compile(
    r"\babsl::SleepFor\s*\(|\bsleep_for\s*\(|\bsleep_until\s*\(|"
    r"(?<![\w.>:])(?:usleep|nanosleep|sleep)\s*\(")


def is_test(path):
    name = path.name
    return (name.endswith("_test.cc") or "testing" in path.parts or
            name.startswith("test_") or name.endswith("_testlib.cc"))


def main():
    problems = []
    for top in SOURCE_DIRS:
        for path in sorted((ROOT / top).rglob("*")):
            if path.suffix not in (".cc", ".h", ".cu") or is_test(path):
                continue
            rel = path.relative_to(ROOT).as_posix()
            if rel in ALLOWED:
                continue
            for number, line in enumerate(path.read_text().splitlines(), 1):
                code = line.split("//", 1)[0]
                if SLEEP.search(code):
                    problems.append(f"{rel}:{number}: {line.strip()}")
    if problems:
        print("production code sleeps on the system clock directly; take a "
              "Clock (common/clock.h) and call its SleepFor/SleepUntil/"
              "AwaitWithDeadline instead:")
        print("\n".join(problems))
        return 1
    print("check_clock: no direct sleeps in production code")
    return 0


if __name__ == "__main__":
    sys.exit(main())
