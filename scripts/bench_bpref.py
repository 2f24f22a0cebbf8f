"""The field's online benchmark: B-Pref's tasks, rlhp's methods beside the published figures.

For each task in ``--tasks`` (``conf/experiment/bpref/<task>.yaml``) and method (``conf/method/<method>.yaml``) it
runs ``rlhp-train -m experiment=bpref/<task> method=<method>`` over ``--seeds`` seeds, and the same agent on the
task's own reward (``reward_learning=none``, the ceiling), each sweep into its own folder under ``--root`` (a
finished sweep is reused). ``--override`` settings go to every run, which are then recorded as ``<method>+<variant>``
(``--variant``), apart from the method as configured, and the variant's overrides beside the ledger; ``--methods
pebble+<variant>`` shows them as a column of the table. ``--steps N`` runs the protocol's first N agent steps, as a
full run would take them: its rounds keep their length and the rounds that gather labels stay the same
(``total_timesteps=N`` alone would keep the rounds' count and shorten each, so every label would come earlier, from a
younger agent); such a run is the full run's beginning, so ``rlhp-train resume=<run folder> total_timesteps=<the
protocol's> num_rounds=<its>`` carries it on to the full budget, and the benchmark again without ``--steps``
records it there. It reads the finished run folders (never the training code) into the ledger, a CSV of one row per
run (task, method, seed, steps, labels, final return and success rate, wall time, machine, date), kept in the
repository because a run at the protocol's budget takes hours and its folder may not outlive the machine it ran on: a
run recorded again replaces its row; its rounds (return and success rate against steps) go to a second CSV beside it,
for ``--plot``'s learning curves. The Markdown table comes from the ledger alone: per task, the published figures
(PEBBLE, SURF, RUNE, QPA, PPE), rlhp's per method and its ceiling (mean ± 95% CI over seeds at the largest budget
recorded: DMC's return, Meta-World's success rate in percent), the steps and the command; a cell with no run says
"not yet run", never a guess.

    python scripts/bench_bpref.py --tasks walker_walk --methods pebble qpa --seeds 3 --out docs/benchmarks.md \
        --plot docs/img/bpref_curves.png
"""

from __future__ import annotations

import argparse
import datetime
import os
from pathlib import Path

import matplotlib

matplotlib.use("Agg")  # files only, no display
import matplotlib.pyplot as plt  # noqa: E402
import numpy as np  # noqa: E402
from bench_suite import cell, seeds, sweep  # noqa: E402
from docblock import add_run_options, show  # noqa: E402
from hydra import compose, initialize_config_module  # noqa: E402
from hydra.errors import HydraException  # noqa: E402
from ledger import merge_rows, read_rows, write_rows  # noqa: E402
from omegaconf import DictConfig  # noqa: E402
from scipy import stats  # noqa: E402

from rlhp.experiment.protocols import PUBLISHED as PUBLISHED_PROTOCOL  # noqa: E402
from rlhp.report.folders import Run  # noqa: E402
from rlhp.report.stats import mean_ci  # noqa: E402

# PPE (NeurIPS 2025), Table 1: scripted teacher, 5 seeds, every method rerun in one setup; DMC: return at 500k
# steps (quadruped-walk, humanoid-stand: see their experiments), Meta-World (v2): success rate in percent.
PUBLISHED = {
    "walker_walk": (100, [453, 661, 415, 796, 908]),
    "cheetah_run": (100, [546, 557, 509, 579, 645]),
    "quadruped_walk": (1_000, [364, 554, 507, 622, 661]),
    "humanoid_stand": (10_000, [249, 307, 279, 454, 577]),
    "drawer_open": (4_000, [20, 40, 67, 40, 80]),
    "door_open": (3_000, [72, 91, 98, 100, 100]),
    "sweep_into": (10_000, [75, 58, 99.6, 81, 96]),
    "button_press": (2_000, [77, 79, 89, 72, 90]),
    "window_open": (400, [87, 87, 97, 90, 100]),
    "hammer": (10_000, [41, 85, 92, 79, 96]),
}
METHODS = ["PEBBLE", "SURF", "RUNE", "QPA", "PPE"]
PUBLISHED_SEEDS = 5
"""Seeds behind each published figure (PPE's Table 1)."""
PUBLISHED_STD: dict[tuple[str, str], float] = {}
"""The published figures' standard deviations, by (task, method), where recorded here: PPE's Table 1 prints them,
and none has been copied in yet. Where one is missing the verdict tests rlhp's seeds against the published mean alone
(one-sample t), and says so."""
# The tasks the benchmark's targets name: always in the table, run or not.
TARGETS = ["walker_walk", "cheetah_run", "window_open", "door_open", "button_press"]
CEILING = "ceiling"
FIELDS = ["task", "method", "protocol", "seed", "steps", "labels", "return", "success_rate", "wall_min", "machine",
          "date"]
