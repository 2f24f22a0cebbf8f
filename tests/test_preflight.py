"""A command line's keys and extras are checked against the config it composes, before any run folder exists."""

from __future__ import annotations

import subprocess
import sys

import pytest
from helpers import composed, run_cli
from omegaconf import OmegaConf

from rlhp.experiment import preflight
from rlhp.experiment.preflight import check_command_line
from rlhp.experiment.renamed import upgrade


def refusal(*argv: str, command: str = "train") -> str | None:
    error = check_command_line(list(argv), command, f"rlhp-{command}")
    return None if error is None else str(error)


@pytest.mark.parametrize(("argv", "message"), [
    # Hydra: "Key 'mistakes' is not in struct ... To append to your config use +gatherer.mistakes=0.1".
    (["gatherer.mistakes=0.1"], "config key `gatherer.mistakes` is not an option of SyntheticGatherer; did you mean "
                                "gatherer.mistake? its options are rng, temperature,"),
    (["+gatherer.mistakes=0.1"], "config key `gatherer.mistakes` is not an option of SyntheticGatherer; did you mean "
                                 "gatherer.mistake?"),
    (["seeds=3"], "config key `seeds` is not an option of rlhp-train; did you mean seed?"),
    (["+seeds=3"], "config key `seeds` is not an option of rlhp-train; did you mean seed?"),
    (["gatherr.mistake=0.1"], "config key `gatherr` is not an option of rlhp-train; did you mean gatherer?"),
    (["evaluation.episode=3"], "config key `evaluation.episode` is not an option of `evaluation`; did you mean "
                               "evaluation.episodes? its options are episodes, correlation_steps"),
    (["+evaluation.episode=3"], "config key `evaluation.episode` is not an option of `evaluation`;"),
    (["experiment=bpref/walker_walk", "agent.batch_sise=64"], "config key `agent.batch_sise` is not an option of "
                                                                "SAC; did you mean agent.batch_size?"),
    (["-m", "env=cartpole,gym", "env.id=Pendulum-v1", "agent.learning_rat=1e-3"],
     "config key `agent.learning_rat` is not an option of PPO; did you mean agent.learning_rate?"),
    (["+seed=3"], "config key `seed` is set already; drop the + (seed=...)"),
    (["agent.policy_kwargs.net_arch=[8]"], "config key `agent.policy_kwargs` is an option of PPO that this config "
                                           "leaves at its default; set it with +agent.policy_kwargs.net_arch=..."),
    (["agent.ent_coef=0.1,0.2"], "override `agent.ent_coef` is given several values (0.1,0.2): add -m to sweep"),
])
def test_a_key_that_does_not_exist_is_named_with_the_nearest(argv, message):
    assert refusal(*argv).startswith(message)


@pytest.mark.parametrize("argv", [
    ["gatherer.mistake=0.1", "seed=3", "+agent.policy_kwargs.net_arch=[8]", "+agent.sde_sample_freq=4"],
    ["agent=dqn", "agent.policy_kwargs.net_arch=[8]", "+agent.policy_kwargs.activation_fn=x"],
    ["-m", "seed=0,1", "agent.ent_coef=0.1,0.2", "hydra.sweep.dir=x"],
    ["experiment=bpref/walker_walk", "agent.batch_size=64", "+env.kwargs.foo=1", "~callbacks.checkpoint"],
    ["env=gym", "env.id=Pendulum-v1"],  # a key the option itself leaves missing (???)
])
def test_keys_that_exist_or_go_into_free_keyword_dicts_pass(argv):
    assert refusal(*argv) is None


def test_collect_and_bc_are_checked_against_their_own_config():
    assert refusal("episode=3", command="collect").startswith("config key `episode` is not an option of rlhp-collect")
    assert refusal("episodes=3", command="collect") is None
    assert refusal("pretrain.epoch=3", command="bc").startswith("config key `pretrain.epoch` is not an option")


@pytest.mark.parametrize(("argv", "missing", "message"), [
    (["experiment=bpref/walker_walk"], {"sbx"},
     "config key `agent` needs SBX's JAX agents, which comes with an extra: pip install 'rlhp[jax]'"),
    (["agent=iql", "trajectories=dataset", "trajectories.path=x"], {"flax"},
     "config key `agent` needs the offline learners (JAX), which comes with an extra: pip install 'rlhp[offline]'"),
    (["-m", "agent=ppo,crossq"], {"sbx"}, "config key `agent` needs SBX's JAX agents"),
    (["experiment=bpref/window_open"], {"metaworld"}, "config key `env` needs Meta-World's tasks, which comes with an "
                                                       "extra: pip install 'rlhp[metaworld]'"),
])
def test_a_part_an_experiment_picks_names_its_missing_extra(monkeypatch, argv, missing, message):
    monkeypatch.setattr(preflight, "_installed", lambda module: module.split(".")[0] not in missing)
    assert refusal(*argv).startswith(message)


