"""Run again, each in a process of its own, the mutants that ``mutmut run`` reported as timeouts.

mutmut runs each mutant in a child forked from a process that has already imported the tests, and stops
it after a budget of CPU seconds. Where the code under test starts threads or worker processes (the
labelling server, the clip prefetcher, MuJoCo rendering), a forked child can spend that budget without
the tests' own work (a mutant whose tests pass alone was reported as a timeout), so a timeout there is
not a caught mutant until it is run again. This runs each one's tests (``mutmut tests-for-mutant``) in
a fresh interpreter inside ``mutants/``, the mutant switched on by ``MUTANT_UNDER_TEST``, under a
wall-clock limit, and prints per module: killed (a test failed), survived (every test passed) and
hung (still running at the limit). Run it in the folder where ``mutmut run`` ran.

    OMP_NUM_THREADS=1 python scripts/mutmut_timeouts.py "rlhp.feedback.querent*" --wall-s 180
"""

from __future__ import annotations

import argparse
import collections
import fnmatch
import json
import os
import subprocess
import sys
from pathlib import Path

TIMEOUT_CODES = {-24, -9, 24, 36, 152}
"""mutmut's exit codes of a mutant stopped for time: SIGXCPU or SIGKILL, as a signal or as a shell status."""
BIN = Path(sys.executable).parent


def timed_out(mutants: Path, patterns: list[str]) -> list[str]:
    """The names of the mutants under ``mutants/`` whose recorded result is a timeout, matching a pattern."""
    names = []
    for meta in sorted(mutants.rglob("*.meta")):
        codes = json.loads(meta.read_text())["exit_code_by_key"]
        names += [n for n, code in codes.items()
                  if code in TIMEOUT_CODES and any(fnmatch.fnmatch(n, p) for p in patterns)]
    return names


def verdict(mutants: Path, name: str, wall_s: float) -> str:
    """``killed``, ``survived`` or ``hung``: the mutant's tests run in a fresh interpreter."""
    tests = subprocess.run([str(BIN / "mutmut"), "tests-for-mutant", name], capture_output=True, text=True,
                           check=True).stdout.split()
    env = {**os.environ, "MUTANT_UNDER_TEST": name, "PYTHONPATH": str(mutants)}
    try:
        done = subprocess.run([sys.executable, "-m", "pytest", "-x", "-q", "-p", "no:randomly", *tests], cwd=mutants,
                              env=env, capture_output=True, timeout=wall_s)
    except subprocess.TimeoutExpired:
        return "hung"
    return "survived" if done.returncode == 0 else "killed"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("patterns", nargs="+", help="mutant names, with * as a wildcard")
    parser.add_argument("--wall-s", type=float, default=180.0, help="a mutant still running after this has hung")
    args = parser.parse_args()

    mutants = Path("mutants")
    if not mutants.is_dir():
        raise SystemExit("no mutants/ here: run this where `mutmut run` ran")
    names = timed_out(mutants, args.patterns)
    counts: dict[str, collections.Counter] = collections.defaultdict(collections.Counter)
    for i, name in enumerate(names, 1):
        result = verdict(mutants, name, args.wall_s)
        counts[name.split(".x")[0]][result] += 1
        print(f"[{i}/{len(names)}] {result}: {name}", flush=True)
    print("\n| module | timeouts | killed | survived | hung |\n|---|---:|---:|---:|---:|")
    for module, c in counts.items():
        print(f"| `{module}` | {c.total()} | {c['killed']} | {c['survived']} | {c['hung']} |")


if __name__ == "__main__":
    main()