EARLIER = "earlier"
"""The protocol of the runs recorded before the experiments followed the published one (B-Pref's label batches of
50, SBX's SAC 256 x 2 on batches of 256, 300k steps on Meta-World): rows whose eval.json names no protocol."""
PROTOCOLS = {"published": "bpref", "cpu": "bpref_cpu"}
"""Each protocol a run can be made in, by the experiment folder that holds it (rlhp/experiment/protocols.py)."""
MIN_SEEDS = 5
"""Fresh seeds a verdict needs."""
TUNING_FROM = 100
"""Seeds from this one on are tuning seeds (settings were chosen on them): shown apart, never in a mean beside a
published figure."""
TUNED = {("window_open", "pebble+labels20"): {"0"}, ("button_press", "pebble+labels60"): {"0"},
         ("button_press", "pebble+lr1e-4"): {"0"}}
"""Recorded runs below :data:`TUNING_FROM` on whose seed a variant was chosen (docs/tuning.md says which): tuning
seeds too."""
LEDGER = Path(__file__).resolve().parents[1] / "docs" / "data" / "bpref_runs.csv"
CURVE_FIELDS = ["task", "method", "protocol", "seed", "steps", "timesteps", "return", "success_rate"]
CURVES = "bpref_curves.csv"
"""The file of the runs' rounds, beside the ledger."""
VARIANTS = "bpref_variants.csv"
"""The file of each variant's overrides, beside the ledger: what a ``<method>+<variant>`` column ran."""
VARIANT_FIELDS = ["variant", "overrides"]
# The published methods drawn as lines on the curves: PEBBLE, which rlhp's runs reproduce, and QPA, the target's.
DRAWN = ["PEBBLE", "QPA"]


def first_steps(cfg: DictConfig, steps: int) -> list[str]:
    """Overrides that stop the run ``cfg`` composes after its first ``steps`` agent steps, as it would have taken
    them: rounds of the same length and, where labels come in the first rounds (``query_schedule.rounds``), the
    same rounds gathering the same labels (those of the rounds it runs, no more)."""
    round_steps = cfg.total_timesteps // cfg.num_rounds
    if steps % round_steps or not 2 * round_steps <= steps <= cfg.total_timesteps:
        raise SystemExit(f"--steps must be a multiple of the protocol's round, {round_steps:,} steps, from two "
                         f"rounds up to its {cfg.total_timesteps:,}; got {steps:,}")
    iterations = steps // round_steps - 1
    overrides = [f"total_timesteps={steps}", f"num_rounds={iterations + 1}"]
    labelled = cfg.query_schedule.get("rounds", 0)
    if iterations < labelled:  # B-Pref's batches are equal: round 0's labels, and the kept rounds' share of the rest
        initial = round(cfg.total_comparisons * cfg.initial_comparison_frac)
        total = initial + round((cfg.total_comparisons - initial) * iterations / labelled)
        overrides += [f"total_comparisons={total}", f"initial_comparison_frac={initial / total:.12g}"]
    return overrides


def protocol(experiment: str, overrides: list[str]) -> DictConfig:
    """The composed config of ``experiment=<experiment>`` (``bpref/<task>`` or ``bpref_cpu/<task>``) with
    ``overrides`` (a method's among them: its settings exist only once it is chosen); refused in a line where an
    override does not compose."""
    with initialize_config_module("rlhp.conf", version_base="1.3"):
        try:
            return compose("train", [f"experiment={experiment}", *overrides])
        except HydraException as error:
            raise SystemExit(f"experiment={experiment} {' '.join(overrides)}: {error}") from None


