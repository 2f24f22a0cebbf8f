"""Trajectory dataset throughput: save and load, in transitions per second, and size on disk.

Two workloads from the issue: 1M CartPole transitions (2,000 episodes of 500 steps) and 50k
84x84x3 uint8 image transitions (100 episodes of 500). Two layouts: the run folder's
``save_to_disk`` (Arrow) and the Hub copy (Parquet + card, as ``rlhp-collect`` pushes it).

"load" is ``load_from_disk``/Parquet read plus the conversion to numpy trajectories; Arrow
files are memory-mapped, so "load+read" also touches every value once (a sum over obs).
Target: at least 1M CartPole transitions per second each way (Arrow).

    python scripts/bench_data.py [--repeats 3] [--json]
"""

from __future__ import annotations

import argparse
import json
import shutil
import tempfile
import time
from pathlib import Path

import datasets
import gymnasium as gym
import numpy as np

from rlhp.data import Trajectory
from rlhp.data.hf import dataset_metadata, save_trajectories, trajectories_to_dataset
from rlhp.data.hub import dataset_card, open_trajectories, stage_for_hub


def episodes(n: int, length: int, obs_shape: tuple[int, ...], dtype: str, seed: int = 0) -> list[Trajectory]:
    """``n`` random episodes with ``length`` steps (random data: nothing to compress)."""
    rng = np.random.default_rng(seed)
    make = ((lambda s: rng.integers(0, 256, s, dtype=np.uint8)) if dtype == "uint8"
            else (lambda s: rng.standard_normal(s, dtype=np.float32)))
    return [Trajectory(obs=make((length + 1, *obs_shape)), acts=rng.integers(0, 2, length),
                       rews=np.ones(length, np.float32), terminal=False, infos=[{}] * length) for _ in range(n)]


def size_mb(path: Path) -> float:
    """Bytes of every file under ``path``, in MB."""
    return sum(f.stat().st_size for f in path.rglob("*") if f.is_file()) / 1e6


def best(fn, repeats: int) -> tuple[float, object]:
    """Fastest of ``repeats`` calls, and the last result."""
    times, out = [], None
    for _ in range(repeats):
        start = time.perf_counter()
        out = fn()
        times.append(time.perf_counter() - start)
    return min(times), out


def touch(trajs: list[Trajectory]) -> float:
    """Read every observation value once."""
    return float(sum(t.obs.sum(dtype=np.float64) for t in trajs))


def bench(name: str, trajs: list[Trajectory], space: gym.Space, root: Path, repeats: int) -> list[dict]:
    """Save and load ``trajs`` in both layouts."""
    steps = sum(map(len, trajs))
    kwargs = {"observation_space": space, "action_space": gym.spaces.Discrete(2), "metadata": {"env_id": name}}
    arrow, hub = root / f"{name}-arrow", root / f"{name}-hub"

    def save_hub() -> Path:
        ds = trajectories_to_dataset(trajs, **kwargs)
        return stage_for_hub(ds, hub, dataset_card(dataset_metadata(ds)), None)

    rows = []
    for layout, save, path in (("arrow (save_to_disk)", lambda: save_trajectories(trajs, arrow, **kwargs), arrow),
                               ("parquet (Hub copy)", save_hub, hub)):
        save_s, _ = best(save, repeats)
        load_s, loaded = best(lambda p=path: open_trajectories(p)[0], repeats)
        read_s, _ = best(lambda p=path: touch(open_trajectories(p)[0]), repeats)
        assert len(loaded) == len(trajs) and np.array_equal(loaded[-1].obs, trajs[-1].obs)
        rows.append({"dataset": name, "layout": layout, "transitions": steps, "save_per_s": steps / save_s,
                     "load_per_s": steps / load_s, "load_read_per_s": steps / read_s, "size_mb": size_mb(path)})
        shutil.rmtree(path)
    return rows


def main() -> None:
    """Run both workloads and print a table (or JSON)."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--json", action="store_true", help="print the rows as JSON")
    args = parser.parse_args()
    datasets.disable_progress_bars()
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp)
        rows = bench("cartpole-1M", episodes(2000, 500, (4,), "float32"),
                     gym.spaces.Box(-np.inf, np.inf, (4,), np.float32), root, args.repeats)
        rows += bench("images-50k", episodes(100, 500, (84, 84, 3), "uint8"),
                      gym.spaces.Box(0, 255, (84, 84, 3), np.uint8), root, args.repeats)
    if args.json:
        print(json.dumps(rows, indent=2))
        return
    print(f"{'dataset':<12} {'layout':<21} {'transitions':>11} {'save/s':>10} {'load/s':>10} {'load+read/s':>12} "
          f"{'size MB':>9}")
    for r in rows:
        print(f"{r['dataset']:<12} {r['layout']:<21} {r['transitions']:>11,} {r['save_per_s']:>10.3g} "
              f"{r['load_per_s']:>10.3g} {r['load_read_per_s']:>12.3g} {r['size_mb']:>9.1f}")


if __name__ == "__main__":
    main()
