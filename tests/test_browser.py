"""The labelling page in a real browser: Debian's chromium driven by Playwright."""

from __future__ import annotations

import contextlib
import os
import shutil
import subprocess
from collections.abc import Iterator
from pathlib import Path

import numpy as np
import pytest
from helpers import BIN, random_pairs
from omegaconf import OmegaConf
from playwright.sync_api import Page, sync_playwright
from test_annotate import wait_for_url

from rlhp.agents.policies import random_policy
from rlhp.agents.rollout import rollout
from rlhp.data import FragmentPairs
from rlhp.envs import FIXED_HORIZON_CARTPOLE, GymEnv, MetaWorldEnv
from rlhp.envs.tasks import Backflip
from rlhp.human.gatherer import HumanGatherer
from rlhp.human.querent import WebQuerent
from rlhp.human.server.answers import AnswerStore
from rlhp.loop.fragmenters import RandomFragmenter
from rlhp.runs import RunFolder

CHROMIUM = "/usr/bin/chromium"
INSTRUCTIONS = "Prefer the clip where the pole stays **upright**."
SCREENSHOT = Path(__file__).parents[1] / "docs" / "img" / "labelling_page.png"


# Two videos, both past their start: `every` alone holds on an empty page, before the first query is shown.
BOTH_PLAYING = ("(() => { const v = [...document.querySelectorAll('.frame video')];"
                " return v.length === 2 && v.every((x) => x.currentTime > 0.1); })()")


def launch(playwright):
    """Headless chromium that plays video without a user gesture first."""
    return playwright.chromium.launch(executable_path=CHROMIUM, headless=True,
                                      args=["--no-sandbox", "--autoplay-policy=no-user-gesture-required"])


@contextlib.contextmanager
def serving(run_dir: Path, env: GymEnv, pairs: FragmentPairs, **querent) -> Iterator[str]:
    """``pairs`` published as queries (real clips) in a run folder, and ``rlhp-annotate`` serving it; its URL."""
    assert shutil.which("chromium"), "make test installs Debian's chromium (apt-get install chromium)"
    RunFolder(run_dir).write_record(OmegaConf.create({"env": {"id": env.id}}), [])
    WebQuerent(env, run_dir, **querent)(pairs, 0)
    server = subprocess.Popen([BIN / "rlhp-annotate", str(run_dir), "--port", "0"], stdout=subprocess.DEVNULL,
                              stderr=subprocess.DEVNULL)
    try:
        yield wait_for_url(run_dir)
    finally:
        server.terminate()
        server.wait(10)


@pytest.fixture
def served(tmp_path):
    """A run folder with four CartPole queries and ``rlhp-annotate`` serving it."""
    pairs = random_pairs(4, length=20, obs_dim=4)
    pairs.frames *= 0.2  # near upright, so the pole is on screen
    with serving(tmp_path, GymEnv(FIXED_HORIZON_CARTPOLE), pairs, instructions=INSTRUCTIONS) as url:
        yield tmp_path, url


@contextlib.contextmanager
def physics_clips_playing(tmp_path: Path, env: GymEnv, record: bool = True) -> Iterator[tuple[Page, list[list[float]]]]:
    """Two random 50-step fragments of ``env``, drawn from their recorded states (``record``) or, as a dataset's,
    from their observations alone, and served, both playing in a page; the page and each clip's width, height and
    duration."""
    if record:
        env.record_states()
    venv = env.make(seed=0)
    venv.action_space.seed(0)
    pairs = RandomFragmenter(np.random.default_rng(0))(rollout(venv, random_policy(venv.action_space), episodes=2),
                                                       50, 2)
    assert bool(pairs.states.shape[-1]) == record
    with serving(tmp_path, env, pairs) as url, sync_playwright() as p:
        browser = launch(p)
        page = browser.new_page(viewport={"width": 1000, "height": 700})
        page.goto(url + "?annotator=tester")
        page.wait_for_function(BOTH_PLAYING, timeout=10_000)
        yield page, page.evaluate("[...document.querySelectorAll('.frame video')].map((v) => [v.videoWidth, "
                                  "v.videoHeight, v.duration])")
        browser.close()


def test_people_teaching_a_hopper_a_backflip_see_its_clips_play_under_the_task_s_instructions(tmp_path):
    pytest.importorskip("mujoco")
    env = GymEnv("Hopper-v5", n_envs=1, max_episode_steps=60, kwargs={"terminate_when_unhealthy": False},
                 task=Backflip())
    with physics_clips_playing(tmp_path, env) as (page, sizes):
        assert all(w == 320 and h == 240 and d == pytest.approx(51 * 0.008, abs=0.05) for w, h, d in sizes), sizes
        assert "Teach a backflip." in page.locator("#instructions").inner_text()


def test_people_label_a_datasets_mujoco_clips_drawn_from_its_observations(tmp_path):
    pytest.importorskip("mujoco")
    env = GymEnv("Hopper-v5", n_envs=1, max_episode_steps=60, kwargs={"terminate_when_unhealthy": False})
    with physics_clips_playing(tmp_path, env, record=False) as (page, sizes):
        assert all(w == 320 and h == 240 and d == pytest.approx(51 * 0.008, abs=0.05) for w, h, d in sizes), sizes
        page.keyboard.press("ArrowRight")
        assert sent(page, 1)[0]["label"] == "right"