def ledger_name(method: str, variant: str) -> str:
    """The name a run of ``method`` is recorded under: ``<method>+<variant>`` for runs that ``--override`` changed,
    so that they never replace the rows of the method as its config stands."""
    return f"{method}+{variant}" if variant else method


def read_variants(path: Path) -> dict[str, str]:
    """Each recorded variant's overrides (space-separated), from the file ``VARIANTS`` at ``path``."""
    return {r["variant"]: r["overrides"] for r in read_ledger(path, VARIANT_FIELDS)}


def remember_variant(path: Path, variant: str, overrides: list[str]) -> None:
    """Record that ``variant`` names ``overrides``; refused when the name already stands for other overrides, whose
    runs would otherwise share rows and cells with these."""
    variants = read_variants(path)
    said = " ".join(overrides)
    if variants.get(variant, said) != said:
        raise SystemExit(f"variant {variant!r} was recorded with the overrides {variants[variant]!r} ({path}); these "
                         f"are {said!r}: name this change with another --variant")
    variants[variant] = said
    write_rows(path, [{"variant": v, "overrides": o} for v, o in variants.items()], VARIANT_FIELDS,
               lambda r: r["variant"])


def variant_lines(methods: list[str], variants: dict[str, str]) -> list[str]:
    """The caption's lines that say what each ``<method>+<variant>`` column of ``methods`` ran."""
    columns = [m.partition("+") for m in methods if "+" in m]
    missing = sorted({v for _, _, v in columns} - set(variants))
    if missing:
        raise SystemExit(f"no overrides are recorded for the variants {missing} ({VARIANTS} beside the ledger): "
                         "a column <method>+<variant> shows runs that bench_bpref.py --variant recorded")
    return [f"`rlhp {m}+{v}`: the command with `method={m} {variants[v]}`." for m, _, v in columns]


def record(task: str, method: str, run: Run, machine: str) -> dict[str, str]:
    """A finished run as a ledger row (``method`` is ``ceiling`` for the agent on the task's own reward)."""
    last = run.rows[-1]
    success = run.evaluation.get("success_rate")
    finished = datetime.date.fromtimestamp(run.folder.eval_json.stat().st_mtime)
    return {"task": task, "method": method, "protocol": run_protocol(run), "seed": str(run.folder.config().seed),
            "steps": str(int(last["timesteps"])), "labels": str(int(last.get("comparisons") or 0)),
            "return": f"{run.evaluation['true_return_mean']:.1f}",
            "success_rate": "" if success is None else f"{success:.3f}", "wall_min": f"{last['wall_s'] / 60:.1f}",
            "machine": machine, "date": finished.isoformat()}


def run_protocol(run: Run) -> str:
    """The protocol a run followed, as its eval.json records it (:data:`EARLIER` where it records none)."""
    return run.evaluation.get("protocol", {}).get("name", EARLIER)


def rounds(task: str, method: str, run: Run) -> list[dict[str, str]]:
    """A finished run's rounds as rows of the curves' file: steps so far, the training episodes' mean return and
    success rate (Meta-World's)."""
    seed, steps = str(run.folder.config().seed), str(int(run.rows[-1]["timesteps"]))
    return [{"task": task, "method": method, "protocol": run_protocol(run), "seed": seed, "steps": steps,
             "timesteps": str(int(r["timesteps"])),
             "return": f"{r['true_return_mean']:.1f}",
             "success_rate": "" if r.get("success_rate") is None else f"{r['success_rate']:.3f}"}
            for r in run.rows if r.get("true_return_mean") is not None]


def read_ledger(path: Path, fields: list[str] = FIELDS) -> list[dict[str, str]]:
    """The rows of the ledger (or, with ``CURVE_FIELDS`` or ``VARIANT_FIELDS``, of the curves' or variants' file); none
    when it does not exist yet."""
    return read_rows(path, fields, "B-Pref runs")


