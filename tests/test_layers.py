"""The import contract: the two domains and the shared core, each in layers.

Read from the source (every `import` statement, those inside functions included), so a lazy
import cannot hide a dependency. A module may import its own layer or the layers below it; the
two domains never import each other; the core imports neither; the CLI sits on top.
"""

from __future__ import annotations

import ast
import subprocess
import sys
from pathlib import Path

import pytest

PACKAGE = Path(__file__).resolve().parents[1] / "bsjax"

# Lowest layer first. A module belongs to the first layer with a prefix of its name.
CORE = [
    ["bsjax.core.errors"],
    ["bsjax.core.files", "bsjax.core.stats", "bsjax.core.progress", "bsjax.core.checks",
     "bsjax.core.fastpath", "bsjax.core.hlo", "bsjax.core.profile"],
    ["bsjax.core.llm"],
]
BATTLESHIP = [
    ["bsjax.battleship.config", "bsjax.battleship.types"],
    ["bsjax.battleship.game"],
    ["bsjax.battleship.belief"],
    ["bsjax.battleship.planning"],
    ["bsjax.battleship.runtime"],
    ["bsjax.battleship.agents"],
    ["bsjax.battleship.llm"],
    ["bsjax.battleship.harness"],
    ["bsjax.battleship.report"],
    ["bsjax.battleship.cli", "bsjax.battleship.cli_checks", "bsjax.battleship.cli_flags"],
]
GILP = [  # the pipeline: generate (data) -> train -> plan / simulate -> evaluate -> report
    ["bsjax.gilp.config", "bsjax.gilp.types", "bsjax.gilp.keys", "bsjax.gilp.paper_numbers",
     "bsjax.gilp.profiles"],
    ["bsjax.gilp.envs"],
    ["bsjax.gilp.data"],
    ["bsjax.gilp.backbones"],
    ["bsjax.gilp.training"],
    ["bsjax.gilp.llm", "bsjax.gilp.events", "bsjax.gilp.metrics"],
    ["bsjax.gilp.planners"],
    ["bsjax.gilp.methods"],
    ["bsjax.gilp.behaviour", "bsjax.gilp.real"],
    ["bsjax.gilp.report"],
    ["bsjax.gilp.evaluation"],
    ["bsjax.gilp.cli"],
]
TOP = ["bsjax.cli"]


def _modules() -> dict[str, Path]:
    out = {}
    for path in PACKAGE.rglob("*.py"):
        parts = path.relative_to(PACKAGE.parent).with_suffix("").parts
        name = ".".join(parts[:-1] if parts[-1] == "__init__" else parts)
        out[name] = path
    return out


MODULES = _modules()


def _resolve(name: str) -> str | None:
    while name and name not in MODULES:
        name = name.rpartition(".")[0]
    return name or None


def _imports(module: str) -> set[str]:
    """The bsjax modules `module` imports (`from pkg import submodule` counts the submodule)."""
    path = MODULES[module]
    package = module if path.name == "__init__.py" else module.rpartition(".")[0]
    found = set()
    for node in ast.walk(ast.parse(path.read_text())):
        names = []
        if isinstance(node, ast.Import):
            names = [alias.name for alias in node.names]
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                parent = package.split(".")[: len(package.split(".")) - node.level + 1]
                base = ".".join(parent + ([base] if base else []))
            submodules = [f"{base}.{alias.name}" for alias in node.names
                          if f"{base}.{alias.name}" in MODULES]
            names = submodules or [base]
        for name in names:
            if name.startswith("bsjax"):
                target = _resolve(name)
                if target and target != module:
                    found.add(target)
    return found


def _layer(module: str, layers: list[list[str]]) -> int | None:
    for index, prefixes in enumerate(layers):
        if any(module == p or module.startswith(p + ".") for p in prefixes):
            return index
    return None


def _area(module: str) -> str:
    for area in ("core", "battleship", "gilp"):
        if module == f"bsjax.{area}" or module.startswith(f"bsjax.{area}."):
            return area
    return "top"