def test_people_labelling_a_metaworld_task_see_its_clips_drawn_from_the_recorded_states(tmp_path):
    pytest.importorskip("metaworld")
    with physics_clips_playing(tmp_path, MetaWorldEnv("door-open-v3", n_envs=1, max_episode_steps=60)) as (page,
                                                                                                       sizes):
        # 51 states a clip, every third drawn: Meta-World's 80 steps a second, near the clips' 25 frames a second.
        assert all(w == 320 and h == 240 and d == pytest.approx(18 / (80 / 3), abs=0.05) for w, h, d in sizes), sizes
        page.keyboard.press("ArrowLeft")  # a person's answer reaches the store
        assert sent(page, 1)[0]["label"] == "left"


def playing_times(page: Page) -> list[float]:
    return page.evaluate("[...document.querySelectorAll('.frame video')].map((v) => v.currentTime)")


def sent(page: Page, n: int) -> list[dict]:
    # Generous: with the whole suite on two cores, the page once took over 10 s to send an answer it had.
    page.wait_for_function(f"window.rlhp.sent.length >= {n}", timeout=30_000)
    return page.evaluate("window.rlhp.sent")


def test_the_page_plays_both_clips_takes_clicks_keys_and_undo_and_the_labels_reach_the_loop(served):
    run_dir, url = served
    with sync_playwright() as p:
        browser = launch(p)
        page = browser.new_page(viewport={"width": 1000, "height": 560})
        page.goto(url + "?annotator=tester")
        page.wait_for_function(BOTH_PLAYING,
                               timeout=10_000)
        before = playing_times(page)
        page.wait_for_timeout(300)
        after = playing_times(page)
        assert all(b != a for b, a in zip(before, after, strict=True)), (before, after)  # both play
        shown = page.locator("#instructions")
        assert shown.is_visible() and shown.inner_text() == "Prefer the clip where the pole stays upright."
        assert shown.locator("strong").inner_text() == "upright"
        if os.environ.get("RLHP_SCREENSHOT"):
            page.screenshot(path=str(SCREENSHOT))
        page.get_by_role("button", name="◀ Left").click()
        first = sent(page, 1)[0]
        page.keyboard.press("ArrowRight")
        second = sent(page, 2)[1]
        page.keyboard.press("Backspace")  # undo the right answer: its query comes back
        undone = sent(page, 3)[2]
        assert undone == {"query_id": second["query_id"], "label": "undo"}
        page.wait_for_function(f"window.rlhp.shown === {second['query_id']}")
        page.keyboard.press("ArrowDown")  # can't tell
        assert sent(page, 4)[3] == {"query_id": second["query_id"], "label": "cant_tell"}
        assert page.locator("#labelled").inner_text() == "2" and page.evaluate("window.rlhp.errors") == []
        browser.close()
    assert first["label"] == "left"
    answers = HumanGatherer(run_dir, serve=False, min_answered_frac=0.0)()
    labels = dict(zip(answers.ids.tolist(), answers.labels.tolist(), strict=True))
    assert labels[first["query_id"]] == 1.0 and np.isnan(labels[second["query_id"]])  # skipped: never trained on
    assert answers.annotators == ["tester", "tester"]


def test_the_team_view_shows_each_persons_gold_accuracy_and_tells_a_left_out_person(tmp_path):
    from rlhp.human.store import QueryStore

    pairs = random_pairs(4, length=20, obs_dim=4)
    pairs.frames *= 0.2
    with serving(tmp_path, GymEnv(FIXED_HORIZON_CARTPOLE), pairs, gold_rate=1.0, gold_labels=2) as url, \
            sync_playwright() as p:
        store = QueryStore(RunFolder(tmp_path).queries_db)
        desk = AnswerStore(store.path)
        returns = pairs.rews.sum(-1)
        for _ in range(4):  # mallory misreads the task: the lower true return each time
            query = desk.lease_next("mallory", 60)
            desk.answer(query.id, "mallory", "right" if returns[query.id, 0] > returns[query.id, 1] else "left")
        store.leave_out({"mallory": "right on 0% of 4 gold queries"})
        browser = launch(p)
        page = browser.new_page(viewport={"width": 1000, "height": 700})
        page.goto(url + "?annotator=tester")
        page.wait_for_function(BOTH_PLAYING, timeout=10_000)
        page.keyboard.press("ArrowLeft")
        page.keyboard.press("ArrowRight")
        sent(page, 2)
        page.locator("#team summary").click()
        want = store.team()["tester"]
        tester = (f"tester\t2\t{round(100 * want.gold_accuracy)}% of 2\t{round(100 * want.agreement)}% of 2\tyes")
        page.wait_for_function(f"[...document.querySelectorAll('#team-rows tr')].some((r) => r.innerText === "
                               f"{tester!r})", timeout=10_000)  # the view refreshes every 5 s
        rows = page.locator("#team-rows tr").all_inner_texts()
        assert "mallory\t4\t0% of 4\t" in rows[0] and rows[0].endswith("no: right on 0% of 4 gold queries")
        left_out = browser.new_page()
        left_out.goto(url + "?annotator=mallory")
        left_out.wait_for_function("document.getElementById('message').textContent.includes('no longer count')")
        assert left_out.evaluate("window.rlhp.shown") is None  # handed nothing more
        browser.close()


