"""On a GPU (skipped without one): the CNN reward model computes what it computes on the CPU, and a pixel run
with ``device=cuda`` trains, saves weights a CPU reads, and resumes after SIGKILL to the same result."""

import json
import signal
import subprocess
import sys

import hydra
import numpy as np
import pytest
import torch
from helpers import FAST, run_cli

from rlhp.envs import MinAtarEnv
from rlhp.rewards import CnnRewardNet

pytestmark = pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a GPU")

MINATAR = [*FAST, "experiment=minatar_breakout", "num_rounds=4", "device=cuda"]
KILL_AT_AGENT_TRAINING = """
import os, signal, sys
import rlhp.agents.agent as agent
original, calls, nth = agent.AgentTrainer.train, [], int(sys.argv[1])
def killer(*args, **kwargs):
    calls.append(1)
    if len(calls) == nth:
        os.kill(os.getpid(), signal.SIGKILL)
    return original(*args, **kwargs)
agent.AgentTrainer.train = killer
sys.argv = ["rlhp-train", *sys.argv[2:]]
from rlhp.experiment.cli import train_main
train_main()
"""


@torch.no_grad()
def rewards(net: CnnRewardNet, obs: np.ndarray, acts: np.ndarray) -> np.ndarray:
    """Each member's reward for transitions that stay on ``obs``, as numpy, from the net's device."""
    inputs = (torch.as_tensor(a, device=net.device) for a in (obs, acts, obs, np.zeros(len(obs), bool)))
    return net(*inputs).cpu().numpy()


@pytest.mark.parametrize("precision", ["float32", "bfloat16"])
def test_the_cnn_reward_on_the_gpu_is_the_one_on_the_cpu(precision):
    torch.manual_seed(0)
    obs_space, act_space = MinAtarEnv("Breakout", n_envs=1).spaces()
    cpu = CnnRewardNet(obs_space, act_space, members=3, use_action=True).eval()
    gpu = CnnRewardNet(obs_space, act_space, members=3, use_action=True, precision=precision).eval().to("cuda")
    gpu.load_state_dict(cpu.state_dict())
    rng = np.random.default_rng(0)
    obs = rng.integers(0, 2, (64, *obs_space.shape), dtype=np.uint8)
    acts = rng.integers(0, act_space.n, 64)
    want, got = rewards(cpu, obs, acts), rewards(gpu, obs, acts)
    # TF32 convolutions round to 10 bits of mantissa, bfloat16's to 7: close, not equal.
    tolerance = 1e-2 if precision == "float32" else 5e-2
    np.testing.assert_allclose(got, want, rtol=tolerance, atol=tolerance)
    assert got.dtype == np.float32
    assert not np.allclose(want, want[:, :1])  # the inputs differ, so must the rewards


def test_a_pixel_run_on_the_gpu_saves_cpu_weights_and_resumes_to_the_same_result(tmp_path):
    whole = tmp_path / "whole"
    run_cli("rlhp-train", *MINATAR, f"hydra.run.dir={whole}", cwd=tmp_path)
    # The GPU's weights make a CPU model: the net its config builds, on a machine without a GPU.
    saved = torch.load(whole / "checkpoints" / "final" / "reward_net.pt", map_location="cpu", weights_only=True)
    obs_space, act_space = MinAtarEnv("Breakout", n_envs=1).spaces()
    net = hydra.utils.instantiate(saved["config"], observation_space=obs_space, action_space=act_space)
    net.load_state_dict(saved["state_dict"])
    obs = np.random.default_rng(0).integers(0, 2, (8, *obs_space.shape), dtype=np.uint8)
    got = rewards(net.eval(), obs, np.arange(8) % act_space.n)
    assert np.isfinite(got).all() and not np.allclose(got, got[:, :1])
    run_dir = tmp_path / "run"
    killed = subprocess.run([sys.executable, "-c", KILL_AT_AGENT_TRAINING, "3", *MINATAR,
                             f"hydra.run.dir={run_dir}"], cwd=tmp_path, capture_output=True, text=True, timeout=600)
    assert killed.returncode == -signal.SIGKILL, killed.stderr[-2000:]
    run_cli("rlhp-train", *MINATAR, f"hydra.run.dir={run_dir}", cwd=tmp_path)
    assert json.loads((run_dir / "eval.json").read_text()) == json.loads((whole / "eval.json").read_text())
