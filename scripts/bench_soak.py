"""Long runs stay flat: memory, descriptors, threads and disk per round of two long ``rlhp-train`` runs.

1. CartPole for 3,000,000 timesteps in 200 rounds (synthetic labels);
2. a human run on CartPole whose 2,000 queries a scripted annotator answers over HTTP (the run's own
   labelling server, a second process, is measured too).

Each run is the real command in a subprocess; this script reads only ``/proc`` and the run folder. When a
round's row lands in ``metrics.csv`` it records the process's RSS, open file descriptors and threads, the
run folder's bytes (and of them the checkpoints', the chunk store's included) and the query store's size.
After round 10, RSS, descriptors and threads must not grow: the least-squares slope over the remaining
rounds, as a share of their mean, stays under 0.5% a round.

    python scripts/bench_soak.py [--root /tmp/soak] [--timesteps 3000000 --rounds 200 --queries 2000]
                                 [--out docs/runs.md]
"""

from __future__ import annotations

import argparse
import csv
import json
import os
import subprocess
import sys
import time
from dataclasses import astuple, dataclass, fields
from pathlib import Path

import numpy as np
from docblock import write_block

from rlhp.human.server.scripted import ScriptedAnnotator
from rlhp.runs import RunFolder

BIN = Path(sys.executable).parent
FLAT = 0.5
"""Largest growth a round, in % of the mean, that counts as flat."""
SETTLED = 10
"""Rounds before the slopes are taken (buffers and caches fill during the first ones)."""


@dataclass
class Sample:
    """One process's resources and the run folder's size when a round ended."""

    round: int
    rss_mib: float
    fds: int
    threads: int
    run_mib: float
    checkpoints_mib: float
    queries_mib: float


def process(pid: int) -> tuple[float, int, int]:
    """RSS in MiB, open descriptors and threads of a live process, from ``/proc``."""
    status = dict(line.split(":", 1) for line in Path(f"/proc/{pid}/status").read_text().splitlines())
    return (int(status["VmRSS"].split()[0]) / 1024, len(os.listdir(f"/proc/{pid}/fd")),
            int(status["Threads"]))


def mib(*paths: Path) -> float:
    """Bytes of the files under ``paths``, in MiB (what vanishes while counting, e.g. a checkpoint's
    temporary folder, is skipped)."""
    total = 0
    for path in paths:
        files = [str(path)] if path.is_file() else (os.path.join(d, f) for d, _, fs in os.walk(path) for f in fs)
        for file in files:
            try:
                total += os.stat(file).st_size
            except FileNotFoundError:
                continue
    return total / 2**20


def rounds_done(run: RunFolder) -> int:
    """Rows in ``metrics.csv`` (one per finished round)."""
    if not run.metrics_csv.is_file():
        return 0
    with run.metrics_csv.open() as f:
        return max(sum(1 for _ in f) - 1, 0)


def server_pid(run: RunFolder) -> int | None:
    """The labelling server's process, while it runs."""
    try:
        return json.loads(run.annotate_json.read_text())["pid"]
    except (FileNotFoundError, json.JSONDecodeError, KeyError):
        return None


def watch(command: list[str], run: RunFolder) -> dict[str, list[Sample]]:
    """Run ``command``; sample the trainer (and the labelling server, once up) at the end of every round."""
    log = run.path.parent / f"{run.path.name}.log"
    samples: dict[str, list[Sample]] = {"trainer": [], "server": []}
    print(f"$ {' '.join(command)}  (output: {log})", flush=True)
    with log.open("w") as out:
        proc = subprocess.Popen(command, stdout=out, stderr=subprocess.STDOUT)
        seen = 0
        while proc.poll() is None:
            done = rounds_done(run)
            if done > seen:
                seen = done
                disk = (mib(run.path), mib(run.checkpoints_dir, run.chunks_dir),
                        mib(*(p for p in run.path.glob("queries.sqlite*"))))
                for name, pid in (("trainer", proc.pid), ("server", server_pid(run))):
                    if pid is None:
                        continue
                    try:
                        samples[name].append(Sample(done, *process(pid), *disk))
                    except FileNotFoundError:  # it ended meanwhile
                        continue
                if not samples["trainer"]:
                    continue
                row = samples["trainer"][-1]
                print(f"  round {done:4d}: RSS {row.rss_mib:7.1f} MiB, {row.fds} fds, {row.threads} threads, "
                      f"run folder {row.run_mib:8.1f} MiB (checkpoints {row.checkpoints_mib:6.1f}), "
                      f"queries {row.queries_mib:6.1f} MiB", flush=True)
            time.sleep(0.2)
    if proc.returncode != 0:
        raise SystemExit(f"{command[0]} ended with exit {proc.returncode}; see {log}")
    return {name: rows for name, rows in samples.items() if rows}