def test_a_person_places_clips_in_the_ranking_by_keys_undoes_one_and_a_reload_keeps_the_ranking(tmp_path):
    from rlhp.human.store import QueryStore

    pairs = random_pairs(3, length=20, obs_dim=4)
    pairs.frames *= 0.2
    with serving(tmp_path, GymEnv(FIXED_HORIZON_CARTPOLE), pairs, mode="rank") as url, sync_playwright() as p:
        store = QueryStore(RunFolder(tmp_path).queries_db)
        desk = AnswerStore(store.path)
        browser = launch(p)
        page = browser.new_page(viewport={"width": 1000, "height": 700})
        page.goto(url + "?annotator=tester")
        page.wait_for_function(BOTH_PLAYING, timeout=10_000)
        assert page.locator("#left-caption").inner_text() == "New clip"
        assert page.locator("#right-caption").inner_text() == "Ranked clip"
        page.keyboard.press("ArrowLeft")
        first = sent(page, 1)[0]
        page.wait_for_function(f"window.rlhp.shown !== null && window.rlhp.shown !== {first['query_id']}")
        page.keyboard.press("ArrowRight")
        second = sent(page, 2)[1]
        page.keyboard.press("Backspace")  # the comparison comes back, and what it led to is taken back
        assert sent(page, 3)[2] == {"query_id": second["query_id"], "label": "undo"}
        page.wait_for_function(f"window.rlhp.shown === {second['query_id']}")
        page.keyboard.press("ArrowUp")  # equal: it joins the ranked clip's group
        sent(page, 4)
        ranked = desk.status()["ranked_clips"]
        assert ranked == 3 and page.evaluate("window.rlhp.errors") == []
        page.reload()  # the ranking lives in the run folder: a reload shows it as it was
        page.wait_for_function(f"document.getElementById('ranked').textContent === '{ranked}'", timeout=10_000)
        assert page.locator("#ranking").is_visible() and page.locator("#labelled").inner_text() == "2"
        page.wait_for_function(BOTH_PLAYING, timeout=10_000)  # what it held before the reload is shown again
        browser.close()
    groups = desk.ranking()
    assert sum(map(len, groups)) == 3 and max(map(len, groups)) == 2  # the equal answer made one group of two


ONE_PLAYING = ("(() => { const v = [...document.querySelectorAll('.frame video')];"
               " return v.length === 1 && v[0].currentTime > 0.1; })()")


def test_a_person_rates_clips_by_number_keys_skips_one_and_undoes_a_rating(tmp_path):

    pairs = random_pairs(2, length=20, obs_dim=4)
    pairs.frames *= 0.2
    with serving(tmp_path, GymEnv(FIXED_HORIZON_CARTPOLE), pairs, mode="rate", scale=4) as url, \
            sync_playwright() as p:
        browser = launch(p)
        page = browser.new_page(viewport={"width": 1000, "height": 700})
        page.goto(url + "?annotator=tester")
        page.wait_for_function(ONE_PLAYING, timeout=10_000)  # one clip, alone
        assert page.locator("#right-figure").is_hidden() and page.locator("button.pair").first.is_hidden()
        assert page.locator("#ratings button").all_inner_texts() == ["1 1", "2 2", "3 3", "4 4"]
        assert page.locator("#left-caption").inner_text() == "Rate this clip from 1 to 4"
        page.keyboard.press("3")
        first = sent(page, 1)[0]
        page.keyboard.press("5")  # off the scale: nothing is sent
        page.keyboard.press("ArrowLeft")  # a choice between clips means nothing here
        page.get_by_role("button", name="2 2").click()
        second = sent(page, 2)[1]
        page.keyboard.press("Backspace")
        assert sent(page, 3)[2] == {"query_id": second["query_id"], "label": "undo"}
        page.wait_for_function(f"window.rlhp.shown === {second['query_id']}")
        page.keyboard.press("ArrowDown")  # can't tell
        assert sent(page, 4)[3] == {"query_id": second["query_id"], "label": "cant_tell"}
        assert page.evaluate("window.rlhp.errors") == [] and page.locator("#labelled").inner_text() == "2"
        browser.close()
    assert first["label"] == 3
    answers = HumanGatherer(tmp_path, serve=False, min_answered_frac=0.0)()
    rated = dict(zip(answers.ratings.ids.tolist(), answers.ratings.ratings.tolist(), strict=True))
    assert rated[first["query_id"]] == 3.0 and np.isnan(rated[second["query_id"]]) and len(answers) == 0
    assert AnswerStore(RunFolder(tmp_path).queries_db).status()["answers"] == 2
