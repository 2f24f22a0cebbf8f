"""The field's online benchmark: B-Pref's tasks, rlhp's methods beside the published figures.

For each task in ``--tasks`` (``conf/experiment/bpref/<task>.yaml``) and method (``conf/method/<method>.yaml``) it
runs ``rlhp-train -m experiment=bpref/<task> method=<method>`` over ``--seeds`` seeds, and the same agent on the
task's own reward (``reward_learning=none``, the ceiling), each sweep into its own folder under ``--root`` (a
finished sweep is reused). ``--override`` settings go to every run (a smaller budget: ``--override
total_timesteps=100000``). It reads the finished run folders (never the training code) into the ledger, a CSV of
one row per run (task, method, seed, steps, labels, final return and success rate, wall time, machine, date), kept in
the repository because a run at the protocol's budget takes hours and its folder may not outlive the machine it ran
on: a run recorded again replaces its row. The Markdown table comes from the ledger alone: per task, the published
figures (PEBBLE, SURF, RUNE, QPA, PPE), rlhp's per method and its ceiling (mean ± 95% CI over seeds at the largest
budget recorded: DMC's return, Meta-World's success rate in percent), the steps and the command; a cell with no run
says "not yet run", never a guess.

    python scripts/bench_bpref.py --tasks walker_walk --methods pebble qpa --seeds 3 --out docs/benchmarks.md
"""

from __future__ import annotations

import argparse
import csv
import datetime
import os
from pathlib import Path

import numpy as np
from bench_suite import cell, seeds, sweep
from docblock import add_run_options, show

from rlhp.report.folders import Run

# PPE (NeurIPS 2025), Table 1: scripted teacher, 5 seeds, every method rerun in one setup; DMC: return at 500k
# steps (quadruped-walk, humanoid-stand: see their experiments), Meta-World (v2): success rate in percent.
PUBLISHED = {
    "walker_walk": (100, [453, 661, 415, 796, 908]),
    "cheetah_run": (100, [546, 557, 509, 579, 645]),
    "quadruped_walk": (1_000, [364, 554, 507, 622, 661]),
    "humanoid_stand": (10_000, [249, 307, 279, 454, 577]),
    "drawer_open": (4_000, [20, 40, 67, 40, 80]),
    "door_open": (3_000, [72, 91, 98, 100, 100]),
    "sweep_into": (10_000, [75, 58, 99.6, 81, 96]),
    "button_press": (2_000, [77, 79, 89, 72, 90]),
    "window_open": (400, [87, 87, 97, 90, 100]),
    "hammer": (10_000, [41, 85, 92, 79, 96]),
}
METHODS = ["PEBBLE", "SURF", "RUNE", "QPA", "PPE"]
# The tasks the benchmark's targets name: always in the table, run or not.
TARGETS = ["walker_walk", "cheetah_run", "window_open", "door_open", "button_press"]
CEILING = "ceiling"
FIELDS = ["task", "method", "seed", "steps", "labels", "return", "success_rate", "wall_min", "machine", "date"]
LEDGER = Path(__file__).resolve().parents[1] / "docs" / "data" / "bpref_runs.csv"


def record(task: str, method: str, run: Run, machine: str) -> dict[str, str]:
    """A finished run as a ledger row (``method`` is ``ceiling`` for the agent on the task's own reward)."""
    last = run.rows[-1]
    success = run.evaluation.get("success_rate")
    finished = datetime.date.fromtimestamp(run.folder.eval_json.stat().st_mtime)
    return {"task": task, "method": method, "seed": str(run.folder.config().seed),
            "steps": str(int(last["timesteps"])), "labels": str(int(last.get("comparisons") or 0)),
            "return": f"{run.evaluation['true_return_mean']:.1f}",
            "success_rate": "" if success is None else f"{success:.3f}", "wall_min": f"{last['wall_s'] / 60:.1f}",
            "machine": machine, "date": finished.isoformat()}


def read_ledger(path: Path) -> list[dict[str, str]]:
    """The ledger's rows (none when it does not exist yet)."""
    if not path.exists():
        return []
    with path.open(newline="") as f:
        reader = csv.DictReader(f)
        rows = list(reader)
    if reader.fieldnames != FIELDS:
        raise SystemExit(f"{path} is not a ledger of B-Pref runs: its columns are {reader.fieldnames}, not {FIELDS}")
    return rows


def write_ledger(path: Path, rows: list[dict[str, str]]) -> None:
    """Write ``rows`` sorted by task, method, steps and seed, so that the file's diffs show what changed."""
    path.parent.mkdir(parents=True, exist_ok=True)
    with path.open("w", newline="") as f:
        writer = csv.DictWriter(f, FIELDS, lineterminator="\n")
        writer.writeheader()
        writer.writerows(sorted(rows, key=lambda r: (r["task"], r["method"], int(r["steps"]), int(r["seed"]))))


def merge(ledger: list[dict[str, str]], new: list[dict[str, str]]) -> list[dict[str, str]]:
    """``ledger`` with ``new`` rows added; a new row replaces the row of the same task, method, seed and steps."""
    def key(row: dict[str, str]) -> tuple[str, ...]:
        return row["task"], row["method"], row["seed"], row["steps"]
    replaced = {key(r) for r in new}
    return [r for r in ledger if key(r) not in replaced] + new