def write_ledger(path: Path, rows: list[dict[str, str]], fields: list[str] = FIELDS) -> None:
    """Write ``rows`` sorted by task, method, steps, seed (and round), so that the file's diffs show what changed."""
    write_rows(path, rows, fields, lambda r: (r["task"], r["method"], r["protocol"], int(r["steps"]),
                                              int(r["seed"]), int(r.get("timesteps", 0))))


def merge(ledger: list[dict[str, str]], new: list[dict[str, str]]) -> list[dict[str, str]]:
    """``ledger`` with ``new`` rows added; new rows replace the rows of the same task, method, protocol, seed and
    steps (a run's row, or all its rounds)."""
    return merge_rows(ledger, new, ("task", "method", "protocol", "seed", "steps"))


def largest_budget(rows: list[dict[str, str]]) -> tuple[int, list[dict[str, str]]]:
    """The largest budget (steps) among ``rows`` and the rows at it: what a cell and a curve read."""
    steps = max(int(r["steps"]) for r in rows)
    return steps, [r for r in rows if int(r["steps"]) == steps]


def fresh(rows: list[dict[str, str]]) -> list[dict[str, str]]:
    """The rows of fresh seeds (below :data:`TUNING_FROM`, and not in :data:`TUNED`): the only ones a figure beside a
    published one reads."""
    return [r for r in rows
            if int(r["seed"]) < TUNING_FROM and r["seed"] not in TUNED.get((r["task"], r["method"]), ())]


def values(rows: list[dict[str, str]]) -> np.ndarray:
    """Each run's figure: its success rate in percent where the env reports one (Meta-World), else its return."""
    if all(r["success_rate"] for r in rows):
        return 100 * np.array([float(r["success_rate"]) for r in rows])
    return np.array([float(r["return"]) for r in rows])


def score(rows: list[dict[str, str]], budget: int) -> str:
    """The cell of one task and method: at the largest budget recorded, the fresh seeds' mean success rate in
    percent (Meta-World) or mean return (DMC), with the runs' count, the steps when they fall short of ``budget``
    (the budget of the task's other cells), and how many tuning seeds are left out."""
    tuning = len(rows) - len(fresh(rows))
    rows = fresh(rows)
    if not rows:
        return "not yet run" + (f" (tuning seeds: {tuning})" if tuning else "")
    steps, at = largest_budget(rows)
    digits, unit = (0, "%") if all(r["success_rate"] for r in at) else (1, "")
    return (f"{cell(values(at), digits)}{unit} ({len(at)})" + (f" at {steps:,} steps" if steps != budget else "")
            + (f"; tuning seeds apart: {tuning}" if tuning else ""))


def verdict(rows: list[dict[str, str]], task: str, method: str) -> str:
    """rlhp's fresh seeds against the published figure of ``method`` (its base method, for a variant): Welch's t at
    95% against the published mean, deviation and seeds where the deviation is recorded, else a one-sample t against
    the published mean; above, within or below, or why there is none."""
    name = method.partition("+")[0].upper()
    if name not in METHODS or not rows:
        return ""
    kept = fresh(rows)
    at = values(largest_budget(kept)[1]) if kept else np.zeros(0)
    if len(at) < MIN_SEEDS:
        return f"none: {len(at)} of {MIN_SEEDS} fresh seeds"
    published = PUBLISHED[task][1][METHODS.index(name)]
    spread = PUBLISHED_STD.get((task, name))
    if spread is None:
        t, p = stats.ttest_1samp(at, published)
    else:
        t, p = stats.ttest_ind_from_stats(at.mean(), at.std(ddof=1), len(at), published, spread, PUBLISHED_SEEDS,
                                          equal_var=False)
    if not np.isfinite(p):  # every seed the same figure: only its difference from the published one is left
        t, p = at.mean() - published, 0.0 if at.mean() != published else 1.0
    word = "within" if p >= 0.05 else "above" if t > 0 else "below"
    return word if spread is not None else f"{word} (its mean; ± not recorded)"


