"""The learners: each agent option on one env's true reward at a budget of steps, against a baseline's wall time.

For each agent (``conf/agent/<name>.yaml``), its budget (``--steps``: one for every agent, or one each) and seed it
runs ``rlhp-train reward_learning=none env=gym env.id=<env> env.n_envs=<copies> agent=<name>
total_timesteps=<steps> seed=N`` into its own folder under ``--root`` (a finished run is reused): one copy of the
env (``--n-envs``) for an off-policy learner, one gradient step per env step as its published settings take it; an
on-policy learner's rollout needs as many as its config's batch asks. ``--jobs N`` runs N at once, each on a core of its
own (its process pinned to it, so that a JAX agent's threads cannot take a neighbour's): runs compare fairly when
every run had one core and a neighbour. Each finished run is recorded in a ledger, ``docs/data/learner_runs.csv`` (a
run at a paper's budget takes an hour or more, and its folder may not outlive the machine), and the table comes from
the ledger alone: per env, agent and budget, steps/s of the agent's training phase, the final true return (mean and
95% Student-t interval, and per seed), the wall time, and both against the baseline agent's largest budget on that
env and number of copies (``--baseline``: the first of SB3's SAC and PPO with runs there): the target of a faster
learner is the baseline's return in a fraction of its wall time.

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
FIELDS = ["env", "n_envs", "agent", "overrides", "steps", "seed", "steps_per_s", "return", "wall_min", "machine",
          "date"]
KEY = ("env", "n_envs", "agent", "overrides", "steps", "seed")
LEDGER = Path(__file__).resolve().parents[1] / "docs" / "data" / "learner_runs.csv"


def run(folder: Path, env: str, n_envs: int, agent: str, steps: int, seed: int, overrides: list[str],
        cpus: Queue) -> Run:
    """The finished run of ``agent`` on ``n_envs`` copies of ``env`` at ``seed``, trained (on a core taken from
    ``cpus``) unless it already finished with these settings."""
    command = ["reward_learning=none", "env=gym", f"env.id={env}", f"env.n_envs={n_envs}", f"agent={agent}",
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


def record(env: str, n_envs: int, agent: str, overrides: list[str], run: Run, machine: str) -> Row:
    """A finished run as a ledger row."""
    finished = datetime.date.fromtimestamp(run.folder.eval_json.stat().st_mtime)
    return {"env": env, "n_envs": str(n_envs), "agent": agent, "overrides": " ".join(overrides),
            "steps": str(int(run.rows[-1]["timesteps"])),
            "seed": str(run.folder.config().seed), "steps_per_s": f"{speed(run):.1f}",
            "return": f"{run.evaluation['true_return_mean']:.1f}", "wall_min": f"{run.rows[-1]['wall_s'] / 60:.1f}",
            "machine": machine, "date": finished.isoformat()}


def table(ledger: list[Row], baselines: list[str]) -> list[str]:
    """The Markdown table's rows: per env and number of copies, agent (with its overrides) and budget; the last
    column sets each against the largest budget of the first of ``baselines`` with runs (without overrides) on the
    same env and copies."""
    def order(r: Row) -> tuple:
        rank = baselines.index(r["agent"]) if r["agent"] in baselines else len(baselines)
        return r["env"], int(r["n_envs"]), rank, r["agent"], r["overrides"], int(r["steps"]), int(r["seed"])
    groups: dict[tuple[str, ...], list[Row]] = {}
    for r in sorted(ledger, key=order):
        groups.setdefault((r["env"], r["n_envs"], r["agent"], r["overrides"], r["steps"]), []).append(r)
    tops: dict[tuple[str, str], tuple[str, ...]] = {}
    for agent in reversed(baselines):  # the first listed with runs on an env wins it
        runs = [k for k in groups if k[2] == agent and not k[3]]
        tops |= {k[:2]: max((b for b in runs if b[:2] == k[:2]), key=lambda b: int(b[4])) for k in runs}
    lines = []
    for (env, n_envs, agent, overrides, steps), rows in groups.items():
        returns = np.array([float(r["return"]) for r in rows])
        wall = np.mean([float(r["wall_min"]) for r in rows])
        mean, half = mean_ci(returns)
        ci = f" ± {float(half):.1f}" if len(rows) > 1 else ""
        against = "—"
        if (top := tops.get((env, n_envs))) and top != (env, n_envs, agent, overrides, steps):
            base = groups[top]
            base_wall = np.mean([float(r["wall_min"]) for r in base])
            base_return = np.mean([float(r["return"]) for r in base])
            against = (f"{wall / base_wall:.2f}x `{top[2]}`'s wall, {float(mean) - base_return:+.1f} return "
                       f"(at {int(top[4]):,}: {base_return:.1f})")
        name = f"`{agent}`" + (f" `{overrides}`" if overrides else "")
        lines.append(f"| {env} | {n_envs} | {name} | {int(steps):,} | {', '.join(r['seed'] for r in rows)} | "
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
    parser.add_argument("--n-envs", type=int, default=1,
                        help="copies of the env: 1 for an off-policy learner; an on-policy one's rollout needs more")
    parser.add_argument("--baseline", nargs="+", default=["sac", "ppo"],
                        help="the agents whose largest budget the others are set against: on each env, the first "
                             "with runs there")
    parser.add_argument("--ledger", type=Path, default=LEDGER, help="the CSV of recorded runs")
    parser.add_argument("--machine", default=f"{os.cpu_count()}-core CPU, no GPU",
                        help="where the runs ran, recorded with each (default: this machine)")
    add_run_options(parser, "outputs/bench_learners", "bench_learners")
    args = parser.parse_args()
    if len(args.steps) not in (1, len(args.agents)):
        parser.error(f"--steps takes one budget or one per agent ({len(args.agents)}), not {len(args.steps)}")
    if args.n_envs < 1:
        parser.error(f"--n-envs must be at least 1, not {args.n_envs}")
    if not 1 <= args.jobs <= len(os.sched_getaffinity(0)):
        parser.error(f"--jobs must be 1 to the {len(os.sched_getaffinity(0))} cores this process may use, "
                     f"not {args.jobs}")
    budgets = dict(zip(args.agents, args.steps * len(args.agents) if len(args.steps) == 1 else args.steps))

    cpus: Queue = Queue()
    for core in sorted(os.sched_getaffinity(0))[:args.jobs]:
        cpus.put(core)
    jobs = [(agent, seed) for agent in args.agents for seed in range(args.seeds)]
    with ThreadPoolExecutor(args.jobs) as pool:
        runs = list(pool.map(lambda job: run(args.root / args.env / f"{args.n_envs}-envs" / job[0]
                                             / str(budgets[job[0]]) / str(job[1]), args.env, args.n_envs, job[0],
                                             budgets[job[0]], job[1], args.override, cpus), jobs))
    new = [record(args.env, args.n_envs, agent, args.override, r, args.machine) for (agent, _), r in zip(jobs, runs)]
    ledger = merge_rows(read_rows(args.ledger, FIELDS, "learner runs"), new, KEY)
    write_rows(args.ledger, ledger, FIELDS, lambda r: (r["env"], int(r["n_envs"]), r["agent"], r["overrides"],
                                                       int(r["steps"]), int(r["seed"])))

    link = os.path.relpath(args.ledger, args.out.parent) if args.out else str(args.ledger)
    where = "; ".join(sorted({f"{r['machine']} ({r['date']})" for r in ledger}))
    text = (f"Written by `python scripts/bench_learners.py --env <env> --n-envs <copies> --agents <agents> --steps "
            f"<budgets> --seeds N --jobs {args.jobs}` from the ledger of runs, [{link}]({link}); the runs ran on: "
            f"{where}. Each agent option with its config's settings (and the overrides named) on the env's own reward "
            "(`reward_learning=none env=gym env.id=<env> env.n_envs=<copies>`), one run a core beside another run; "
            "steps/s is "
            "the agent's training phase over the run's second half (the first holds the steps before learning starts "
            "and a JAX agent's compiling), return the final true return (eval.json: mean ± 95% CI over the seeds, "
            "then per seed), wall the whole loop's, mean; the last column sets a budget's mean wall time and return "
            f"against the largest budget of the first of {', '.join(f'`{b}`' for b in args.baseline)} with runs on "
            "the same env and copies.\n\n"
            "| env | copies | agent | steps | seeds | steps/s | true return | per seed | wall min | vs baseline |\n"
            "|---|---:|---|---:|---|---:|---:|---|---:|---|\n" + "\n".join(table(ledger, args.baseline)))
    show(text, args.out, args.block)


if __name__ == "__main__":
    main()
