"""What a round's checkpoint costs: bytes written and seconds, against the round's own time and, for an
off-policy agent, against its replay buffer's size; and the seconds a resume takes to read the last one back.

Three cases: ``experiment=cartpole`` (PPO), ``experiment=pendulum`` (SAC, 50k buffer) and the same SAC
with a 1,000,000-transition buffer filled to the brim before the first round (random transitions inside
the observation space; the relabelling and the checkpoint see a full buffer either way). Each runs its
first rounds as the loop does and saves a checkpoint after each, as the checkpoint callback does.

Usage: python scripts/bench_checkpoint.py [--rounds 4] [--cases cartpole pendulum sac_1m] [--json]
"""

from __future__ import annotations

import argparse
import json
import os
import tempfile
import time
from pathlib import Path

import numpy as np
import torch
from hydra import compose, initialize_config_module

from rlhp.experiment.callbacks import Checkpointer
from rlhp.experiment.checkpoints import RunRecord, load_checkpoint
from rlhp.experiment.compose import compose as compose_run
from rlhp.runs import RunFolder

CASES = {
    "cartpole": ["experiment=cartpole"],
    "pendulum": ["experiment=pendulum"],
    "sac_1m": ["experiment=pendulum", "agent.buffer_size=1000000"],
}


def files(*folders: Path) -> dict[str, tuple[int, int]]:
    """Every file under ``folders``: (size, modification time in ns)."""
    out = {}
    for root, _, names in (step for folder in folders for step in os.walk(folder)):
        for name in names:
            stat = os.stat(os.path.join(root, name))
            out[os.path.join(root, name)] = (stat.st_size, stat.st_mtime_ns)
    return out


def fill(buffer) -> int:
    """Fill a replay buffer to the brim with random transitions; return its arrays' bytes."""
    rng = np.random.default_rng(0)
    for name in ("observations", "next_observations", "actions"):
        array = getattr(buffer, name)
        array[:] = rng.uniform(-1, 1, array.shape).astype(array.dtype)
    buffer.dones[:] = rng.random(buffer.dones.shape) < 0.005
    buffer.timeouts[:] = buffer.dones
    buffer.full, buffer.pos = True, 0
    return sum(getattr(buffer, n).nbytes for n in ("observations", "next_observations", "actions", "rewards",
                                                    "dones", "timeouts"))


def measure(case: str, rounds: int) -> list[dict[str, float]]:
    """Per round: its seconds, and the checkpoint's seconds and bytes written (and the buffer's bytes)."""
    with initialize_config_module("rlhp.conf", version_base="1.3"):
        cfg = compose("train", overrides=["logger=none", *CASES[case]])
    with tempfile.TemporaryDirectory() as tmp:
        run = RunFolder(tmp)
        loop = compose_run(cfg, run.path)
        buffer = getattr(loop.agent.algorithm, "replay_buffer", None)
        buffer_bytes = fill(buffer) if case == "sac_1m" else None
        checkpointer = Checkpointer(run, RunRecord(cfg, CASES[case]), every=1, keep=cfg.keep_checkpoints)
        rows = []
        for _ in range(rounds):
            start = time.perf_counter()
            result = loop.round()
            round_s = time.perf_counter() - start
            before = files(run.checkpoints_dir, run.chunks_dir)
            start = time.perf_counter()
            checkpointer(loop, result)
            save_s = time.perf_counter() - start
            after = files(run.checkpoints_dir, run.chunks_dir)  # the checkpoints and their shared chunks
            written = sum(size for path, (size, mtime) in after.items() if before.get(path, (0, 0))[1] != mtime)
            rows.append({"round": result.iteration, "round_s": round_s, "checkpoint_s": save_s,
                         "written_bytes": written, "buffer_bytes": buffer_bytes})
        start = time.perf_counter()
        load_checkpoint(run.checkpoint(f"iter_{rows[-1]['round']:04d}"))  # what a resume reads and builds
        rows[-1]["resume_s"] = time.perf_counter() - start
        return rows


def main() -> None:
    """Print the table (or one JSON object with --json)."""
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--rounds", type=int, default=4, help="rounds per case (the first writes everything once)")
    parser.add_argument("--cases", nargs="+", default=list(CASES), choices=list(CASES))
    parser.add_argument("--json", action="store_true", help="print one JSON object")
    args = parser.parse_args()
    torch.set_num_threads(1)
    result = {case: measure(case, args.rounds) for case in args.cases}
    if args.json:
        print(json.dumps(result, indent=1))
        return
    print(f"checkpoint cost per round ({time.strftime('%Y-%m-%d')}); the first checkpoint writes everything once")
    print(f"{'case':<10}{'round':>6}{'round s':>10}{'ckpt s':>9}{'share':>8}{'written MB':>12}{'of buffer':>11}")
    for case, rows in result.items():
        for r in rows:
            share = r["checkpoint_s"] / r["round_s"]
            of_buffer = f"{r['written_bytes'] / r['buffer_bytes']:.1%}" if r["buffer_bytes"] else "-"
            print(f"{case:<10}{r['round']:>6}{r['round_s']:>10.2f}{r['checkpoint_s']:>9.3f}{share:>8.1%}"
                  f"{r['written_bytes'] / 1e6:>12.2f}{of_buffer:>11}")
        if rows[0]["buffer_bytes"]:
            print(f"{'':<10}{'':>6} replay buffer: {rows[0]['buffer_bytes'] / 1e6:.1f} MB")
        print(f"{'':<10}{'':>6} resume from the last checkpoint: {rows[-1]['resume_s']:.2f} s")


if __name__ == "__main__":
    main()