LAYERS = {"core": CORE, "battleship": BATTLESHIP, "gilp": GILP}
RANK = {"core": 0, "battleship": 1, "gilp": 1, "top": 2}


def test_every_module_has_a_place():
    """A new module must be given a layer here (a newcomer learns where it sits)."""
    package_inits = {"bsjax", "bsjax.core", "bsjax.battleship", "bsjax.gilp"}
    homeless = [m for m in MODULES if m not in package_inits and m not in TOP
                and _layer(m, LAYERS.get(_area(m), [])) is None]
    assert not homeless


def test_layers_are_respected():
    violations = []
    for module in sorted(MODULES):
        area = _area(module)
        for target in sorted(_imports(module)):
            target_area = _area(target)
            if target == "bsjax":
                violations.append(f"{module} imports the package root")
            elif area != target_area:
                if RANK[target_area] >= RANK[area]:
                    violations.append(f"{module} ({area}) imports {target} ({target_area})")
            elif area in LAYERS:
                mine, theirs = _layer(module, LAYERS[area]), _layer(target, LAYERS[area])
                if mine is not None and theirs is not None and theirs > mine:
                    violations.append(f"{module} (layer {mine}) imports {target} (layer {theirs})")
    assert not violations, "\n".join(violations)


def _cycles(graph: dict[str, set[str]]) -> list[str]:
    """Every cycle a depth-first walk of `graph` meets, as "a -> b -> a"."""
    state: dict[str, int] = {}
    cycles = []

    def visit(node: str, stack: list[str]) -> None:
        state[node] = 1
        for nxt in sorted(graph.get(node, ())):
            if state.get(nxt) == 1:
                cycles.append(" -> ".join(stack[stack.index(nxt):] + [nxt]))
            elif nxt not in state:
                visit(nxt, stack + [nxt])
        state[node] = 2

    for node in sorted(graph):
        if node not in state:
            visit(node, [node])
    return cycles


def test_no_import_cycles():
    cycles = _cycles({m: _imports(m) for m in MODULES})
    assert not cycles, "\n".join(cycles)


def _subpackage(module: str) -> str:
    """`bsjax.gilp.behaviour.run` -> `bsjax.gilp.behaviour` (a domain's folders, or its loose modules)."""
    return ".".join(module.split(".")[:3])


def test_the_folders_import_each_other_without_cycles():
    """Collapsed to folders (`bsjax.gilp.data`, `bsjax.battleship.belief`, ...) the graph is still
    a DAG: a folder is a stage, and no stage reaches back to a later one."""
    graph: dict[str, set[str]] = {}
    for module in MODULES:
        mine = _subpackage(module)
        graph.setdefault(mine, set()).update(
            _subpackage(t) for t in _imports(module) if _subpackage(t) != mine)
    cycles = _cycles(graph)
    assert not cycles, "\n".join(cycles)
    # The check can fail: a folder that imported a later one would close a cycle.
    assert _cycles({**graph, "bsjax.gilp.data": graph["bsjax.gilp.data"] | {"bsjax.gilp.cli"}})


@pytest.mark.parametrize("module, forbidden", [
    ("bsjax.gilp.envs.taskgraph", "bsjax.battleship"),
    ("bsjax.gilp.cli.main", "bsjax.battleship"),
    ("bsjax.battleship.harness.experiment", "bsjax.gilp"),
    ("bsjax.core.llm.structured", "bsjax.battleship"),
    ("bsjax", "bsjax.battleship"),
])
def test_importing_one_domain_loads_nothing_of_the_other(module, forbidden):
    """Checked in a fresh interpreter: what `import module` really loads."""
    code = (f"import sys, {module}\n"
            f"print('\\n'.join(m for m in sys.modules if m.startswith('{forbidden}')))")
    loaded = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                            check=True).stdout.split()
    assert loaded == []
