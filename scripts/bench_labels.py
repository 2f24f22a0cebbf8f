"""The label-budget table: methods for fewer labels x label budgets x envs, over seeds, and B-Pref's imperfect
teachers at one budget, each run with ``rlhp-train -m`` into its own sweep folder under ``--root``.

A method is a set of overrides on the env's experiment (``METHODS``); ``--best`` names the overrides of the
best combination. A budget is a number of labels, ``own`` (the task's own experiment's) or ``quarter`` (a quarter
of that: the harder tasks' target is the plain method's own-budget result from it). A finished sweep is reused
(see ``bench_suite.sweep``); with ``--keep``, so is a cell that the block of ``--out`` already holds measured
over as many seeds, for a table built up over several machines whose run folders are not all at hand. The
tables give the final true return, mean and 95% Student-t interval over seeds, and the seeds that reach the
env's target; the budget's person-minutes are its labels at 40 a minute (the labelling page's pace).

    python scripts/bench_labels.py --envs cartpole --budgets 10 100 --seeds 5 --out docs/label-methods.md
"""

from __future__ import annotations

import argparse
import re
import shlex
import time
from pathlib import Path
from typing import NamedTuple

import matplotlib
import matplotlib.ticker
import numpy as np
from bench_suite import cell, final, seeds, sweep

matplotlib.use("Agg")  # files only, no display
import matplotlib.pyplot as plt  # noqa: E402
from docblock import read_block, show


class Task(NamedTuple):
    """An env's experiment, the final true return at which a run counts as solved, and the experiment's labels."""

    experiment: str
    target: float
    own_budget: int


ENVS = {
    "cartpole": Task("cartpole_100_labels", 475.0, 100),
    "pendulum": Task("pendulum", -200.0, 200),
    # Without a fixed target, 90% of the way from a random policy's return to the true-reward ceiling's, as
    # bench_suite.py counts (docs/benchmarks.md): MinAtar Breakout 38.3 to 83.7, Reacher -41.9 to -4.6, Hopper
    # -66.6 to 369.3 (a ceiling whose 3 seeds spread from -69.3 to 806.1 at 50k steps).
    "minatar_breakout": Task("minatar_breakout", 79.2, 1000),
    "reacher": Task("reacher", -8.4, 700),
    "hopper": Task("hopper", 325.7, 700),
}


class Share(NamedTuple):
    """A budget named by its share of the task's own: the task's labels divided by ``divisor``."""

    divisor: int
    heading: str


SHARES = {"own": Share(1, "the task's own budget"), "quarter": Share(4, "a quarter of the task's own")}
METHODS = {
    "plain": [],
    "+SURF": ["reward_trainer/pseudo_labels=surf", "reward_trainer/crop=temporal"],
    "+RUNE": ["reward_net.std_coef=0.05", "reward_net.std_decay=3e-5"],
    "+entropy queries": ["fragmenter=active", "fragmenter.uncertainty_on=entropy"],
    "+robustness": ["reward_trainer/label_filter=contradicted"],
}
ALL_METHODS = [*METHODS, "best"]
"""The table's methods: ``METHODS`` and the best combination (``--best``)."""
TEACHERS = {
    "mistake (10% flipped)": ["gatherer.mistake=0.1"],
    "skip (both in the lowest 10% of the range of returns)": ["gatherer.skip_frac=0.1"],
    "equal (within 10% of the range of returns)": ["gatherer.equal_frac=0.1"],
    "myopic (gamma 0.9)": ["gatherer.myopic_gamma=0.9"],
}
LABELS_A_MINUTE = 40
SOLVED = re.compile(r"\((\d+)/(\d+)\)")
"""How a cell states its seeds solved, ``(k/n)``, as ``result`` writes it."""


def budget(text: str) -> str:
    """A ``--budgets`` entry: a positive number of labels, or a share of the task's own (``own``, ``quarter``)."""
    if text not in SHARES and not (text.isdigit() and int(text) > 0):
        raise argparse.ArgumentTypeError(f"a budget is a positive number of labels or one of {sorted(SHARES)}, "
                                         f"got {text!r}")
    return text


def cell_name(text: str) -> tuple[str, str]:
    """A ``--not-run`` entry, ``method@budget``: a table cell left out (its runs cost more than the table's)."""
    method, _, share = text.partition("@")
    if method not in ALL_METHODS:
        raise argparse.ArgumentTypeError(f"{text!r}: the method is one of {ALL_METHODS}")
    return method, budget(share)