def table(ledger: list[dict[str, str]], methods: list[str]) -> list[str]:
    """The Markdown table's rows, one per task and protocol: the target tasks and any other task in the ledger, in
    the published order; a target with no run gets the CPU protocol's row."""
    # The methods as configured; a variant's command is in the caption (only variants: their methods' runs).
    bases = ",".join([m for m in methods if "+" not in m] or dict.fromkeys(m.partition("+")[0] for m in methods))
    rows = []
    for task in [t for t in PUBLISHED if t in TARGETS or any(r["task"] == t for r in ledger)]:
        ran = [r for r in ledger if r["task"] == task]
        for name in sorted({r["protocol"] for r in ran} or {"cpu"}, key=[*PROTOCOLS, EARLIER].index):
            rows.append(protocol_row(task, name, [r for r in ran if r["protocol"] == name], methods, bases))
    return rows


def protocol_row(task: str, name: str, ran: list[dict[str, str]], methods: list[str], bases: str) -> str:
    """The table's row of one task's runs in protocol ``name``."""
    labels, published = PUBLISHED[task]
    cells = {m: [r for r in ran if r["method"] == m] for m in [*methods, CEILING]}
    # The budget the methods ran at (the ceiling's where none has run), which the steps column names.
    budget = max((int(r["steps"]) for m in methods for r in cells[m]), default=0) or max(
        (int(r["steps"]) for r in cells[CEILING]), default=0)
    most = max(MIN_SEEDS, *(len({r["seed"] for r in fresh(cells[m])}) for m in methods))
    # A task with a method not yet run gets the command that runs it where it fits: on a cluster.
    cluster = " hydra/launcher=slurm" if not all(cells[m] for m in methods) else ""
    folder = PROTOCOLS.get(name, "bpref_cpu")
    ours = " | ".join(f"{score(cells[m], budget)} | {verdict(cells[m], task, m)}" for m in methods)
    return (f"| {task} | {name} | {labels:,} | {' | '.join(map(str, published))} | {ours} | "
            f"{score(cells[CEILING], budget)} | {f'{budget:,}' if budget else ''} | "
            f"`rlhp-train -m experiment={folder}/{task} method={bases} {seeds(most)}{cluster}` |")


def value(row: dict[str, str], success: bool) -> float:
    """A round's point: its success rate in percent (NaN where no episode ended) or its return."""
    if not success:
        return float(row["return"])
    return 100 * float(row["success_rate"]) if row["success_rate"] else np.nan