def slope(rows: list[Sample], column: str) -> float:
    """Least-squares growth a round after :data:`SETTLED`, in % of the column's mean there."""
    later = [r for r in rows if r.round > SETTLED]
    x = np.array([r.round for r in later], float)
    y = np.array([getattr(r, column) for r in later], float)
    if len(later) < 2 or y.mean() == 0:
        return 0.0
    return float(np.polyfit(x, y, 1)[0] / y.mean() * 100)


def table(name: str, rows: list[Sample]) -> list[str]:
    """Markdown rows: first, settled and last round, the slopes, and whether each stayed flat."""
    picks = {rows[0].round, min(SETTLED, rows[-1].round), rows[-1].round}
    lines = [f"| {name}, round {r.round} | {r.rss_mib:.0f} | {r.fds} | {r.threads} | {r.run_mib:.1f} | "
             f"{r.checkpoints_mib:.1f} | {r.queries_mib:.1f} | |" for r in rows if r.round in picks]
    slopes = {c: slope(rows, c) for c in ("rss_mib", "fds", "threads", "run_mib", "checkpoints_mib", "queries_mib")}
    flat = all(abs(slopes[c]) < FLAT for c in ("rss_mib", "fds", "threads"))
    lines.append(f"| {name}, slope after round {SETTLED} (%/round) | "
                 + " | ".join(f"{v:+.3f}" for v in slopes.values()) + f" | {'flat' if flat else 'GROWS'} |")
    return lines


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--root", type=Path, default=Path("/tmp/soak"))
    parser.add_argument("--timesteps", type=int, default=3_000_000)
    parser.add_argument("--rounds", type=int, default=200)
    parser.add_argument("--comparisons", type=int, default=4_000, help="labels of the synthetic run")
    parser.add_argument("--queries", type=int, default=2_000, help="labels of the human run")
    parser.add_argument("--human-rounds", type=int, default=100)
    parser.add_argument("--human-timesteps", type=int, default=150_000)
    parser.add_argument("--out", type=Path, help="write the table into this page's bench_soak block")
    args = parser.parse_args()
    args.root.mkdir(parents=True, exist_ok=True)
    start = time.strftime("%Y-%m-%d")
    synthetic = RunFolder(args.root / "synthetic")
    human = RunFolder(args.root / "human")
    for run in (synthetic, human):
        if run.path.exists():
            raise SystemExit(f"{run.path} exists: remove it or give another --root")
    train = [str(BIN / "rlhp-train"), "logger=none"]
    synthetic_args = ["experiment=cartpole", f"total_timesteps={args.timesteps}", f"num_rounds={args.rounds}",
                      f"total_comparisons={args.comparisons}"]
    runs = {f"synthetic {k}": v for k, v in watch([*train, *synthetic_args, f"hydra.run.dir={synthetic.path}"],
                                                  synthetic).items()}
    human_args = ["env=cartpole", "gatherer=human", "gatherer.port=0", f"total_timesteps={args.human_timesteps}",
                  f"total_comparisons={args.queries}",
                  f"num_rounds={args.human_rounds}"]
    with ScriptedAnnotator(human.path, "soak") as annotator:
        runs |= {f"human {k}": v for k, v in watch([*train, *human_args, f"hydra.run.dir={human.path}"],
                                                   human).items()}
    print(f"the scripted annotator answered {annotator.answered} queries")
    for name, rows in runs.items():
        with (args.root / f"{name.replace(' ', '_')}.csv").open("w", newline="") as f:
            writer = csv.writer(f)
            writer.writerow([field.name for field in fields(Sample)])
            writer.writerows(astuple(r) for r in rows)
    lines = [f"Written by `python scripts/bench_soak.py --timesteps {args.timesteps} --rounds {args.rounds} "
             f"--comparisons {args.comparisons} --queries {args.queries} --human-rounds {args.human_rounds} "
             f"--human-timesteps {args.human_timesteps}` on a "
             f"{os.cpu_count()}-core CPU, no GPU ({start}); per-round samples in the CSV files of `--root`. Commands: "
             f"`rlhp-train {' '.join(train[1:] + synthetic_args)}` and `rlhp-train {' '.join(train[1:] + human_args)}` "
             f"with a scripted annotator ({annotator.answered} answers).", "",
             "| process | RSS MiB | fds | threads | run folder MiB | checkpoints MiB | queries MiB | RSS, fds, threads "
             "|",
             "|---|---:|---:|---:|---:|---:|---:|---|"]
    for name, rows in runs.items():
        lines += table(name, rows)
    text = "\n".join(lines)
    print(text)
    if args.out is not None:
        write_block(args.out, "bench_soak", text)


if __name__ == "__main__":
    main()
