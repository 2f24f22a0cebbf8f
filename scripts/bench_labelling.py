"""Labelling speed: time from an answer to the next pair visible and playing, in a real browser.

Publishes queries with real clips into a scratch run folder, serves it with ``rlhp-annotate`` and answers
with the keyboard in headless chromium (Debian's, driven by Playwright), pausing as a person watching each
pair would. The page records, per answer, the ms until both new clips fire ``playing``. Target: p95 < 150
ms, so that a person can sustain >= 30 labels per minute.

``--env cartpole`` draws every clip when the queries are published. ``--env hopper`` records a random
policy's Hopper-v5 episodes with their physics states and publishes them undrawn: the querent's background
thread draws them (MuJoCo through EGL) a few ahead of the person, as in a run; ``--busy`` trains SAC on
Hopper in another process meanwhile, as the agent of a run would.

``--mode rank`` publishes the pairs' clips to be placed in a ranking (``querent.mode=rank``) instead: each answer
makes the clip's next comparison on the server, which the page leases once the answer is in. ``--mode rate``
publishes them to be rated alone (``querent.mode=rate``), answered with the number keys.

Also times the API alone (lease + answer round trips, one client) and the trainer's side (drawing and
encoding a query's two clips).

    python scripts/bench_labelling.py [--env cartpole|hopper] [--mode pairs|rank|rate] [--busy] [--answers 120]
        [--watch-ms 400] [--json]
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import httpx
import numpy as np
from omegaconf import OmegaConf
from playwright.sync_api import sync_playwright

from rlhp.agents.policies import random_policy
from rlhp.agents.rollout import rollout
from rlhp.data import FragmentPairs
from rlhp.envs import FIXED_HORIZON_CARTPOLE, GymEnv
from rlhp.human.querent import WebQuerent
from rlhp.loop.fragmenters import RandomFragmenter
from rlhp.runs import RunFolder

KEYS = {"pairs": ["ArrowLeft", "ArrowRight", "ArrowUp", "ArrowLeft", "ArrowRight"], "rate": ["3", "1", "5", "2", "4"]}
"""The keys pressed in turn: a choice between two clips (pairs and rank modes), or a rating."""


def cartpole_pairs(n: int, length: int = 20, seed: int = 0) -> FragmentPairs:
    """Fragments of a random CartPole policy (real states, so the clips show real motion)."""
    env = GymEnv(FIXED_HORIZON_CARTPOLE).make_single()
    rng = np.random.default_rng(seed)
    obs = np.zeros((n, 2, length + 1, 4), np.float32)
    acts = rng.integers(0, 2, (n, 2, length))
    for i in range(n):
        for side in range(2):
            obs[i, side, 0], _ = env.reset(seed=int(rng.integers(1 << 30)))
            for t in range(length):
                obs[i, side, t + 1] = env.step(int(acts[i, side, t]))[0]
    shape = (n, 2)
    return FragmentPairs(frames=obs, acts=acts, dones=np.zeros((*shape, length), bool),
                         rews=np.ones((*shape, length), np.float32), episode=np.full(shape, -1),
                         start=np.zeros(shape, np.int64), quality=np.full(shape, np.nan))


def hopper_pairs(n: int, length: int = 50, seed: int = 0) -> tuple[GymEnv, FragmentPairs]:
    """Fragments of a random Hopper-v5 policy, with the physics states their clips are drawn from."""
    env = GymEnv("Hopper-v5", n_envs=1, kwargs={"terminate_when_unhealthy": False})
    env.record_states()
    venv = env.make(seed)
    venv.action_space.seed(seed)
    episodes = rollout(venv, random_policy(venv.action_space), steps=2 * n * length)
    return env, RandomFragmenter(np.random.default_rng(seed))(episodes, length, n)


def percentiles(values: list[float]) -> dict[str, float]:
    return {"n": len(values), "p50": float(np.percentile(values, 50)), "p95": float(np.percentile(values, 95)),
            "max": float(np.max(values))}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--answers", type=int, default=120)
    parser.add_argument("--watch-ms", type=int, default=400, help="how long the 'person' watches each pair")
    parser.add_argument("--env", choices=["cartpole", "hopper"], default="cartpole")
    parser.add_argument("--mode", choices=["pairs", "rank", "rate"], default="pairs", help="the querent's mode")
    parser.add_argument("--busy", action="store_true", help="train SAC on Hopper in another process meanwhile")
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args()
    results: dict[str, dict[str, float]] = {}
    busy = None
    with tempfile.TemporaryDirectory() as tmp:
        queries = args.answers + 40  # the API timing below uses the extra ones
        if args.env == "hopper":
            env, pairs = hopper_pairs(queries)
        else:
            env, pairs = GymEnv(FIXED_HORIZON_CARTPOLE), cartpole_pairs(queries)
        run = RunFolder(tmp)
        run.write_record(OmegaConf.create({"env": {"id": env.id}}), [])  # a run folder to serve
        querent = WebQuerent(env, tmp, mode=args.mode)
        if args.busy:
            busy = subprocess.Popen([Path(sys.executable).parent / "rlhp-train", "env=gym", "env.id=Hopper-v5",
                                     "agent=sac", "reward_learning=none", "total_timesteps=10_000_000", "logger=none",
                                     f"hydra.run.dir={tmp}/busy"], stdout=subprocess.DEVNULL,
                                    stderr=subprocess.DEVNULL)
            time.sleep(15)  # past its start, into SAC's updates
        start = time.perf_counter()
        querent.renderer.write(pairs[:10], [(f"t{i}-l.mp4", f"t{i}-r.mp4") for i in range(10)], run.path / "timing")
        per_query = (time.perf_counter() - start) / 10 * 1000
        querent(pairs, 0)  # CartPole: drawn now; Hopper: drawn in the background, a few ahead of the person
        server = subprocess.Popen([sys.executable, "-m", "rlhp.human.server", tmp, "--port", "0"],
                                  stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        try:
            while not run.annotate_json.is_file():
                time.sleep(0.05)
            url = json.loads(run.annotate_json.read_text())["url"]
            if args.env == "cartpole":  # the API alone (every query drawn: none waits for its clips)
                with httpx.Client(base_url=url) as http:
                    trips = []
                    for _ in range(40):
                        t0 = time.perf_counter()
                        query = http.get("/api/next", params={"annotator": "api"}).json()["query"]
                        path, given = ("/api/ratings", {"rating": 3}) if query["scale"] else \
                            ("/api/answers", {"label": "left"})
                        http.post(path, json={"query_id": query["query_id"], "annotator": "api",
                                              **given}).raise_for_status()
                        trips.append((time.perf_counter() - t0) * 1000)
                results["API lease + answer, ms"] = percentiles(trips)
            with sync_playwright() as p:
                browser = p.chromium.launch(executable_path="/usr/bin/chromium", headless=True,
                                            args=["--no-sandbox", "--autoplay-policy=no-user-gesture-required"])
                page = browser.new_page(viewport={"width": 1000, "height": 560})
                page.goto(url + "?annotator=bench")
                page.wait_for_function("window.rlhp.shown !== null")
                begin = time.perf_counter()
                for i in range(args.answers):
                    page.wait_for_function(f"window.rlhp.timings.length >= {i}")
                    page.wait_for_timeout(args.watch_ms)
                    keys = KEYS["rate" if args.mode == "rate" else "pairs"]
                    page.keyboard.press(keys[i % len(keys)])
                page.wait_for_function(f"window.rlhp.sent.length >= {args.answers}")
                minutes = (time.perf_counter() - begin) / 60
                timings = page.evaluate("window.rlhp.timings")
                errors = page.evaluate("window.rlhp.errors")
                browser.close()
        finally:
            querent.drawing.stop()
            server.terminate()
            server.wait(10)
            if busy is not None:  # a scratch run: no clean stop (it would finish its round first)
                busy.kill()
                busy.wait()
    results["answer -> next pair playing, ms"] = percentiles(timings)
    if errors:
        raise SystemExit(f"the page reported errors: {errors[:3]}")
    if args.json:
        print(json.dumps({**results, "labels_per_minute": args.answers / minutes, "clip_ms_per_query": per_query},
                         indent=1))
        return
    print(f"{'measure':<40} {'n':>5} {'p50':>8} {'p95':>8} {'max':>8}")
    for name, r in results.items():
        print(f"{name:<40} {r['n']:>5} {r['p50']:>8.1f} {r['p95']:>8.1f} {r['max']:>8.1f}")
    beside = ", SAC training beside it" if args.busy else ""
    print(f"\n{args.env}, mode {args.mode}{beside}: drawing and encoding a query's two clips "
          f"takes {per_query:.0f} ms (mean of 10)")
    print(f"{args.answers} answers in {minutes * 60:.1f} s with {args.watch_ms} ms of watching each: "
          f"{args.answers / minutes:.0f} labels/min (target p95 < 150 ms, >= 30 labels/min)")


if __name__ == "__main__":
    main()
