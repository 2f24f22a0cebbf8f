"""Tier 3: the real ``train(cfg)`` in process, with the debug config (seconds)."""

import pytest
from helpers import composed

from rlhp.errors import ConfigError
from rlhp.experiment.launch import Launch
from rlhp.experiment.train import optimized_value, train
from rlhp.runs import RunFolder


def test_train_returns_the_final_evaluation_and_the_last_round_and_says_so(tmp_path):
    returned = train(composed("train", ["debug=fast", "logger=none"]), Launch(tmp_path))
    run = RunFolder(tmp_path)
    result = run.evaluation()
    value = optimized_value(returned)
    assert result["optimized_metric"] == {"name": "true_return_mean", "value": value}
    assert value == result["true_return_mean"]
    assert {k: v for k, v in returned.items() if k != "last_round"} == result
    rows = run.metrics()
    assert returned["last_round"] == pytest.approx(rows[-1])
    assert [r["iteration"] for r in rows] == [0, 1, 2] and rows[-1]["timesteps"] == 2048
    assert [p.name for p in run.checkpoints()] == ["iter_0000", "iter_0001", "iter_0002"]


def test_optimized_metric_may_name_a_round_metric_and_every_key_reaches_the_csv(tmp_path):
    value = optimized_value(train(composed("train", ["debug=fast", "logger=none", "env.max_episode_steps=null",
                                                     "reward_trainer.val_split=0.25", "optimized_metric=val_loss"]),
                                  Launch(tmp_path)))
    rows = RunFolder(tmp_path).metrics()
    assert value == pytest.approx(rows[-1]["val_loss"])
    for key in ("val_loss", "val_accuracy", "weight_decay", "gt_reward_accuracy", "label_entropy",
                "time_sample_s", "time_fragment_s", "time_gather_s", "time_reward_training_s",
                "time_agent_training_s", "true_return_mean"):
        assert key in rows[0], key
    # Round 0's agent finishes no episode of 500 steps in 683 steps: the column exists, its cell is blank.
    assert rows[0]["true_return_mean"] is None and rows[-1]["true_return_mean"] is not None


def test_the_optimized_metric_needs_no_callback(tmp_path):
    # The metric comes from the loop in memory, not from the file of the metrics_csv callback.
    returned = train(composed("train", ["debug=fast", "logger=none", "callbacks=[progress]",
                                        "optimized_metric=reward_loss"]), Launch(tmp_path))
    assert not (tmp_path / "metrics.csv").exists()
    loss = returned["last_round"]["reward_loss"]
    assert 0 < loss < 10 and optimized_value(returned) == loss
    assert RunFolder(tmp_path).evaluation()["optimized_metric"] == {"name": "reward_loss", "value": loss}


@pytest.mark.parametrize(("overrides", "message"), [
    (["optimized_metric=return"], "config key `optimized_metric` must be null or one of true_return_mean"),
    (["optimized_metric=val_loss"], "config key `optimized_metric` is val_loss, which needs a validation split"),
    (["optimized_metric=reward_accuracy", "reward_updates=new_labels"],
     "config key `optimized_metric` is reward_accuracy, a metric of the last round's reward update, and with "
     "reward_updates=new_labels the last round may have none"),
    (["reward_updates=never"], "config key `reward_updates` must be one of every_round, new_labels, got 'never'"),
])
def test_a_bad_optimized_metric_is_refused_before_training(tmp_path, overrides, message):
    with pytest.raises(ConfigError, match=message.replace("`", ".")):
        train(composed("train", ["debug=fast", "logger=none", *overrides]), Launch(tmp_path))
    assert not (tmp_path / "metrics.csv").exists()
