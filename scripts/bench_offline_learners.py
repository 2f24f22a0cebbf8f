"""The offline learners' speed: gradient steps a second of rlhp's IQL and TD3+BC (JAX), and of TorchRL's IQL where
it is installed (the library alternative), on one core, with the papers' networks (256 x 256) and batch (256).

Each learner trains on a random table of Hopper's shapes (11-dimensional observations, 3-dimensional actions,
100,000 rows): the first call (which compiles) is timed apart, then ``--steps`` steps. The process runs on one core
(``os.sched_setaffinity``) with one thread for XLA and torch, as a run of ``rlhp-train`` on a shared machine does.

    python scripts/bench_offline_learners.py --steps 2000
"""

from __future__ import annotations

import argparse
import importlib.util
import os
import time

os.environ.setdefault("XLA_FLAGS", "--xla_cpu_multi_thread_eigen=false intra_op_parallelism_threads=1")
os.sched_setaffinity(0, {min(os.sched_getaffinity(0))})

import jax  # noqa: E402
import numpy as np  # noqa: E402
import torch  # noqa: E402

from rlhp.offline.iql import IQL  # noqa: E402
from rlhp.offline.learner import Batch  # noqa: E402
from rlhp.offline.td3bc import TD3PlusBC  # noqa: E402

OBS, ACT, ROWS, BATCH = 11, 3, 100_000, 256


def rlhp_learner(cls: type, steps: int) -> tuple[float, float]:
    """Seconds of the first (compiling) call of 500 steps, and steps a second after it."""
    rng = np.random.default_rng(0)
    data = Batch(*(jax.numpy.asarray(x) for x in (
        rng.standard_normal((ROWS, OBS), np.float32), rng.uniform(-1, 1, (ROWS, ACT)).astype(np.float32),
        rng.standard_normal(ROWS).astype(np.float32), rng.standard_normal((ROWS, OBS), np.float32),
        np.zeros(ROWS, np.float32))))
    learner = cls(OBS, ACT, 0)
    start = time.perf_counter()
    learner.update(data, rng.integers(0, ROWS, (500, BATCH)))
    jax.block_until_ready(learner.state)
    first = time.perf_counter() - start
    start = time.perf_counter()
    for _ in range(steps // 500):
        learner.update(data, rng.integers(0, ROWS, (500, BATCH)))
    jax.block_until_ready(learner.state)
    return first, (steps // 500) * 500 / (time.perf_counter() - start)


def torchrl_iql(steps: int) -> float:
    """Steps a second of TorchRL's ``IQLLoss`` with the same networks, batch and Adam."""
    from tensordict import TensorDict
    from tensordict.nn import NormalParamExtractor, TensorDictModule
    from torchrl.modules import MLP, ProbabilisticActor, TanhNormal, ValueOperator
    from torchrl.objectives import IQLLoss, SoftUpdate

    torch.set_num_threads(1)
    net = torch.nn.Sequential(MLP(in_features=OBS, out_features=2 * ACT, num_cells=[256, 256]), NormalParamExtractor())
    actor = ProbabilisticActor(TensorDictModule(net, ["observation"], ["loc", "scale"]), in_keys=["loc", "scale"],
                               distribution_class=TanhNormal)
    critic = ValueOperator(MLP(in_features=OBS + ACT, out_features=1, num_cells=[256, 256]),
                           in_keys=["observation", "action"], out_keys=["state_action_value"])
    value = ValueOperator(MLP(in_features=OBS, out_features=1, num_cells=[256, 256]), in_keys=["observation"])
    loss = IQLLoss(actor, critic, value, num_qvalue_nets=2, temperature=3.0, expectile=0.7)
    target, optimiser = SoftUpdate(loss, tau=0.005), torch.optim.Adam(loss.parameters(), 3e-4)

    def step() -> None:
        batch = TensorDict({"observation": torch.randn(BATCH, OBS), "action": torch.rand(BATCH, ACT) * 2 - 1,
                            "next": {"observation": torch.randn(BATCH, OBS), "reward": torch.randn(BATCH, 1),
                                     "done": torch.zeros(BATCH, 1, dtype=torch.bool),
                                     "terminated": torch.zeros(BATCH, 1, dtype=torch.bool)}}, [BATCH])
        losses = loss(batch)
        optimiser.zero_grad()
        (losses["loss_actor"] + losses["loss_qvalue"] + losses["loss_value"]).backward()
        optimiser.step()
        target.step()

    for _ in range(50):
        step()
    start = time.perf_counter()
    for _ in range(steps):
        step()
    return steps / (time.perf_counter() - start)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--steps", type=int, default=2000, help="timed gradient steps per learner")
    args = parser.parse_args()
    print("| learner | first call of 500 steps (compiles) | gradient steps/s, one core |\n|---|---|---|")
    for cls in (IQL, TD3PlusBC):
        first, rate = rlhp_learner(cls, args.steps)
        print(f"| rlhp {cls.__name__} (JAX) | {first:.1f} s | {rate:.0f} |")
    if importlib.util.find_spec("torchrl"):
        print(f"| TorchRL IQLLoss | - | {torchrl_iql(args.steps // 4):.0f} |")
    else:
        print("| TorchRL IQLLoss | not installed | - |")


if __name__ == "__main__":
    main()
