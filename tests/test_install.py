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
