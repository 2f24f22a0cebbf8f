"""``collect(cfg)``: an expert's demonstrations as a Hugging Face dataset, with a card and a preview video."""

from __future__ import annotations

import json
import logging
import time

import datasets
import numpy as np
import torch
from omegaconf import DictConfig
from stable_baselines3.common.utils import set_random_seed
from tqdm.auto import tqdm

from rlhp.agents.policies import mixed_policy
from rlhp.agents.rollout import rollout
from rlhp.data import Trajectory
from rlhp.data.hf import dataset_metadata, save_dataset, summary, trajectories_to_dataset
from rlhp.data.hub import PREVIEW, dataset_card, push_to_hub, stage_for_hub
from rlhp.data.minari import save_minari
from rlhp.demos.experts import Expert, Snapshot, TrainedExpert
from rlhp.envs import GymEnv
from rlhp.errors import ConfigError, RunError, Stopped
from rlhp.experiment.config import build, validate_collect
from rlhp.experiment.launch import Launch
from rlhp.experiment.stops import StopRequest
from rlhp.logs import CONSOLE
from rlhp.video import FrameRecorder, check_renders, write_video

log = logging.getLogger(__name__)


def quality_levels(snapshots: list[Snapshot], cfg: DictConfig) -> list[tuple[Snapshot, float]]:
    """(policy, epsilon) to collect from, worst first: checkpoints, noise levels, or just the expert."""
    if cfg.ranked.epsilons:
        return [(snapshots[-1], float(eps)) for eps in cfg.ranked.epsilons]
    return [(snap, float(cfg.epsilon)) for snap in snapshots]


def check_quality(stats: dict[str, float], gate: float | None) -> None:
    """The quality gate: refuse to save demonstrations whose mean true return (``stats`` as from
    :func:`~rlhp.data.hf.summary`) is below ``gate``."""
    if gate is not None and stats["return_mean"] < gate:
        raise RunError(f"quality gate: the expert's mean return over {stats['episodes']} episodes is "
                       f"{stats['return_mean']:.1f} ± {stats['return_std']:.1f}, below min_mean_return={gate}; "
                       "refusing to save. Train longer (expert.total_timesteps), try another seed, or lower "
                       "min_mean_return (null: no gate). The expert is kept in expert.zip")


def prepare(cfg: DictConfig) -> Expert:
    """The config checked and the expert built, before anything is trained, loaded or collected."""
    validate_collect(cfg)
    expert = build(cfg.expert)
    if cfg.replay.keep and not isinstance(expert, TrainedExpert):
        raise ConfigError("replay.keep", "keeps the replay of an expert trained here, and this expert is loaded: pick "
                          "a trained one (e.g. expert=sac_pendulum)")
    return expert


def collect(cfg: DictConfig, launch: Launch) -> dict:
    """Obtain the expert, collect from each quality level, gate, and write dataset, card and video."""
    start = time.perf_counter()
    expert = prepare(cfg)
    torch.set_num_threads(cfg.torch_threads)
    datasets.disable_progress_bars()
    set_random_seed(cfg.seed)
    run_dir = launch.run_dir
    env = expert.env
    if cfg.video.episodes > 0:
        check_renders(env.make_single(render_mode="rgb_array"), "video.episodes")
    log.info("rlhp-collect: expert=%s on %s, seed %d; run folder %s", launch.choices.get("expert"),
             env.id, cfg.seed, run_dir, extra=CONSOLE)
    with StopRequest("the current step") as stop:
        if cfg.replay.keep:
            return _collect_replay(cfg, launch, expert, start, stop)
        snapshots = expert.snapshots(run_dir, cfg.seed, list(cfg.ranked.checkpoints), stop=lambda: bool(stop))
        if stop:
            raise Stopped(f"{stop.signal.name} during the expert's training: the expert trained for "
                          f"{snapshots[-1].steps} steps is saved in {run_dir / 'expert.zip'} (collect from it with "
                          "expert=zip expert.path=...)", stop.signal)
        return _collect(cfg, launch, env, snapshots, start, stop)


def _collect(cfg: DictConfig, launch: Launch, env: GymEnv, snapshots: list[Snapshot], start: float,
             stop: StopRequest) -> dict:
    """Collect from each quality level, gate, and write dataset, card, video (and push)."""
    run_dir = launch.run_dir
    levels = quality_levels(snapshots, cfg)
    rng = np.random.default_rng(cfg.seed)

    per_level = cfg.episodes or cfg.timesteps
    bar = tqdm(total=per_level * len(levels), desc="collecting", unit="episode" if cfg.episodes else "step",
               dynamic_ncols=True)
    trajectories: list[Trajectory] = []
    columns: dict[str, list] = {"rank": [], "checkpoint": [], "epsilon": []}
    ranking, frames = [], []
    for rank, (snap, eps) in enumerate(levels):
        top = rank == len(levels) - 1
        got, filmed = _level(cfg, env, rank, snap, eps, top and cfg.video.episodes > 0, rng, bar)
        frames = filmed or frames
        stats = summary(got)
        ranking.append({"rank": rank, "checkpoint": snap.steps, "epsilon": eps, **stats})
        log.info("rank %d (checkpoint %d steps, epsilon %.2f): %d episodes, return %.1f ± %.1f", rank, snap.steps,
                 eps, stats["episodes"], stats["return_mean"], stats["return_std"])
        trajectories += got
        for name, value in (("rank", rank), ("checkpoint", snap.steps), ("epsilon", eps)):
            columns[name] += [value] * len(got)
        if stop:
            bar.close()
            raise Stopped(f"{stop.signal.name} while collecting: nothing was saved but the expert, in "
                          f"{run_dir / 'expert.zip'}", stop.signal)
    bar.close()
    expert_stats = stats  # the last level is the expert itself: the gate and the headline figures
    check_quality(expert_stats, cfg.min_mean_return)

    expert_snap = levels[-1][0]
    collection = {"deterministic": cfg.deterministic, "epsilon": cfg.epsilon, "episodes": cfg.episodes,
                  "timesteps": cfg.timesteps}
    ranked = len(levels) > 1
    extra = {"ranking": ranking} if ranked else {}
    return _save(cfg, launch, env, trajectories, expert_snap, collection, extra, columns if ranked else None,
                 frames, {**expert_stats, "levels": ranking if ranked else None}, start)


