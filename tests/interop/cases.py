"""Several interop cases in one Python process (torch and transformers import once, ~4 s).

A case is DIRECTION:FAMILY; the old two-argument form DIRECTION FAMILY still names one.
Each case runs in its own folder WORK/DIRECTION-FAMILY; an exception fails that case
with its traceback, and the next one runs. Exit 1 when any case failed.
"""
import os
import sys
import traceback


def parse(ap, raw, valid):
    """raw: the CASE arguments; valid: {direction: [family, ...]}. Refuses any other by name (ap.error: exit 2)."""
    if len(raw) == 2 and ":" not in raw[0] + raw[1]:
        raw = [raw[0] + ":" + raw[1]]
    parsed = []
    for case in raw:
        direction, _, family = case.partition(":")
        if family not in valid.get(direction, ()):
            ap.error(f"case '{case}': expected DIRECTION:FAMILY of "
                     + "; ".join(f"{d}: {', '.join(sorted(f))}" for d, f in valid.items()))
        parsed.append((direction, family))
    return parsed


def run(parsed, work, run_case):
    """run_case(direction, family, folder) -> True when the case agrees."""
    failed = []
    for direction, family in parsed:
        try:
            ok = run_case(direction, family, os.path.join(work, f"{direction}-{family}"))
        except Exception as e:  # noqa: BLE001 - the case fails with its reason; the next one runs
            traceback.print_exc()
            print(f"FAIL: {direction} {family}: {type(e).__name__}: {e}")
            ok = False
        print(f"{'PASS' if ok else 'FAIL'}: {direction} {family}")
        sys.stdout.flush()
        if not ok:
            failed.append(f"{direction}:{family}")
    if len(parsed) > 1:
        print(f"{len(parsed) - len(failed)}/{len(parsed)} cases agree" + (f"; failed: {', '.join(failed)}" if failed else ""))
    sys.exit(1 if failed else 0)
