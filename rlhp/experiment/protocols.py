"""The B-Pref tasks' published protocols, value by value with their sources, and the CPU protocol's changes.

``experiment=bpref/<task>`` composes :data:`PUBLISHED` (a test composes each and compares); ``experiment=bpref_cpu/
<task>`` changes :data:`CPU_CHANGES` only, what one core cannot run within about three hours: the agent's width and
batch (the papers' SAC of 1,024 x 2 on batches of 1,024 runs about 2 steps a second on a core here, rlhp's 256 x 2
on batches of 256 about 50), and the steps of the tasks published at 1M. A run records its protocol in its first
console line and in ``eval.json`` (``protocol``: its name and the keys it changed).
"""

from __future__ import annotations

import timeit
from typing import Any

PPE = "PPE (NeurIPS 2025), Table 10 (the tasks' settings) and Table 12 (the SAC agent), as read for rlhp's issue 84"
QPA = "QPA (Hu et al., ICLR 2024), huxiao09/QPA: run_QPA.sh's line for the task and config/agent/sac.yaml"
BPREF = "B-Pref (Lee et al., NeurIPS 2021 Datasets and Benchmarks), rll-research/BPref's reward model and scripts"

_AGENT = {"agent.policy_kwargs.net_arch": [1024, 1024], "agent.batch_size": 1024}
"""The published SAC agent: two hidden layers of 1,024 units, batches of 1,024 (PPE Table 12; QPA's sac.yaml)."""
_REWARD = {"reward_net.output": "tanh", "reward_trainer.bootstrap": False, "reward_trainer.stop_accuracy": 0.97,
           "fragment_length": 50, "trajectories.unsupervised_steps": 9_000, "evaluation.episodes": 10}
"""B-Pref's reward training (nets ending in tanh, every member on every label, an update stopped at 97% training
accuracy), its 50-step segments, PEBBLE's 9,000 steps of pre-training and 10 evaluation episodes (BPREF)."""


def _task(steps: int, round_steps: int, labels: int, per_round: int, learning_rate: float) -> dict[str, Any]:
    """A task's protocol: ``steps`` agent steps in rounds of ``round_steps``, ``labels`` in batches of ``per_round``
    (one a round from the first until they are spent), SAC's ``learning_rate``."""
    return {"total_timesteps": steps, "num_rounds": steps // round_steps, "total_comparisons": labels,
            "initial_comparison_frac": per_round / labels, "query_schedule.rounds": labels // per_round - 1,
            "agent.learning_rate": learning_rate, **_AGENT, **_REWARD}


PUBLISHED: dict[str, dict[str, Any]] = {
    "walker_walk": _task(500_000, 20_000, 100, 10, 5e-4),
    "cheetah_run": _task(1_000_000, 20_000, 100, 10, 5e-4),
    "window_open": _task(500_000, 5_000, 400, 10, 1e-4),
    "door_open": _task(1_000_000, 5_000, 3_000, 30, 1e-4),
    "button_press": _task(1_000_000, 5_000, 2_000, 25, 1e-4),
}
"""Each task's published protocol by config key: steps, round length (as ``num_rounds``), labels in all and a round,
the agent and the reward training. Label totals are those of PPE's Table 1."""

SOURCES = {
    "walker_walk": f"{PPE}; {QPA} (the same values); {BPREF}",
    "cheetah_run": f"{PPE}; {QPA} (the same values); {BPREF}",
    "window_open": f"{PPE} (QPA's scripts have no window-open line); {BPREF}",
    "door_open": f"{PPE}; {QPA} (the same labels and steps; its Meta-World agent, 256 x 3 on batches of 512, is "
                 f"config/agent/sac_metaworld.yaml's, not Table 12's); {BPREF}",
    "button_press": f"{PPE} (QPA's scripts have no button-press line); {BPREF}",
}
"""Where each task's values come from; where two differ, PPE's wins (its Table 1 holds the figures rlhp quotes)."""

_CPU_AGENT = {"agent.policy_kwargs.net_arch": [256, 256], "agent.batch_size": 256}
CPU_CHANGES: dict[str, dict[str, Any]] = {
    "walker_walk": _CPU_AGENT,
    "cheetah_run": {**_CPU_AGENT, "total_timesteps": 500_000, "num_rounds": 25},
    "window_open": _CPU_AGENT,
    "door_open": {**_CPU_AGENT, "total_timesteps": 500_000, "num_rounds": 100},
    "button_press": {**_CPU_AGENT, "total_timesteps": 500_000, "num_rounds": 100},
}
"""What the CPU protocol changes, task by task: the agent's width and batch, and 1M steps cut to 500k (rounds keep
their length, and every label still comes: the last batch of labels comes at 200k steps on window-open, 400k on
button-press, 500k on door-open). At 256 x 2 a Meta-World run here took 95-110 minutes for 300k steps."""

STEPS_PER_SECOND = {1024: 2.0, 256: 50.0}
"""Agent steps a second of a B-Pref run on one core of a 2-core AMD EPYC VM, by the agent's batch (1,024: the
published 1,024 x 2 SAC, walker-walk's first round, 2,000 steps of which 1,000 trained, in 481 s; 256: the CPU
protocol's, 38-58 a second over the runs in docs/data/bpref_runs.csv), at :data:`REFERENCE_SPEED_MS`."""
REFERENCE_SPEED_MS = 12.4
"""``sum(range(10**6))`` on one core of that machine, in milliseconds (the test suite prints this machine's)."""


def expected_wall_time(steps: int, batch_size: int) -> str:
    """What a run of ``steps`` agent steps should take on one core of this machine, scaled from the measured rate."""
    rate = STEPS_PER_SECOND.get(batch_size)
    if rate is None:
        return f"no measured speed for an agent's batch of {batch_size}"
    here = min(timeit.repeat("sum(range(1_000_000))", number=1, repeat=3)) * 1e3
    minutes = steps / rate * here / REFERENCE_SPEED_MS / 60
    took = f"{minutes / 60:,.0f} hours" if minutes >= 90 else f"{max(minutes, 1):.0f} minutes"
    return f"expect about {took} on one core of this machine"