def _level(cfg: DictConfig, env: GymEnv, rank: int, snap: Snapshot, eps: float, record: bool,
           rng: np.random.Generator, bar: tqdm) -> tuple[list[Trajectory], list[np.ndarray]]:
    """One quality level's episodes, and the frames of its first ones where ``record`` (else none)."""
    venv = env.make(cfg.seed + 1000 * (rank + 1), n_envs=cfg.n_envs, **({"render_mode": "rgb_array"} if record else {}))
    if record:  # only the first copy renders; cap at its share so every filmed episode is saved
        share = -(-cfg.episodes // cfg.n_envs) if cfg.episodes else cfg.video.episodes
        venv.envs[0] = recorder = FrameRecorder(venv.envs[0], min(cfg.video.episodes, share))
    venv.action_space.seed(cfg.seed + rank)
    policy = mixed_policy(snap.policy(cfg.deterministic), venv.action_space, rng, random_prob=eps)
    got = rollout(venv, policy, steps=cfg.timesteps or 0, episodes=cfg.episodes or 0, frame_stack=env.frame_stack,
                  on_episode=lambda t: bar.update(1 if cfg.episodes else len(t)))
    venv.close()
    return got, recorder.frames if record else []


def _collect_replay(cfg: DictConfig, launch: Launch, expert: Expert, start: float, stop: StopRequest) -> dict:
    """The expert's whole training replay as the dataset (D4RL's medium-replay recipe)."""
    assert isinstance(expert, TrainedExpert)  # prepare() refused the others
    episodes, snap = expert.replay(launch.run_dir, cfg.seed, cfg.replay.stop_at_return, cfg.replay.window,
                                   stop=lambda: bool(stop))
    if stop:
        raise Stopped(f"{stop.signal.name} during the expert's training: nothing was saved but the expert, in "
                      f"{launch.run_dir / 'expert.zip'}", stop.signal)
    if not episodes:
        raise RunError(f"the expert finished no training episode in {snap.steps} steps: nothing to save; raise "
                       "expert.total_timesteps")
    stats = summary(episodes)
    last = summary(episodes[-cfg.replay.window:])
    log.info("replay: %d training episodes over %d steps, return %.1f ± %.1f (the last %d: %.1f)", stats["episodes"],
             snap.steps, stats["return_mean"], stats["return_std"], cfg.replay.window, last["return_mean"])
    collection = {"replay": True, "stop_at_return": cfg.replay.stop_at_return, "window": cfg.replay.window}
    return _save(cfg, launch, expert.env, episodes, snap, collection, {}, None, [],
                 {**stats, "final_window_return_mean": last["return_mean"]}, start)


def _save(cfg: DictConfig, launch: Launch, env: GymEnv, trajectories: list[Trajectory], expert: Snapshot,
          collection: dict, extra: dict, columns: dict[str, list] | None, frames: list, stats: dict,
          start: float) -> dict:
    """Write the dataset (and its Minari copy), card, video and ``collect.json``, and push; return the result."""
    run_dir = launch.run_dir
    meta = {
        "env_id": env.id,
        "policy": {"name": launch.choices.get("expert"), **expert.info, "training_steps": expert.steps},
        "collection": {"seed": cfg.seed, **collection, "overrides": list(launch.overrides)},
        **extra,
    }
    ds = trajectories_to_dataset(trajectories, *env.spaces(), metadata=meta, columns=columns)
    save_dataset(ds, run_dir / "dataset")
    video = write_video(frames, run_dir / PREVIEW, cfg.video.fps) if frames else None
    card = dataset_card(dataset_metadata(ds), cfg.push_to_hub.repo_id, PREVIEW if video else None)
    card.save(run_dir / "README.md")
    result = {**stats, "dataset": str(run_dir / "dataset"), "episodes_saved": len(trajectories),
              "wall_s": round(time.perf_counter() - start, 1)}
    if cfg.minari_id is not None:
        result["minari"] = str(save_minari(trajectories, cfg.minari_id, *env.spaces(), env.id,
                                           str(expert.info.get("algorithm", "")), card.text))
        log.info("wrote Minari dataset %s (%s)", cfg.minari_id, result["minari"], extra=CONSOLE)
    if cfg.push_to_hub.repo_id:
        staged = stage_for_hub(ds, run_dir / "hub", card, video)
        result["hub_url"] = push_to_hub(staged, cfg.push_to_hub.repo_id, cfg.push_to_hub.private)
        log.info("pushed to %s", result["hub_url"], extra=CONSOLE)
    (run_dir / "collect.json").write_text(json.dumps(result, indent=2))
    log.info("saved %d episodes to %s: return %.1f ± %.1f (%.1f s)", len(trajectories), run_dir / "dataset",
             result["return_mean"], result["return_std"], result["wall_s"], extra=CONSOLE)
    return result
