"""A non-editable install runs from any folder: the configs travel inside the package (slow, run in CI)."""

import os
import subprocess
import sys
from pathlib import Path

import pytest

pytestmark = pytest.mark.slow
REPO = Path(__file__).resolve().parent.parent


def test_a_plain_install_finds_its_configs_from_another_folder(tmp_path):
    site, elsewhere = tmp_path / "site", tmp_path / "elsewhere"
    elsewhere.mkdir()
    # Build and install a wheel of the checkout (no dependencies: they are this venv's).
    subprocess.run([sys.executable, "-m", "pip", "install", "--quiet", "--no-deps", "--no-build-isolation",
                    "--target", str(site), str(REPO)], check=True, capture_output=True, text=True)
    assert (site / "rlhp" / "conf" / "train.yaml").is_file()
    assert (site / "rlhp" / "conf" / "hydra" / "job_logging" / "rlhp.yaml").is_file()
    env = {**os.environ, "PYTHONPATH": str(site), "WANDB_MODE": "offline"}

    def run(*args: str) -> subprocess.CompletedProcess:
        return subprocess.run([sys.executable, *args], cwd=elsewhere, env=env, capture_output=True, text=True,
                              timeout=600)

    where = run("-c", "import rlhp; print(rlhp.__file__)")
    assert where.stdout.strip() == str(site / "rlhp" / "__init__.py")
    train = run("-c", "from rlhp.experiment.cli import train_main; train_main()", "debug=fast", "logger=none")
    assert train.returncode == 0, train.stderr[-3000:]
    runs = list((elsewhere / "outputs" / "train").glob("*/*"))
    assert len(runs) == 1 and (runs[0] / "eval.json").is_file() and (runs[0] / "train.log").is_file()
    collect = run("-c", "from rlhp.experiment.cli import collect_main; collect_main()", "--help")
    assert collect.returncode == 0 and "expert: hub, ppo_cartpole, sac_pendulum, zip" in collect.stdout


def test_the_one_minute_offline_path_runs_from_a_plain_install(tmp_path):
    site, elsewhere = tmp_path / "site", tmp_path / "elsewhere"
    elsewhere.mkdir()
    subprocess.run([sys.executable, "-m", "pip", "install", "--quiet", "--no-deps", "--no-build-isolation",
                    "--target", str(site), str(REPO)], check=True, capture_output=True, text=True)
    # The replay it reads travels inside the package: no download, no dataset of one's own.
    assert list((site / "rlhp" / "data" / "samples" / "pendulum-medium-replay").glob("*.arrow"))
    env = {**os.environ, "PYTHONPATH": str(site), "WANDB_MODE": "offline"}
    train = subprocess.run([sys.executable, "-c", "from rlhp.experiment.cli import train_main; train_main()",
                            "experiment=offline/pendulum", "logger=none", "total_timesteps=64", "evaluation.episodes=1",
                            "agent.learner.hidden_units=[16]"], cwd=elsewhere, env=env, capture_output=True, text=True,
                           timeout=600)
    assert train.returncode == 0, train.stderr[-3000:]
    assert list((elsewhere / "outputs" / "train").glob("*/*/checkpoints/final/agent.npz"))


def test_the_offline_extra_needs_no_second_step():
    # Every requirement of rlhp[offline] is a plain one, and nothing installed here breaks a pin of another
    # (d3rlpy's gymnasium==1.0.0 once needed a second pip install without its pins).
    from importlib.metadata import requires

    offline = [r for r in requires("rlhp") if 'extra == "offline"' in r]
    assert offline and not any("d3rlpy" in r or "gym==" in r for r in offline)
    makefile = (REPO / "Makefile").read_text()
    assert "--no-deps" not in makefile
