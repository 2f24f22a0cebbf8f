"""The B-Pref experiments as the papers ran them: each composed config holds its cited values, and the CPU protocol
changes only what it lists, and lists what it changes."""

from pathlib import Path

import pytest
import yaml
from helpers import composed
from omegaconf import OmegaConf

from rlhp.experiment.protocols import CPU_CHANGES, PUBLISHED, SOURCES

CONF = Path(__file__).resolve().parents[1] / "rlhp" / "conf" / "experiment"


def leaves(cfg) -> dict:
    """Every leaf of a config by its dotted key (lists whole)."""
    out = {}

    def walk(node, prefix):
        for key, value in node.items():
            if isinstance(value, dict):
                walk(value, f"{prefix}{key}.")
            else:
                out[f"{prefix}{key}"] = value

    walk(OmegaConf.to_container(cfg, resolve=True), "")
    return out


@pytest.mark.parametrize("task", PUBLISHED)
def test_each_published_experiment_composes_the_cited_values(task):
    cfg = leaves(composed("train", [f"experiment=bpref/{task}"]))
    assert SOURCES[task]
    wrong = {key: (cfg.get(key), want) for key, want in PUBLISHED[task].items() if cfg.get(key) != pytest.approx(want)}
    assert not wrong, wrong
    assert cfg["protocol.name"] == "published" and cfg["protocol.changed"] == []


@pytest.mark.parametrize("task", PUBLISHED)
def test_the_cpu_protocol_changes_exactly_the_keys_it_records(task):
    published = leaves(composed("train", [f"experiment=bpref/{task}"]))
    cpu = leaves(composed("train", [f"experiment=bpref_cpu/{task}"]))
    changed = {key: cpu[key] for key in published.keys() | cpu.keys()
               if not key.startswith("protocol.") and published.get(key) != cpu.get(key)}
    assert changed == CPU_CHANGES[task]
    recorded = dict(entry.split("=", 1) for entry in cpu["protocol.changed"])
    assert cpu["protocol.name"] == "cpu"
    assert {key: yaml.safe_load(value) for key, value in recorded.items()} == changed


def test_every_cpu_experiment_is_a_published_one_cut_down():
    assert {p.stem for p in (CONF / "bpref_cpu").glob("*.yaml")} == set(CPU_CHANGES) == set(PUBLISHED)


def test_a_run_of_its_own_records_no_published_protocol():
    cfg = composed("train", ["experiment=pendulum"])
    assert cfg.protocol.name == "own" and list(cfg.protocol.changed) == []
