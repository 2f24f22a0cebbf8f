"""The benchmark: rlhp against the true-reward ceiling over seeds, and return per label budget.

For each experiment (``conf/experiment/<name>.yaml``) it runs three sweeps with ``rlhp-train -m``
(joblib, ``--jobs`` at a time), each into its own folder under ``--root``, and reuses a sweep whose
runs have all finished (a sweep cut short is refused: finish its missing runs, or remove its folder):

- ``main``: the experiment over ``--seeds`` seeds;
- ``ceiling``: the same with ``reward_learning=none`` (the same agent on the env's own reward);
- ``labels``: ``total_comparisons`` in ``--labels``, over ``--label-seeds`` seeds.

It then reads the run folders (never the training code) and writes a Markdown table of final true
returns (mean and 95% Student-t interval), the ceiling, labels, timesteps, wall time and its ratio to
the ceiling's, and a label-efficiency table, each with the command that made it. A run is solved at its
experiment's fixed target (CartPole 475, Pendulum -200); an experiment without one (MuJoCo's) is solved at
90% of the way from a random policy's return (its env, 100 episodes) to the ceiling's mean.

    python scripts/bench_suite.py --experiments cartpole pendulum --seeds 10 --out docs/benchmarks.md
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import time
from collections.abc import Collection
from pathlib import Path

import numpy as np
from docblock import show
from hydra.utils import instantiate

from rlhp.agents.policies import random_policy
from rlhp.agents.rollout import rollout
from rlhp.report.folders import Run, find_runs, overrides_by_key
from rlhp.report.stats import mean_ci

BIN = Path(sys.executable).parent
TARGETS = {"cartpole": 475.0, "pendulum": -200.0}
"""A run counts as solved at or above this final true return."""
FRACTION_OF_CEILING = 0.9
"""Elsewhere, at this fraction of the way from a random policy's return to the ceiling's."""


def random_return(run: Run, episodes: int = 100) -> float:
    """The mean true return of uniformly random actions on ``run``'s env (seeded apart from every run)."""
    env = instantiate(run.folder.config().env)
    venv = env.make(seed=10_000)
    venv.action_space.seed(10_000)
    return float(np.mean([t.rews.sum() for t in rollout(venv, random_policy(venv.action_space), episodes=episodes)]))


def target(name: str, runs: list[Run], ceiling: np.ndarray) -> tuple[float, str]:
    """The return at which a run of experiment ``name`` counts as solved, and how the table says it."""
    if name in TARGETS:
        return TARGETS[name], f"≥ {TARGETS[name]}"
    floor = random_return(runs[0])
    bar = floor + FRACTION_OF_CEILING * (ceiling.mean() - floor)
    return bar, f"≥ {bar:.1f}: {FRACTION_OF_CEILING:.0%} from random, {floor:.1f}, to the ceiling"



def finished_run(folder: Path, settings: list[str]) -> Run | None:
    """The finished run in ``folder``, to reuse in place of running ``settings`` again; none when it holds no
    finished run. Refused when the run there ran other settings, whose results would be read as these."""
    done = [r for r in find_runs(folder) if r.status == "finished"] if folder.is_dir() else []
    if done and done[0].overrides != overrides_by_key(settings):
        ran = " ".join(f"{key}={value}" for key, value in done[0].overrides.items())
        raise SystemExit(f"{folder} holds a run of other settings ({ran}); give another --root")
    return done[0] if done else None


def train(arguments: list[str], cpus: Collection[int] = ()) -> None:
    """``rlhp-train <arguments>``, its console quiet; a failed run ends the benchmark with rlhp-train's own exit
    status, its reason already on stderr (a stopped sweep: how to continue it, which is the benchmark again).
    ``cpus``: the cores the run may use (none named: all), so that runs side by side cannot take each other's, a
    JAX agent's thread pool included."""
    process = subprocess.Popen([str(BIN / "rlhp-train"), *arguments], stdout=subprocess.DEVNULL)
    if cpus:  # set from here, not in the child (preexec_fn is unsafe beside threads): the run's threads inherit it
        os.sched_setaffinity(process.pid, cpus)
    code = process.wait()
    if code:
        raise SystemExit(code)


