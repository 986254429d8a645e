"""The layers import in one direction: lake -> collectors -> trainer -> api; inside the lake
storage -> vocab -> ops -> curation -> derive | export, and the storage engine never imports the
lake's operations (directly or through another room); inside the collectors record -> envs -> loop -> agents ->
jobs | clawgui (the contracts are in pyproject.toml under [tool.importlinter]); and no module
reaches itself through a ring of imports. An upward import, even one inside a function,
fails here with the chain of imports that breaks the contract."""

from __future__ import annotations

import json
import re
import sys
from pathlib import Path

from tests import package_tree

ROOT = Path(__file__).resolve().parents[1]
LINT_IMPORTS = Path(sys.executable).with_name("lint-imports")


def test_imports_follow_the_layers():
    proc = package_tree.run([str(LINT_IMPORTS), "--no-cache"], capture_output=True, text=True, timeout=300)
    report = proc.stdout + proc.stderr
    assert proc.returncode == 0, report
    # not kept by default: every package was found and read, and both contracts ran
    analysed = re.search(r"Analyzed (\d+) files", report)
    assert analysed and int(analysed.group(1)) > 100, report
    contracts = ROOT.joinpath("pyproject.toml").read_text().count("[[tool.importlinter.contracts]]")
    assert contracts >= 5 and f"Contracts: {contracts} kept, 0 broken." in report, report


def strongly_connected(graph: dict[str, set[str]]) -> list[set[str]]:
    """Tarjan's algorithm, iterative: the groups of modules that import each other in a ring."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    rings: list[set[str]] = []
    for root in sorted(graph):
        if root in index:
            continue
        work = [(root, iter(sorted(graph[root])))]
        index[root] = low[root] = len(index)
        stack.append(root)
        on_stack.add(root)
        while work:
            node, edges = work[-1]
            for nxt in edges:
                if nxt not in index:
                    index[nxt] = low[nxt] = len(index)
                    stack.append(nxt)
                    on_stack.add(nxt)
                    work.append((nxt, iter(sorted(graph.get(nxt, ())))))
                    break
                if nxt in on_stack:
                    low[node] = min(low[node], index[nxt])
            else:
                work.pop()
                if work:
                    low[work[-1][0]] = min(low[work[-1][0]], low[node])
                if low[node] == index[node]:
                    ring = set()
                    while True:
                        member = stack.pop()
                        on_stack.discard(member)
                        ring.add(member)
                        if member == node:
                            break
                    if len(ring) > 1:
                        rings.append(ring)
    return rings


def test_the_cycle_finder_finds_a_ring_and_only_rings():
    graph = {"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}, "e": set()}
    assert strongly_connected(graph) == [{"a", "b", "c"}]
    assert strongly_connected({"a": {"b"}, "b": set()}) == []


def rings_in_package() -> list[set[str]]:
    """The import rings of the installed package (run where `episodelake` is the laid-out
    tree: grimp walks its folders)."""
    import grimp

    built = grimp.build_graph("episodelake", cache_dir=None)
    graph = {m: set(built.find_modules_directly_imported_by(m)) for m in built.modules}
    assert len(graph) > 150, sorted(graph)[:20]
    return strongly_connected(graph)


def test_no_module_imports_itself_through_a_ring():
    """Every package, lazy imports inside functions included: a ring of imports means neither
    module can be read, tested or moved without the other. `episodelake/__init__.py` points at
    every layer, so no module of the package may import from `episodelake` itself."""
    probe = ("import json; from tests.test_architecture import rings_in_package; "
             "print(json.dumps([sorted(ring) for ring in rings_in_package()]))")
    proc = package_tree.run([sys.executable, "-c", probe], capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stderr
    rings = json.loads(proc.stdout)
    assert rings == [], "import rings: " + "; ".join(" <-> ".join(ring) for ring in rings)