def solved_count(values: np.ndarray, target: float) -> int:
    """The runs at or above the target."""
    return int((values >= target).sum())


def measured_cells(block: str, n_seeds: int) -> dict[tuple[str, str, str], str]:
    """The cells of ``block``'s tables that hold a measurement over ``n_seeds`` seeds, by (env, row, column)."""
    cells = {}
    for table in re.split(r"\n\s*\n", block):
        rows = [[c.strip() for c in line.strip().strip("|").split("|")] for line in table.splitlines()
                if line.startswith("|")]
        if len(rows) < 3:
            continue
        for row in rows[2:]:  # after the header and its rule
            for heading, text in zip(rows[0][2:], row[2:]):
                solved = SOLVED.search(text)
                if solved and int(solved.group(2)) == n_seeds:
                    cells[(row[0], row[1], heading)] = text
    return cells


def solved_in(text: str) -> int:
    """The seeds solved that a measured cell states, ``... (k/n)``."""
    return int(SOLVED.search(text).group(1))


def result(values: np.ndarray, target: float) -> str:
    """``mean ± CI (solved/seeds)``."""
    return f"{cell(values)} ({solved_count(values, target)}/{len(values)})"


def command(experiment: str, overrides: list[str], n_seeds: int) -> str:
    """The sweep's command, as a reader would type it."""
    return " ".join(["rlhp-train -m", f"experiment={experiment}", *overrides, seeds(n_seeds)])


