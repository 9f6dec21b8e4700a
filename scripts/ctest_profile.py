#!/usr/bin/env python3
"""Where a CTest run's time went: each test's seconds from CTest's LastTest.log, summed by
group (the name before its first ':', "hf interop", "docs", ...), the slowest tests, and the
docs path's slowest blocks (its "ok FILE:LINE (N s)" lines).

  ctest_profile.py [BUILD_DIR] [--top N]     (default build, 15)

The seconds are each test's own wall time: with ctest -j2 two run at once, so their sum is
about twice the run's length. Exits 2 with one `error:` line when there is no log.
"""
import argparse
import collections
import os
import re
import sys


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("build", nargs="?", default="build")
    ap.add_argument("--top", type=int, default=15)
    a = ap.parse_args()
    log = os.path.join(a.build, "Testing", "Temporary", "LastTest.log")
    if not os.path.isfile(log):
        print(f"error: {log}: no such file (run ctest in {a.build} first)", file=sys.stderr)
        sys.exit(2)
    if a.top < 1:
        print(f"error: --top {a.top}: must be at least 1", file=sys.stderr)
        sys.exit(2)
    tests, blocks, name = [], [], None
    with open(log, errors="replace") as f:
        for line in f:
            m = re.match(r"\d+/\d+ Testing: (.*)", line)
            if m:
                name = m.group(1).strip()
                continue
            m = re.match(r"Test time =\s+([\d.]+) sec", line)
            if m and name is not None:
                tests.append((float(m.group(1)), name))
                name = None
                continue
            m = re.match(r"ok\s+(\S+?\.md:\d+).*\((\d+) s\)$", line.strip())
            if m:
                blocks.append((int(m.group(2)), m.group(1)))
    if not tests:
        print(f"error: {log}: no test times in it", file=sys.stderr)
        sys.exit(2)
    total = sum(t for t, _ in tests)
    print(f"{len(tests)} tests, {total:.0f} s of test time (ctest -j2: about {total / 2 / 60:.1f} min of run)")
    groups = collections.defaultdict(lambda: [0, 0.0])
    for t, n in tests:
        g = groups[n.split(":")[0]]
        g[0] += 1
        g[1] += t
    print("by group:")
    for g, (count, seconds) in sorted(groups.items(), key=lambda x: -x[1][1])[:a.top]:
        print(f"  {seconds:7.0f} s  {count:4d}  {g}")
    print("slowest tests:")
    for t, n in sorted(tests, reverse=True)[:a.top]:
        print(f"  {t:7.1f} s  {n[:110]}")
    if blocks:
        print(f"docs path: {len(blocks)} blocks, {sum(b for b, _ in blocks)} s; slowest:")
        for s, where in sorted(blocks, reverse=True)[:a.top]:
            print(f"  {s:7d} s  {where}")


if __name__ == "__main__":
    main()
