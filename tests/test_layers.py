"""The rules of docs/architecture.md, read from the source: each wing imports only the floors below it, the readers
of run folders import no training code, training never imports the labelling server, no import cycle, and no
function of 50 lines or more."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1] / "rlhp"

FLOORS = [
    {"errors"},                                           # the ground floor: errors.py first, then the helpers
    {"logs", "files", "video"},
    {"data", "preference_model", "runs"},                 # what flows between the parts; the run folder
    {"envs", "rewards"},
    {"training", "feedback", "offline"},                  # offline: the learners, a library as SB3 is
    {"agents"},                                           # the agent, and what only it uses
    {"sources"},                                          # where trajectories come from besides the agent
    {"loop", "demos", "human"},
    {"api", "report"},
    {"experiment"},                                       # the commands: everything
]
"""The wings, lowest first: a wing imports only the wings of lower floors (and itself)."""
READERS = {"runs": FLOORS[0] | FLOORS[1], "report": FLOORS[0] | FLOORS[1] | {"runs"}}
"""The readers of run folders and what they may import: no training code."""
SERVER = "human.server"
SERVER_READS = FLOORS[0] | FLOORS[1] | {"data", "runs", "human"}
"""The labelling server reads the run folder and the query store (``human``), and nothing trains in it."""


def modules() -> dict[str, Path]:
    """Every module of the package by its dotted name (a package by its own)."""
    found = {}
    for path in ROOT.rglob("*.py"):
        name = ".".join(path.relative_to(ROOT.parent).with_suffix("").parts)
        found[name.removesuffix(".__init__")] = path
    return found


def imports(path: Path, known: dict[str, Path]) -> set[str]:
    """The rlhp modules ``path`` imports (those for type checkers alone too: a cycle of types is a cycle)."""
    tree = ast.parse(path.read_text())
    found = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            names = [alias.name for alias in node.names]
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            names = [node.module, *(f"{node.module}.{alias.name}" for alias in node.names)]
        else:
            continue
        for name in (n for n in names if n.split(".")[0] == "rlhp"):
            while name not in known:  # a name imported from a module is that module
                name = name.rpartition(".")[0]
            found.add(name)
    return found


def wing(module: str) -> str:
    """The wing a module stands in: its sub-package of rlhp (``human.server`` apart), or its own name at the root."""
    parts = module.split(".")[1:] or ["rlhp"]
    return SERVER if parts[:2] == ["human", "server"] else parts[0]


GRAPH = {name: imports(path, modules()) - {name} for name, path in modules().items()}


def floor(name: str) -> int:
    return next(i for i, wings in enumerate(FLOORS) if name in wings)


@pytest.mark.parametrize("module", sorted(GRAPH))
def test_a_module_imports_only_its_own_wing_and_the_floors_below(module):
    here = wing(module)
    if here in ("rlhp", "conf"):  # the package's own __init__ and the configs' resolvers
        assert not {wing(m) for m in GRAPH[module]} - {"rlhp", "conf"}
        return
    for target in GRAPH[module]:
        there = wing(target)
        if there == here:
            continue
        if here == SERVER:
            assert there in SERVER_READS, f"{module} (the labelling server) imports {target}"
        elif here in READERS:
            assert there in READERS[here], f"{module} reads run folders and imports {target}"
        else:
            assert there != SERVER, f"{module} imports the labelling server ({target})"
            assert floor(there) < floor(here), f"{module} ({here}) imports {target} ({there}): not a lower floor"


def test_every_wing_has_a_floor():
    assert {wing(m) for m in GRAPH} - {"rlhp", "conf", SERVER} == set().union(*FLOORS)


def test_no_import_cycle():
    seen, done, cycles = [], set(), []

    def visit(module: str) -> None:
        if module in done:
            return
        if module in seen:
            cycles.append(seen[seen.index(module):])
            return
        seen.append(module)
        for target in sorted(GRAPH[module]):
            visit(target)
        seen.pop()
        done.add(module)

    for module in sorted(GRAPH):
        visit(module)
    assert not cycles, cycles


def test_the_package_root_holds_at_most_eight_modules():
    assert len([p for p in ROOT.glob("*.py") if p.name != "__init__.py"]) <= 8


def test_every_function_is_under_fifty_lines():
    long = [f"{path.relative_to(ROOT.parent)}:{node.lineno} {node.name} ({node.end_lineno - node.lineno + 1})"
            for path in modules().values() for node in ast.walk(ast.parse(path.read_text()))
            if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef) and node.end_lineno - node.lineno + 1 >= 50]
    assert not long, long