def sweep(folder: Path, overrides: list[str], jobs: int) -> list[Run]:
    """The finished runs of ``rlhp-train -m <overrides>`` in ``folder``, running it unless all finished (a sweep
    stopped part-way continues: its finished runs are kept, its stopped ones resume)."""
    runs = find_runs(folder) if folder.is_dir() else []
    expected = np.prod([len(o.split("=", 1)[1].split(",")) for o in overrides if "," in o])
    if len(runs) < expected or any(r.status != "finished" for r in runs):
        command = ["-m", *overrides, "logger=none", "hydra/launcher=joblib", f"hydra.launcher.n_jobs={jobs}",
                   f"hydra.sweep.dir={folder}"]
        print(f"$ {BIN / 'rlhp-train'} {' '.join(command)}", flush=True)
        start = time.perf_counter()
        train(command)
        print(f"  {time.perf_counter() - start:.0f} s", flush=True)
        runs = find_runs(folder)
    return [r for r in runs if r.status == "finished"]


def final(runs: list[Run], key: str = "true_return_mean") -> np.ndarray:
    return np.array([r.evaluation[key] for r in runs], dtype=float)


def outcome(runs: list[Run]) -> str:
    """The final true return, and where the env reports success (Meta-World's) the success rate, in percent."""
    if not all("success_rate" in r.evaluation for r in runs):
        return cell(final(runs))
    return f"{cell(final(runs))}; success {cell(100 * final(runs, 'success_rate'), 0)}%"


def wall(runs: list[Run]) -> np.ndarray:
    return np.array([r.rows[-1]["wall_s"] for r in runs], dtype=float)


def reward_share(runs: list[Run]) -> np.ndarray:
    """Per run, reward training's share (%) of the loop's phase time (``time_*_s`` summed over rounds). A round
    whose update ran beside the agent (``reward_learning=asynchronous``) counts only what the agent waited for it."""
    def share(run: Run) -> float:
        def paid(row: dict) -> dict[str, float]:
            phases = {k: v or 0.0 for k, v in row.items() if k.startswith("time_")}
            if row.get("time_reward_wait_s") is not None:  # the update overlapped the agent's phase
                phases["time_reward_training_s"] = phases.pop("time_reward_wait_s")
            return phases
        rounds = [paid(row) for row in run.rows]
        return 100 * sum(r.get("time_reward_training_s", 0.0) for r in rounds) / sum(sum(r.values()) for r in rounds)
    return np.array([share(r) for r in runs])


def cell(values: np.ndarray, digits: int = 1) -> str:
    mean, half = mean_ci(values)
    return f"{mean:.{digits}f} ± {half:.{digits}f}" if np.isfinite(half) else f"{mean:.{digits}f}"