def score(rows: list[dict[str, str]], budget: int) -> str:
    """The cell of one task and method: at the largest budget recorded, the mean success rate in percent where the
    env reports one (Meta-World), else the mean return (DMC), with the runs' count, and the steps when they fall
    short of ``budget``, the budget of the task's other cells."""
    if not rows:
        return "not yet run"
    steps = max(int(r["steps"]) for r in rows)
    at = [r for r in rows if int(r["steps"]) == steps]
    if all(r["success_rate"] for r in at):
        value = f"{cell(100 * np.array([float(r['success_rate']) for r in at]), 0)}%"
    else:
        value = cell(np.array([float(r["return"]) for r in at]))
    return f"{value} ({len(at)})" + (f" at {steps:,} steps" if steps != budget else "")


def table(ledger: list[dict[str, str]], methods: list[str]) -> list[str]:
    """The Markdown table's rows: the target tasks and any other task in the ledger, in the published order."""
    recorded = {r["task"] for r in ledger}
    rows = []
    for task in [t for t in PUBLISHED if t in TARGETS or t in recorded]:
        labels, published = PUBLISHED[task]
        cells = {m: [r for r in ledger if r["task"] == task and r["method"] == m] for m in [*methods, CEILING]}
        # The budget the methods ran at (the ceiling's where none has run), which the steps column names.
        budget = max((int(r["steps"]) for m in methods for r in cells[m]), default=0) or max(
            (int(r["steps"]) for r in cells[CEILING]), default=0)
        most = max(3, *(len({r["seed"] for r in cells[m]}) for m in methods))
        # A task with a method not yet run gets the command that runs it where it fits: on a cluster.
        cluster = " hydra/launcher=slurm" if not all(cells[m] for m in methods) else ""
        rows.append(f"| {task} | {labels:,} | {' | '.join(map(str, published))} | "
                    f"{' | '.join(score(cells[m], budget) for m in [*methods, CEILING])} | "
                    f"{f'{budget:,}' if budget else ''} | "
                    f"`rlhp-train -m experiment=bpref/{task} method={','.join(methods)} {seeds(most)}{cluster}` |")
    return rows


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--tasks", nargs="*", default=[], choices=sorted(PUBLISHED),
                        help="tasks to run and record (none: write the table from the ledger alone)")
    parser.add_argument("--methods", nargs="+", default=["pebble"])
    parser.add_argument("--seeds", type=int, default=3)
    parser.add_argument("--ceiling-seeds", type=int, default=None, help="seeds of the ceiling (default: --seeds)")
    parser.add_argument("--jobs", type=int, default=2, help="runs at once")
    parser.add_argument("--ledger", type=Path, default=LEDGER, help="the CSV of recorded runs")
    parser.add_argument("--machine", default=f"{os.cpu_count()}-core CPU, no GPU",
                        help="where the runs ran, recorded with each (default: this machine)")
    add_run_options(parser, "outputs/bench_bpref", "bench_bpref")
    args = parser.parse_args()
    ceiling_seeds = args.seeds if args.ceiling_seeds is None else args.ceiling_seeds
    new = []
    for task in args.tasks:
        base = [f"experiment=bpref/{task}", *args.override]
        for method, sweep_overrides, n in [*((m, [f"method={m}"], args.seeds) for m in args.methods),
                                           (CEILING, ["reward_learning=none"], ceiling_seeds)]:
            if n:
                runs = sweep(args.root / task / method, [*base, *sweep_overrides, seeds(n)], args.jobs)
                new += [record(task, method, run, args.machine) for run in runs]
    ledger = merge(read_ledger(args.ledger), new)
    if new:
        write_ledger(args.ledger, ledger)
    # The caption links the ledger from the page it is written into.
    page = args.out.resolve().parent if args.out else Path.cwd()
    link = Path(os.path.relpath(args.ledger.resolve(), page)).as_posix()
    where = "; ".join(sorted({f"{r['machine']} ({r['date']})" for r in ledger})) or "none yet"
    text = "\n".join([
        f"Written by `python scripts/bench_bpref.py --methods {' '.join(args.methods)} --block {args.block}` from the "
        f"ledger of runs, [{link}]({link}) (`--tasks <task>` runs a task and records it); "
        f"the runs ran on: {where}. DMC: final return; Meta-World: final success rate (success at any step of an "
        "episode), %. rlhp: mean ± 95% CI (Student t) over the seeds in brackets; the ceiling is the same agent on "
        "the task's own reward (its command: `reward_learning=none` in place of `method=`); published: PPE (NeurIPS "
        "2025) Table 1, 5 seeds, Meta-World v2 (rlhp runs v3).", "",
        f"| task | labels | {' | '.join(METHODS)} | {' | '.join(f'rlhp {m}' for m in args.methods)} | ceiling "
        "| steps | command |",
        f"|---|---:|{'---:|' * len(METHODS)}{'---:|' * len(args.methods)}---:|---:|---|", *table(ledger, args.methods)])
    show(text, args.out, args.block)


if __name__ == "__main__":
    main()