def plot(curves: list[dict[str, str]], methods: list[str], path: Path) -> dict[str, dict[str, np.ndarray]]:
    """Draw learning curves into ``path``, a panel a task that has any: per method and the ceiling, at the largest
    budget recorded, the mean over seeds with its 95% band (DMC's return, Meta-World's success rate in percent),
    a line per protocol, and the published final figures of ``DRAWN`` as points at the step they were measured.
    Returns each panel's means, by line."""
    tasks = [t for t in PUBLISHED if any(r["task"] == t for r in curves)]
    fig, axes = plt.subplots(1, len(tasks), figsize=(4.6 * len(tasks), 3.6), dpi=110, squeeze=False)
    drawn = {}
    # One colour a line on every panel: a method missing from a panel would shift the cycle's colours there.
    colours = dict(zip([*methods, CEILING], plt.rcParams["axes.prop_cycle"].by_key()["color"], strict=False))
    for ax, task in zip(axes[0], tasks):
        success = any(r["success_rate"] for r in curves if r["task"] == task)
        drawn[task] = {}
        for method in [*methods, CEILING]:
            ran = [r for r in curves if r["task"] == task and r["method"] == method]
            for name in sorted({r["protocol"] for r in ran}):
                rows = [r for r in ran if r["protocol"] == name]
                by_seed = {}
                for r in largest_budget(rows)[1]:
                    by_seed.setdefault(r["seed"], []).append(r)
                n = min(map(len, by_seed.values()))  # seeds at one budget share their rounds' steps
                x = np.array([[int(r["timesteps"]) for r in seed[:n]] for seed in by_seed.values()]).mean(0)
                mean, half = mean_ci(np.array([[value(r, success) for r in seed[:n]] for seed in by_seed.values()]))
                label = f"rlhp {method}, {name} ({len(by_seed)})"
                line, = ax.plot(x, mean, label=label, color=colours[method],
                                linestyle="-" if name != EARLIER else "--")
                if len(by_seed) > 1:
                    # A success rate's band stops at 0 and 100%, where few seeds' t-interval would not.
                    low, high = (0, 100) if success else (-np.inf, np.inf)
                    ax.fill_between(x, np.clip(mean - half, low, high), np.clip(mean + half, low, high),
                                    color=line.get_color(), alpha=0.2)
                drawn[task][label] = mean
        # The published figures where they were measured: at the published protocol's last step, with their
        # spread where it is recorded.
        steps = PUBLISHED_PROTOCOL.get(task, {}).get("total_timesteps")
        for name, marker in zip(DRAWN, ["o", "s"]) if steps else ():
            spread = PUBLISHED_STD.get((task, name))
            ax.errorbar([steps], [PUBLISHED[task][1][METHODS.index(name)]], yerr=None if spread is None else [spread],
                        color="grey", marker=marker, capsize=3, linestyle="none",
                        label=f"{name}, published ({PUBLISHED_SEEDS} seeds{'' if spread else '; ± not recorded'})")
        ax.xaxis.set_major_formatter(lambda steps, _: f"{steps / 1000:g}k")  # full numbers ran into each other
        ax.set(title=task, xlabel="agent steps",
               ylabel="success rate of training episodes, %" if success else "return of training episodes")
        ax.grid(alpha=0.3)
        ax.legend(fontsize=7)
    fig.tight_layout()
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path)
    plt.close(fig)
    return drawn


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--tasks", nargs="*", default=[], choices=sorted(PUBLISHED),
                        help="tasks to run and record (none: write the table from the ledger alone)")
    parser.add_argument("--methods", nargs="+", default=["pebble"],
                        help="methods to run and show (the table alone also shows a recorded <method>+<variant>)")
    parser.add_argument("--protocol", choices=list(PROTOCOLS), default="cpu",
                        help="the runs' protocol: the papers' (published) or the one a core runs (cpu, the default)")
    parser.add_argument("--seeds", type=int, default=MIN_SEEDS)
    parser.add_argument("--first-seed", type=int, default=0,
                        help="run seeds FIRST_SEED to FIRST_SEED + SEEDS - 1 (more seeds beside recorded ones)")
    parser.add_argument("--steps", type=int, default=None,
                        help="run the protocol's first STEPS agent steps only (default: all of them)")
    parser.add_argument("--ceiling-seeds", type=int, default=None, help="seeds of the ceiling (default: --seeds)")
    parser.add_argument("--jobs", type=int, default=2, help="runs at once")
    parser.add_argument("--ledger", type=Path, default=LEDGER, help="the CSV of recorded runs")
    parser.add_argument("--machine", default=f"{os.cpu_count()}-core CPU, no GPU",
                        help="where the runs ran, recorded with each (default: this machine)")
    parser.add_argument("--plot", type=Path, default=None,
                        help="draw the recorded runs' learning curves into this PNG (linked from the table)")
    parser.add_argument("--variant", default="",
                        help="what --override changes, in a word: runs are recorded as <method>+VARIANT (the ceiling "
                             "as ceiling+VARIANT); needed with --override and --tasks")
    add_run_options(parser, "outputs/bench_bpref", "bench_bpref")
    args = parser.parse_args()
    if args.first_seed < 0:
        parser.error(f"--first-seed must be at least 0, got {args.first_seed}")
    if args.tasks and args.override and not args.variant:
        parser.error("--override changes the runs, so name the change with --variant: they would be recorded as the "
                     "plain methods' runs and replace their rows in the ledger")
    if not set(args.variant) <= set("abcdefghijklmnopqrstuvwxyz0123456789_-."):
        parser.error(f"--variant takes lower-case letters, digits, '_', '-' and '.', got {args.variant!r}")
    if args.tasks and any("+" in m for m in args.methods):
        parser.error("--methods with --tasks names methods to run, not recorded variants: run a variant with "
                     "--override and --variant")
    variants_path = args.ledger.with_name(VARIANTS)
    if args.tasks and args.variant:  # before the runs: a name taken by other overrides is refused at once
        remember_variant(variants_path, args.variant, args.override)
    captions = variant_lines(args.methods, read_variants(variants_path))
    ceiling_seeds = args.seeds if args.ceiling_seeds is None else args.ceiling_seeds
    new, new_rounds = [], []
    for task in args.tasks:
        for method, sweep_overrides, n in [*((m, [f"method={m}"], args.seeds) for m in args.methods),
                                           (CEILING, ["reward_learning=none"], ceiling_seeds)]:
            if n:
                overrides = [*args.override, *sweep_overrides]
                experiment = f"{PROTOCOLS[args.protocol]}/{task}"
                if args.steps is not None:
                    overrides += first_steps(protocol(experiment, overrides), args.steps)
                runs = sweep(args.root / args.protocol / task / method, [f"experiment={experiment}", *overrides,
                                                         seeds(n, args.first_seed)], args.jobs)
                name = ledger_name(method, args.variant)
                new += [record(task, name, run, args.machine) for run in runs]
                new_rounds += [r for run in runs for r in rounds(task, name, run)]
    ledger = merge(read_ledger(args.ledger), new)
    curves_path = args.ledger.with_name(CURVES)
    curves = merge(read_ledger(curves_path, CURVE_FIELDS), new_rounds)
    if new:
        write_ledger(args.ledger, ledger)
        write_ledger(curves_path, curves, CURVE_FIELDS)
    # The caption links the ledger (and the figure) from the page it is written into.
    page = args.out.resolve().parent if args.out else Path.cwd()
    def linked(path: Path) -> str:
        return Path(os.path.relpath(path.resolve(), page)).as_posix()
    link = linked(args.ledger)
    plotted = bool(args.plot and curves)
    if plotted:
        plot(curves, args.methods, args.plot)
    where = "; ".join(sorted({f"{r['machine']} ({r['date']})" for r in ledger})) or "none yet"
    text = "\n".join([
        f"Written by `python scripts/bench_bpref.py --methods {' '.join(args.methods)} --block {args.block}"
        f"{f' --plot {args.plot.as_posix()}' if plotted else ''}` from the "
        f"ledger of runs, [{link}]({link}) (`--tasks <task>` runs a task and records it); "
        f"the runs ran on: {where}. DMC: final return; Meta-World: final success rate (success at any step of an "
        "episode), %. rlhp: mean ± 95% CI (Student t) over the seeds in brackets; the ceiling is the same agent on "
        "the task's own reward (its command: `reward_learning=none` in place of `method=`); steps short of the "
        "protocol's are a run's first steps (`--steps N`: rounds as long, and labelled, as the full run's); "
        "published: PPE (NeurIPS 2025) Table 1, 5 seeds, Meta-World v2 (rlhp runs v3), at the published protocol's "
        "steps. Protocol: `published` (the papers' settings, `experiment=bpref/<task>`), `cpu` (the agent 256 x 2 on "
        "batches of 256 and at most 500k steps, `experiment=bpref_cpu/<task>`), `earlier` (B-Pref's batches of 50 "
        f"labels, the 256 x 2 agent, 300k steps on Meta-World). Verdict: rlhp's fresh seeds (below {TUNING_FROM}; "
        f"{MIN_SEEDS} at least) against the published figure of the same method, Welch's t at 95% (a one-sample t "
        "against the published mean where its ± is not recorded): above, within or below; computed, never written.",
        "",
        f"| task | protocol | labels | {' | '.join(METHODS)} | "
        f"{' | '.join(f'rlhp {m} | verdict' for m in args.methods)} | ceiling | steps | command |",
        f"|---|---|---:|{'---:|' * len(METHODS)}{'---:|---|' * len(args.methods)}---:|---:|---|",
        *table(ledger, args.methods),
        *(["", " ".join(captions)] if captions else []),
        *(["", f"![Learning curves of the recorded runs]({linked(args.plot)}): the training episodes' return or "
               f"success rate, from [{linked(curves_path)}]({linked(curves_path)})."] if plotted else [])])
    show(text, args.out, args.block)


if __name__ == "__main__":
    main()