def seeds(n: int, first: int = 0) -> str:
    """The sweep override of ``n`` seeds from ``first`` on."""
    return "seed=" + ",".join(map(str, range(first, first + n)))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--experiments", nargs="+", default=["cartpole", "pendulum"])
    parser.add_argument("--seeds", type=int, default=10)
    parser.add_argument("--ceiling-seeds", type=int, default=None, help="seeds of the ceiling (default: --seeds)")
    parser.add_argument("--labels", nargs="+", type=int, default=[25, 50, 100, 200, 500])
    parser.add_argument("--label-seeds", type=int, default=5)
    parser.add_argument("--label-experiments", nargs="*", default=None,
                        help="experiments for the label-efficiency table (default: all of --experiments)")
    parser.add_argument("--jobs", type=int, default=2, help="runs at once")
    parser.add_argument("--root", type=Path, default=Path("outputs/bench"))
    parser.add_argument("--not-run", nargs="*",
                        default=["mountaincar", "halfcheetah", "hopper_1m", "walker2d", "pong", "enduro"],
                        help="experiments listed as not yet run (never guessed)")
    parser.add_argument("--out", type=Path, default=None, help="write the page here (else print it)")
    parser.add_argument("--block", default="bench_suite", help="the marked block of --out to write")
    parser.add_argument("--machine", default=f"{os.cpu_count()}-core CPU, no GPU",
                        help="where the runs ran, for the table's caption (default: this machine)")
    args = parser.parse_args()
    ceiling_seeds = args.ceiling_seeds or args.seeds
    main_rows, label_rows = [], []
    for name in args.experiments:
        base = [f"experiment={name}"]
        runs = sweep(args.root / name / "main", [*base, seeds(args.seeds)], args.jobs)
        ceiling = sweep(args.root / name / "ceiling",
                        [*base, "reward_learning=none", seeds(ceiling_seeds)], args.jobs)
        rows = runs[0].rows[-1]
        returns, shares = final(runs), reward_share(runs)
        bar, says = target(name, runs, final(ceiling))
        main_rows.append(
            f"| {name} | {outcome(runs)} | {int((returns >= bar).sum())}/{len(returns)} "
            f"({says}) | {outcome(ceiling)} | {int(rows['comparisons'])} | "
            f"{int(rows['timesteps']):,} | "
            f"{cell(wall(runs), 0)} | {np.mean(wall(runs)) / np.mean(wall(ceiling)):.2f}x | "
            f"{shares.mean():.1f}% ({shares.min():.1f}-{shares.max():.1f}) | "
            f"`rlhp-train -m experiment={name} {seeds(args.seeds)}` (ceiling: `reward_learning=none`) |")
        if args.label_experiments is not None and name not in args.label_experiments:
            continue
        budgets = ",".join(map(str, args.labels))
        by_budget = sweep(args.root / name / "labels", [*base, f"total_comparisons={budgets}",
                                                      seeds(args.label_seeds)], args.jobs)
        cells = [cell(final([r for r in by_budget if r.overrides["total_comparisons"] == str(n)]))
                 for n in args.labels]
        label_rows.append(f"| {name} | {' | '.join(cells)} | `rlhp-train -m experiment={name} "
                          f"total_comparisons={budgets} {seeds(args.label_seeds)}` |")
    labelled = args.experiments if args.label_experiments is None else args.label_experiments
    text = "\n".join([
        f"Written by `python scripts/bench_suite.py --experiments {' '.join(args.experiments)} --seeds {args.seeds} "
        f"--ceiling-seeds {ceiling_seeds} --label-seeds {args.label_seeds} "
        f"--label-experiments {' '.join(labelled)} "
        f"--jobs {args.jobs} "
        f"--labels {' '.join(map(str, args.labels))} --not-run {' '.join(args.not_run)} --root <runs> "
        f"--block {args.block}`; the runs ran on a {args.machine} ({time.strftime('%Y-%m-%d')}).", "",
        f"Final true return (and success rate where the env reports one), mean ± 95% CI (Student t) over "
        f"{args.seeds} seeds; the ceiling is the same agent "
        f"on the env's own reward (`reward_learning=none`, over {ceiling_seeds} seeds or all "
        "that a reused sweep holds); wall time is the training loop's (`wall_s`), and its ratio is to the "
        "ceiling's; reward training is its share of the loop's phase time (mean, and the range over runs).", "",
        "| experiment | true return | runs solved | ceiling | labels | timesteps | wall s | vs ceiling "
        "| reward training | command |",
        "|---|---:|---:|---:|---:|---:|---:|---:|---:|---|", *main_rows,
        *(f"| {name} | not yet run | | | | | | | | `rlhp-train -m experiment={name} {seeds(args.seeds)}` |"
          for name in args.not_run),
        *(["", f"Label efficiency: final true return, mean ± 95% CI over {args.label_seeds} seeds, by label budget.",
           "", f"| experiment | {' | '.join(f'{n} labels' for n in args.labels)} | command |",
           f"|---|{'---:|' * len(args.labels)}---|", *label_rows] if label_rows else [])])
    show(text, args.out, args.block)  # only the generated block of a page: the notes around it are kept


if __name__ == "__main__":
    main()