def test_a_target_whose_module_needs_an_extra_names_it(monkeypatch):
    monkeypatch.setattr(preflight, "_installed", lambda module: module != "sbx")
    # SBX's SAC named by its _target_, under an option of no extra of its own.
    assert refusal("agent=sac", "agent._target_=sbx.SAC") == (
        "config key `agent._target_` is sbx.SAC, which comes with an extra: pip install 'rlhp[jax]'")


@pytest.mark.parametrize("argv", [["gatherer.mistakes=0.1"], ["+gatherer.mistakes=0.1"], ["+seeds=3"],
                                  ["-m", "seed=0,1", "reward_trainer.epoch=3"]])
def test_the_installed_command_answers_in_one_line_and_writes_nothing(tmp_path, argv):
    proc = run_cli("rlhp-train", *argv, "debug=fast", cwd=tmp_path, check=False)
    assert proc.returncode == 2, proc.stderr
    assert len(proc.stderr.strip().splitlines()) == 1 and proc.stderr.startswith("rlhp-train: config error: ")
    assert "HYDRA_FULL_ERROR" not in proc.stderr + proc.stdout
    assert not list(tmp_path.iterdir())


def test_an_experiment_missing_its_extra_is_refused_by_the_command_before_a_folder(tmp_path):
    code = ("import sys, rlhp.experiment.cli as cli, rlhp.experiment.preflight as p; "
            "p._installed = lambda m: m != 'sbx'; sys.argv = ['rlhp-train', 'experiment=bpref/walker_walk']; "
            "cli.train_main()")
    proc = subprocess.run([sys.executable, "-c", code], cwd=tmp_path, capture_output=True, text=True)
    assert proc.returncode == 2
    assert proc.stderr.strip() == ("rlhp-train: config error: config key `agent` needs SBX's JAX agents, which comes "
                                   "with an extra: pip install 'rlhp[jax]'")
    assert not list(tmp_path.iterdir())


def test_an_old_key_is_answered_with_its_new_name(tmp_path):
    proc = run_cli("rlhp-train", "num_iterations=5", "debug=fast", cwd=tmp_path, check=False)
    assert proc.returncode == 2 and not list(tmp_path.iterdir())
    assert proc.stderr.strip() == ("rlhp-train: config error: config key `num_iterations` is now num_rounds, the "
                                   "rounds in all with the first: num_iterations=N is num_rounds=N+1")


def test_a_run_recorded_under_an_old_key_reads_under_the_new():
    cfg = OmegaConf.create({"seed": 1, "num_iterations": 4})
    OmegaConf.set_struct(cfg, True)
    new, overrides = upgrade(cfg, ["seed=1", "num_iterations=4", "+num_iterations_note=x"])
    assert OmegaConf.to_container(new) == {"seed": 1, "num_rounds": 5} and OmegaConf.is_struct(new)
    assert overrides == ["seed=1", "num_rounds=5", "+num_iterations_note=x"]
    assert "num_iterations" in cfg  # the record read is left as it was
    same = OmegaConf.create({"seed": 1, "num_rounds": 5})
    assert upgrade(same, ["seed=1"]) == (same, ["seed=1"])


def test_a_method_that_needs_an_off_policy_agent_says_so():
    # It was "agent.replay_buffer_class is not an option of PPO", after the run folder was made.
    assert refusal("method=qpa") == ("config key `method` is qpa, which needs an off-policy agent (a replay buffer: "
                                     "agent=sac, td3, sbx_sac, tqc or crossq); agent=ppo is PPO, which has none "
                                     "(agent.replay_buffer_class)")
    assert refusal("method=qpa", "agent=sac") is None


def test_debug_fast_shortens_the_pretraining_of_the_experiments_that_have_one():
    for experiment, steps in [("bpref/walker_walk", 9000), ("bpref/window_open", 9000), ("halfcheetah", 9000),
                              ("hopper", 5000)]:
        assert composed("train", [f"experiment={experiment}"]).trajectories.unsupervised_steps == steps
        assert composed("train", [f"experiment={experiment}", "debug=fast"]).trajectories.unsupervised_steps == 500
    assert composed("train", ["debug=fast"]).trajectories.unsupervised_steps == 0


def test_keys_are_checked_against_the_class_the_line_gives():
    assert refusal("~fragmenter", "+fragmenter._target_=rlhp.loop.pools.RecentEpisodes", "+fragmenter.episode=3") \
        .startswith("config key `fragmenter.episode` is not an option of RecentEpisodes; did you mean "
                    "fragmenter.episodes?")
    assert refusal("~fragmenter", "+fragmenter._target_=rlhp.loop.pools.RecentEpisodes", "+fragmenter.episodes=3") \
        is None
    assert refusal("fragmenter._target_=nosuch.Selector", "fragmenter.share=2") == (
        "config key `fragmenter._target_` is nosuch.Selector, which cannot be imported (ModuleNotFoundError: No module "
        "named 'nosuch'); a module of one's own must be on PYTHONPATH or installed")
