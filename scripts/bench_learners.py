"""The learners: each agent option on one env's true reward at a budget of steps, against a baseline's wall time.

For each agent (``conf/agent/<name>.yaml``), its budget (``--steps``: one for every agent, or one each) and seed it
runs ``rlhp-train reward_learning=none env=gym env.id=<env> env.n_envs=1 agent=<name> total_timesteps=<steps> seed=N``
into its own folder under ``--root`` (a finished run is reused). ``--jobs N`` runs N at once, each on a core of its
own (its process pinned to it, so that a JAX agent's threads cannot take a neighbour's): runs compare fairly when
every run had one core and a neighbour. Each finished run is recorded in a ledger, ``docs/data/learner_runs.csv`` (a
run at a paper's budget takes an hour or more, and its folder may not outlive the machine), and the table comes from
the ledger alone: per env, agent and budget, steps/s of the agent's training phase, the final true return (mean and
95% Student-t interval, and per seed), the wall time, and both against the baseline agent's (``--baseline``, SB3's
SAC) largest budget on that env: the target of a faster learner is the baseline's return in a fraction of its wall
time.

    python scripts/bench_learners.py --env HalfCheetah-v5 --agents sac crossq --steps 300000 50000 --seeds 3 \\
        --jobs 2 --machine "2-core AMD EPYC VM, no GPU" --out docs/benchmarks.md
"""

from __future__ import annotations

import argparse
import datetime
import os
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from queue import Queue

import numpy as np
from bench_suite import finished_run, train
from docblock import add_run_options, show
from ledger import Row, merge_rows, read_rows, write_rows

from rlhp.report.folders import Run, find_runs
from rlhp.report.stats import mean_ci

AGENTS = ["sac", "sbx_sac", "tqc", "crossq"]
FIELDS = ["env", "agent", "overrides", "steps", "seed", "steps_per_s", "return", "wall_min", "machine", "date"]
KEY = ("env", "agent", "overrides", "steps", "seed")
LEDGER = Path(__file__).resolve().parents[1] / "docs" / "data" / "learner_runs.csv"


def run(folder: Path, env: str, agent: str, steps: int, seed: int, overrides: list[str], cpus: Queue) -> Run:
    """The finished run of ``agent`` on ``env`` at ``seed``, trained (on a core taken from ``cpus``) unless it
    already finished with these settings."""
    # One env: an off-policy learner's one gradient step per env step, as its published settings take it.
    command = ["reward_learning=none", "env=gym", f"env.id={env}", "env.n_envs=1", f"agent={agent}",
               f"total_timesteps={steps}", f"seed={seed}", "logger=none", f"hydra.run.dir={folder}", *overrides]
    done = finished_run(folder, command)
    if done is None:
        if folder.exists():
            raise SystemExit(f"{folder} holds an unfinished run: remove it")
        core = cpus.get()
        print(f"$ rlhp-train {' '.join(command)}  (core {core})", flush=True)
        try:
            train(command, cpus={core})
        finally:
            cpus.put(core)
        done = find_runs(folder)[0]
    return done


def speed(run: Run) -> float:
    """Agent steps per second of the agent's training phase over the run's second half: the first holds the
    steps before learning starts and a JAX agent's compiling."""
    half = len(run.rows) // 2
    later = run.rows[half:]
    return (later[-1]["timesteps"] - run.rows[half - 1]["timesteps"]) / sum(r["time_agent_training_s"] for r in later)


def record(env: str, agent: str, overrides: list[str], run: Run, machine: str) -> Row:
    """A finished run as a ledger row."""
    finished = datetime.date.fromtimestamp(run.folder.eval_json.stat().st_mtime)
    return {"env": env, "agent": agent, "overrides": " ".join(overrides), "steps": str(int(run.rows[-1]["timesteps"])),
            "seed": str(run.folder.config().seed), "steps_per_s": f"{speed(run):.1f}",
            "return": f"{run.evaluation['true_return_mean']:.1f}", "wall_min": f"{run.rows[-1]['wall_s'] / 60:.1f}",
            "machine": machine, "date": finished.isoformat()}


