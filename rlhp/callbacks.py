"""What happens after each round besides learning: the progress bar, metrics.csv, checkpoints."""

from __future__ import annotations

import json
import logging

import torch
from tqdm.auto import tqdm

from rlhp.data import save_trajectories
from rlhp.loop import Metrics, PreferenceComparisons
from rlhp.runs import MetricsCSV, RunFolder

log = logging.getLogger(__name__)


class ProgressBar:
    """A tqdm bar over rounds showing timesteps, comparisons, reward accuracy and true return.

    The round's whole metrics go to the log file, not the console.
    """

    def __init__(self, total: int) -> None:
        self.bar = tqdm(total=total, desc="rounds", unit="round", dynamic_ncols=True)

    def __call__(self, loop: PreferenceComparisons, metrics: Metrics) -> None:
        """Advance one round."""
        shown = {"steps": metrics["timesteps"], "prefs": metrics["comparisons"]}
        for key, name, fmt in (("reward_accuracy", "acc", "{:.2f}"), ("true_return_mean", "return", "{:.1f}")):
            if key in metrics:
                shown[name] = fmt.format(metrics[key])
        self.bar.set_postfix(shown, refresh=False)
        self.bar.update()
        log.info("round %d: %s", metrics["iteration"], {k: round(v, 4) for k, v in metrics.items()})

    def close(self) -> None:
        """Close the bar."""
        self.bar.close()


class MetricsWriter:
    """Appends each round's metrics to ``metrics.csv`` (every key, see :class:`~rlhp.runs.MetricsCSV`)."""

    def __init__(self, run: RunFolder) -> None:
        self.csv = MetricsCSV(run.metrics_csv)

    def __call__(self, loop: PreferenceComparisons, metrics: Metrics) -> None:
        """Write the round's row."""
        self.csv.append(metrics)


class Checkpointer:
    """Saves the loop's state to ``checkpoints/iter_XXXX`` every ``every`` rounds (0: never),
    and the trajectories sampled so far to ``trajectories/``, so a crash loses at most a round.

    Args:
        run: the run folder.
        every: rounds between checkpoints; the last round is always saved.
        reward_net_config: the config that built the reward net, saved beside its weights.
        env_id: recorded in the trajectories' metadata.
    """

    def __init__(self, run: RunFolder, every: int, reward_net_config: dict, env_id: str) -> None:
        self.run, self.every, self.reward_net_config = run, every, reward_net_config
        self.metadata = {"env_id": env_id, "policy": {"name": "rlhp-train agent", "source": str(run.path)}}

    def __call__(self, loop: PreferenceComparisons, metrics: Metrics) -> None:
        """Save when due, and always after the last round."""
        if self.every and (loop.iteration % self.every == 0 or loop.iteration == loop.num_rounds - 1):
            self.save(loop, f"iter_{loop.iteration:04d}")

    def save(self, loop: PreferenceComparisons, name: str) -> None:
        """Write ``checkpoints/<name>`` (reward net, optimiser, agent, preferences, counters) and the trajectories."""
        path = self.run.checkpoint(name)
        path.mkdir(parents=True, exist_ok=True)
        state = loop.state_dict()
        trainer = state["reward_trainer"]
        torch.save({"state_dict": trainer["net"], "config": self.reward_net_config}, path / "reward_net.pt")
        torch.save({"optimizer": trainer["optimizer"], "torch_rng": torch.get_rng_state()}, path / "trainer.pt")
        if loop.source.agent is not None:
            loop.source.agent.save(path / "agent.zip")
        if len(loop.dataset):
            loop.dataset.save(path / "preferences")
        counters = {k: state[k] for k in ("iteration", "timesteps", "comparisons", "timestep_targets",
                                          "episode_lengths", "wall_s", "rng")}
        counters["next_query_id"] = state["querent"]["next_id"]
        (path / "state.json").write_text(json.dumps(counters, indent=1, default=int))
        if loop.trajectories:
            net = loop.reward_trainer.net
            save_trajectories(loop.trajectories, self.run.trajectories_dir, metadata=self.metadata,
                              observation_space=net.observation_space, action_space=net.action_space)
