"""What the apps' interop scripts share: a line a check (ok / FAIL), their --bin, --source and
--work arguments (the work folder made anew), and the exit status of the whole."""
import argparse
import os
import shutil

failures = []


def check(ok, what):
    print(("ok    " if ok else "FAIL  ") + what)
    if not ok:
        failures.append(what)


def arguments():
    """--bin (the apps), --source (the checkout), --work (emptied and made); returns the parsed arguments."""
    p = argparse.ArgumentParser()
    p.add_argument("--bin", required=True)
    p.add_argument("--source", required=True)
    p.add_argument("--work", required=True)
    a = p.parse_args()
    shutil.rmtree(a.work, ignore_errors=True)
    os.makedirs(a.work)
    return a


def status():
    """Prints how many checks failed; 1 when any did, else 0."""
    print(f"{len(failures)} failed" if failures else "all checks passed")
    return 1 if failures else 0