def table(ledger: list[Row], baseline: str) -> list[str]:
    """The Markdown table's rows: per env, agent (with its overrides) and budget; the last two columns set each
    against ``baseline``'s largest budget on the same env."""
    groups: dict[tuple[str, ...], list[Row]] = {}
    for r in sorted(ledger, key=lambda r: (r["env"], r["agent"] != baseline, r["agent"], r["overrides"],
                                           int(r["steps"]), int(r["seed"]))):
        groups.setdefault((r["env"], r["agent"], r["overrides"], r["steps"]), []).append(r)
    baselines = [k for k in groups if k[1] == baseline and not k[2]]  # its runs without overrides
    tops = {k[0]: max((b for b in baselines if b[0] == k[0]), key=lambda b: int(b[3])) for k in baselines}
    lines = []
    for (env, agent, overrides, steps), rows in groups.items():
        returns = np.array([float(r["return"]) for r in rows])
        wall = np.mean([float(r["wall_min"]) for r in rows])
        mean, half = mean_ci(returns)
        ci = f" ± {float(half):.1f}" if len(rows) > 1 else ""
        against = "—"
        if (top := tops.get(env)) and top != (env, agent, overrides, steps):
            base = groups[top]
            base_wall = np.mean([float(r["wall_min"]) for r in base])
            base_return = np.mean([float(r["return"]) for r in base])
            against = (f"{wall / base_wall:.2f}x the wall, {float(mean) - base_return:+.1f} return "
                       f"(at {int(top[3]):,}: {base_return:.1f})")
        name = f"`{agent}`" + (f" `{overrides}`" if overrides else "")
        lines.append(f"| {env} | {name} | {int(steps):,} | {', '.join(r['seed'] for r in rows)} | "
                     f"{np.mean([float(r['steps_per_s']) for r in rows]):,.0f} | {float(mean):.1f}{ci} | "
                     f"{', '.join(r['return'] for r in rows)} | {wall:.1f} | {against} |")
    return lines


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--env", default="HalfCheetah-v5")
    parser.add_argument("--agents", nargs="+", default=AGENTS)
    parser.add_argument("--steps", nargs="+", type=int, default=[20_000],
                        help="each agent's budget of env steps: one for all, or one per agent")
    parser.add_argument("--seeds", type=int, default=1)
    parser.add_argument("--jobs", type=int, default=1, help="runs at once, each on a core of its own")
    parser.add_argument("--baseline", default="sac", help="the agent whose largest budget the others are set against")
    parser.add_argument("--ledger", type=Path, default=LEDGER, help="the CSV of recorded runs")
    parser.add_argument("--machine", default=f"{os.cpu_count()}-core CPU, no GPU",
                        help="where the runs ran, recorded with each (default: this machine)")
    add_run_options(parser, "outputs/bench_learners", "bench_learners")
    args = parser.parse_args()
    if len(args.steps) not in (1, len(args.agents)):
        parser.error(f"--steps takes one budget or one per agent ({len(args.agents)}), not {len(args.steps)}")
    if not 1 <= args.jobs <= len(os.sched_getaffinity(0)):
        parser.error(f"--jobs must be 1 to the {len(os.sched_getaffinity(0))} cores this process may use, "
                     f"not {args.jobs}")
    budgets = dict(zip(args.agents, args.steps * len(args.agents) if len(args.steps) == 1 else args.steps))

    cpus: Queue = Queue()
    for core in sorted(os.sched_getaffinity(0))[:args.jobs]:
        cpus.put(core)
    jobs = [(agent, seed) for agent in args.agents for seed in range(args.seeds)]
    with ThreadPoolExecutor(args.jobs) as pool:
        runs = list(pool.map(lambda job: run(args.root / args.env / job[0] / str(budgets[job[0]]) / str(job[1]),
                                             args.env, job[0], budgets[job[0]], job[1], args.override, cpus), jobs))
    new = [record(args.env, agent, args.override, r, args.machine) for (agent, _), r in zip(jobs, runs)]
    ledger = merge_rows(read_rows(args.ledger, FIELDS, "learner runs"), new, KEY)
    write_rows(args.ledger, ledger, FIELDS, lambda r: tuple(r[k] for k in KEY[:3]) + (int(r["steps"]), int(r["seed"])))

    link = os.path.relpath(args.ledger, args.out.parent) if args.out else str(args.ledger)
    where = "; ".join(sorted({f"{r['machine']} ({r['date']})" for r in ledger}))
    text = (f"Written by `python scripts/bench_learners.py --env <env> --agents <agents> --steps <budgets> --seeds N "
            f"--jobs {args.jobs}` from the ledger of runs, [{link}]({link}); the runs ran on: {where}. Each agent "
            "option with its config's settings (and the overrides named) on the env's own reward "
            "(`reward_learning=none env=gym env.id=<env> env.n_envs=1`), one run a core beside another run; steps/s is "
            "the agent's training phase over the run's second half (the first holds the steps before learning starts "
            "and a JAX agent's compiling), return the final true return (eval.json: mean ± 95% CI over the seeds, "
            f"then per seed), wall the whole loop's, mean; the last column sets a budget's mean wall time and return "
            f"against `{args.baseline}`'s largest budget on the same env.\n\n"
            f"| env | agent | steps | seeds | steps/s | true return | per seed | wall min | vs `{args.baseline}` |\n"
            "|---|---|---:|---|---:|---:|---|---:|---|\n" + "\n".join(table(ledger, args.baseline)))
    show(text, args.out, args.block)


if __name__ == "__main__":
    main()