def plot_solved(solved: dict[str, dict[str, dict[int, int]]], n_seeds: int, path: Path) -> None:
    """Seeds solved against labels (log scale), a line a method and a panel an env; cells not run are gaps."""
    fig, axes = plt.subplots(1, len(solved), figsize=(5.2 * len(solved), 3.8), dpi=110, squeeze=False)
    for ax, (env, methods) in zip(axes[0], solved.items()):
        for i, (method, cells) in enumerate(methods.items()):
            budgets = sorted(cells)
            # Methods often tie; a small shift along the log axis keeps each line in sight.
            shift = 1 + 0.04 * (i - (len(methods) - 1) / 2)
            ax.plot([b * shift for b in budgets], [cells[b] for b in budgets], marker="o", label=method)
        ax.set(xscale="log", xlabel="labels", ylabel=f"seeds solved (of {n_seeds})", title=env,
               ylim=(-0.3, n_seeds + 0.3))
        ax.set_xticks(sorted({b for cells in methods.values() for b in cells}), minor=False)
        ax.get_xaxis().set_major_formatter(matplotlib.ticker.ScalarFormatter())
        ax.minorticks_off()
        ax.grid(alpha=0.3)
    axes[0][-1].legend(fontsize=8, loc="lower right")
    fig.tight_layout()
    fig.savefig(path)
    plt.close(fig)
    print(f"wrote {path}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--envs", nargs="+", default=["cartpole"], choices=sorted(ENVS))
    parser.add_argument("--methods", nargs="+", default=list(METHODS), choices=ALL_METHODS)
    parser.add_argument("--best", nargs="*", default=["reward_trainer/label_filter=contradicted", *METHODS["+SURF"]],
                        help="the overrides of 'best'")
    parser.add_argument("--budgets", nargs="+", type=budget, default=["10", "25", "50", "100", "own"])
    parser.add_argument("--seeds", type=int, default=5)
    parser.add_argument("--teachers", nargs="*", default=list(TEACHERS), choices=list(TEACHERS))
    parser.add_argument("--teacher-budget", type=int, default=100)
    parser.add_argument("--teacher-methods", nargs="*", default=["plain", "+robustness"])
    parser.add_argument("--jobs", type=int, default=2, help="runs at once")
    parser.add_argument("--not-run", nargs="*", type=cell_name, default=[], metavar="METHOD@BUDGET",
                        help="cells to leave out, e.g. best@own")
    parser.add_argument("--root", type=Path, default=Path("outputs/bench_labels"))
    parser.add_argument("--out", type=Path, default=None, help="write the tables here (else print them)")
    parser.add_argument("--block", default="bench_labels", help="the marked block of --out to write")
    parser.add_argument("--plot", type=Path, default=None,
                        help="also draw the seeds solved by label budget, a panel an env, as this PNG")
    parser.add_argument("--keep", action="store_true",
                        help="keep the cells that the block of --out holds measured over --seeds seeds, as written")
    args = parser.parse_args()
    if args.keep and args.out is None:
        parser.error("--keep reads the block of --out: name the page")
    methods = {**METHODS, "best": args.best}
    kept = measured_cells(read_block(args.out, args.block), args.seeds) if args.keep else {}

    def overrides(method: str, labels: int, extra: list[str] = ()) -> list[str]:
        return [f"total_comparisons={labels}", *methods[method], *extra]

    def run(env: str, method: str, labels: int, extra: list[str] = (), tag: str = "") -> np.ndarray:
        folder = args.root / env / method.strip("+").replace(" ", "_") / f"{labels}{tag}"
        given = [f"experiment={ENVS[env].experiment}", *overrides(method, labels, extra), seeds(args.seeds)]
        return final(sweep(folder, given, args.jobs))

    headings = [SHARES[b].heading if b in SHARES else f"{b} labels ({int(b) / LABELS_A_MINUTE:.2g} person-min)"
                for b in args.budgets]
    header = " | ".join(headings)
    not_run = " --not-run " + " ".join(shlex.quote(f"{m}@{b}") for m, b in args.not_run) if args.not_run else ""
    plot = f" --plot {args.plot}" if args.plot is not None else ""
    best = f"; `best` is `{' '.join(args.best)}`" if "best" in args.methods else ""
    best_args = f" --best {' '.join(args.best)}" if "best" in args.methods else ""
    teachers = " ".join(map(shlex.quote, args.teachers))
    lines = [f"Final true return, mean ± 95% CI over {args.seeds} seeds (seeds solved), by method and label budget"
             f"{best}. "
             f"Written by `python scripts/bench_labels.py --envs {' '.join(args.envs)} --methods "
             f"{' '.join(map(shlex.quote, args.methods))}{best_args} --budgets {' '.join(args.budgets)} "
             f"--seeds {args.seeds}{not_run} --teachers{' ' * bool(teachers)}"
             f"{teachers}{plot}` on a 2-core CPU ({time.strftime('%Y-%m-%d')}).", "",
             f"| env | method | {header} | command |", "|---|---|" + "---:|" * len(args.budgets) + "---|"]
    solved: dict[str, dict[str, dict[int, int]]] = {env: {} for env in args.envs}
    for env in args.envs:
        task = ENVS[env]
        labels = [task.own_budget // SHARES[b].divisor if b in SHARES else int(b) for b in args.budgets]
        for method in args.methods:
            cells, ran = [], solved[env].setdefault(method, {})
            for b, n, heading in zip(args.budgets, labels, headings):
                if b in SHARES and str(n) in args.budgets:
                    cells.append(f"(the {n}-label column)")
                elif (env, method, heading) in kept:
                    cells.append(kept[(env, method, heading)])
                    ran[n] = solved_in(cells[-1])
                elif (method, b) in args.not_run:
                    cells.append("not run")
                else:
                    values = run(env, method, n)
                    ran[n] = solved_count(values, task.target)
                    cells.append(result(values, task.target) + (f", {n} labels" if b in SHARES else ""))
            every = "total_comparisons=" + ",".join(map(str, sorted(ran)))
            cmd = command(task.experiment, [every, *methods[method]], args.seeds)
            lines.append(f"| {env} | {method} | {' | '.join(cells)} | `{cmd}` |")
    if args.teachers:
        lines += ["", f"B-Pref's imperfect teachers at {args.teacher_budget} labels, same figures:", "",
                  f"| env | teacher | {' | '.join(args.teacher_methods)} | command |",
                  "|---|---|" + "---:|" * len(args.teacher_methods) + "---|"]
        for env in args.envs:
            for teacher, extra in TEACHERS.items():
                if teacher not in args.teachers:
                    continue
                cells, commands = [], []
                for method in args.teacher_methods:
                    if (env, teacher, method) in kept:
                        cells.append(kept[(env, teacher, method)])
                    else:
                        tag = "_" + extra[0].split(".", 1)[1].replace("=", "")
                        values = run(env, method, args.teacher_budget, extra, tag)
                        cells.append(result(values, ENVS[env].target))
                    cmd = command(ENVS[env].experiment, overrides(method, args.teacher_budget, extra), args.seeds)
                    commands.append(f"{method}: `{cmd}`")
                lines.append(f"| {env} | {teacher} | {' | '.join(cells)} | {'<br>'.join(commands)} |")
    text = "\n".join(lines)
    show(text, args.out, args.block)
    if args.plot is not None:
        plot_solved(solved, args.seeds, args.plot)


if __name__ == "__main__":
    main()
