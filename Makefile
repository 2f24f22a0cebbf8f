# rlhp: `make train` and `make test` do all set-up on a fresh clone (they create .venv/).
VENV := .venv
PY := $(VENV)/bin/python
STAMP := $(VENV)/.installed

.DEFAULT_GOAL := help
.PHONY: help install browser egl train test lint bench clean

help:  ## list the targets
	@grep -E '^[a-z]+:.*## ' $(MAKEFILE_LIST) | awk -F':.*## ' '{printf "  make %-8s %s\n", $$1, $$2}'

$(STAMP): pyproject.toml
	test -x $(PY) || python3 -m venv $(VENV)
	# The CPU build of torch lies on local disk; any other torch pulls a multi-GB CUDA build.
	$(PY) -m pip install --quiet --disable-pip-version-check torch==2.13.0
	$(PY) -m pip install --quiet --disable-pip-version-check -e '.[test]'
	touch $(STAMP)

install: $(STAMP)  ## create .venv and install rlhp with its test extras (fast when done)

train: install  ## the CartPole demo: preference comparisons with synthetic labels
	$(VENV)/bin/rlhp-train env=cartpole gatherer=synthetic

# The browser tests drive Debian's chromium (Playwright cannot download its own here).
browser:  ## install chromium for the browser tests when missing
	@command -v chromium >/dev/null || (apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq chromium)

# MuJoCo draws clips for people headless, through EGL with Debian's Mesa (software rendering, no GPU needed).
egl:  ## install EGL and Mesa for MuJoCo's clips when missing
	@dpkg -s libegl1 libegl-mesa0 libgl1-mesa-dri >/dev/null 2>&1 || (apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq libegl1 libegl-mesa0 libgl1-mesa-dri)

test: install browser egl  ## run the test suite (slow end-to-end tests included)
	$(VENV)/bin/pytest -n 2 --dist worksteal -q --durations=10

lint: install  ## ruff
	$(VENV)/bin/ruff check rlhp tests scripts

bench: install  ## reward-model and dataset throughput, and a round of the loop, as tables
	$(PY) scripts/bench_reward.py
	$(PY) scripts/bench_data.py

clean:  ## remove the venv and run outputs
	rm -rf $(VENV) outputs multirun
