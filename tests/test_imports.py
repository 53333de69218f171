"""The module graph of ``lab/`` and ``apps/``: no import circle, no private name imported across modules.

The graph is read from the source (``ast``), so an import inside a function counts as much as one at the
top: a circle held together by late imports is still a circle. Importing ``lab.a.b`` runs
``lab/a/__init__.py`` first, so a module depends on the packages above what it imports; the stage
registry (``lab.stages``) depends on every stage it lists. Imports under ``TYPE_CHECKING`` are left out:
they never run.
"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
PACKAGES = ("lab", "apps")


def _modules() -> dict[str, Path]:
    mods = {}
    for pkg in PACKAGES:
        for f in sorted((ROOT / pkg).rglob("*.py")):
            name = ".".join(f.relative_to(ROOT).with_suffix("").parts)
            mods[name.removesuffix(".__init__")] = f
    return mods


def _type_checking(tree: ast.AST) -> set[int]:
    skip = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.If) and getattr(node.test, "id", getattr(node.test, "attr", None)) == "TYPE_CHECKING":
            skip.update(id(n) for n in ast.walk(node))
    return skip


def _imports(mods: dict[str, Path]):
    """(importer, imported module, name imported or None) for every import of a module of ours."""

    def known(name: str) -> str | None:
        while name and name not in mods:
            name = name.rpartition(".")[0]
        return name or None

    for m, f in mods.items():
        tree = ast.parse(f.read_text(encoding="utf-8"))
        skip = _type_checking(tree)
        pkg = m if f.name == "__init__.py" else m.rpartition(".")[0]
        for node in ast.walk(tree):
            if id(node) in skip:
                continue
            if isinstance(node, ast.Import):
                for a in node.names:
                    if (t := known(a.name)) and t != m:
                        yield m, t, None
            elif isinstance(node, ast.ImportFrom):
                full = node.module or ""
                if node.level:
                    base = pkg.split(".")[: len(pkg.split(".")) - node.level + 1]
                    full = ".".join(base + ([node.module] if node.module else []))
                if not full.startswith(PACKAGES):
                    continue
                for a in node.names:
                    sub = f"{full}.{a.name}"
                    if sub in mods:  # from lab.query import funnels: the module funnels
                        if sub != m:
                            yield m, sub, None
                    elif (t := known(full)) and t != m:
                        yield m, t, a.name


def graph() -> dict[str, set[str]]:
    mods = _modules()
    edges: dict[str, set[str]] = {m: set() for m in mods}
    for m, t, _ in _imports(mods):
        edges[m].add(t)
    for m in mods:
        for t in list(edges[m]):  # the packages above an imported module run first
            parts = t.split(".")
            for k in range(1, len(parts)):
                above = ".".join(parts[:k])
                if above in mods and above != m and not m.startswith(above + "."):
                    edges[m].add(above)
    from lab.stages import REGISTRY

    edges["lab.stages"] |= {f"lab.stages.{name}" for name in REGISTRY}
    return edges


def cycles(edges: dict[str, set[str]]) -> list[list[str]]:
    """The strongly connected components of more than one module (Tarjan's algorithm, iterative)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on: set[str] = set()
    out = []
    for start in sorted(edges):
        if start in index:
            continue
        work = [(start, iter(sorted(edges[start])))]
        index[start] = low[start] = len(index)
        stack.append(start)
        on.add(start)
        while work:
            v, it = work[-1]
            for w in it:
                if w not in index:
                    index[w] = low[w] = len(index)
                    stack.append(w)
                    on.add(w)
                    work.append((w, iter(sorted(edges[w]))))
                    break
                if w in on:
                    low[v] = min(low[v], index[w])
            else:
                work.pop()
                if work:
                    low[work[-1][0]] = min(low[work[-1][0]], low[v])
                if low[v] == index[v]:
                    comp = []
                    while True:
                        w = stack.pop()
                        on.discard(w)
                        comp.append(w)
                        if w == v:
                            break
                    if len(comp) > 1:
                        out.append(sorted(comp))
    return out


def test_the_cycle_finder_finds_a_circle():
    assert cycles({"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}) == [["a", "b", "c"]]
    assert cycles({"a": {"b"}, "b": set()}) == []


def test_no_import_circle_among_the_modules():
    edges = graph()
    assert len(edges) > 100 and edges["lab.query.funnels"] >= {"lab.query.run", "lab.query.compile"}
    found = cycles(edges)
    assert found == [], "\n".join(" -> ".join(c) + "  (each imports another of the circle)" for c in found)


def test_config_reaches_no_module_that_uses_a_config():
    # config reads the registry's declarations (stage configs, knob kinds, fields); nothing it imports,
    # however far down, imports config back
    edges = graph()
    seen, todo = set(), list(edges["lab.config"])
    while todo:
        m = todo.pop()
        if m not in seen:
            seen.add(m)
            todo.extend(edges[m])
    users = {m for m, out in edges.items() if "lab.config" in out}
    assert len(users) > 20 and "lab.stages" in seen
    assert not seen & users, sorted(seen & users)


def _private(name: str) -> bool:
    return name.startswith("_") and not name.startswith("__")


def _private_uses(source: str) -> list[str]:
    """``name._private`` where ``name`` was imported from one of our packages."""
    tree = ast.parse(source)
    ours: set[str] = set()
    for n in ast.walk(tree):
        if isinstance(n, ast.Import):
            ours |= {a.asname or a.name.split(".")[0] for a in n.names if a.name.startswith(PACKAGES)}
        elif isinstance(n, ast.ImportFrom) and (n.level or (n.module or "").startswith(PACKAGES)):
            ours |= {a.asname or a.name for a in n.names}
    return [ast.unparse(n) for n in ast.walk(tree) if isinstance(n, ast.Attribute) and _private(n.attr)
            and isinstance(n.value, ast.Name) and n.value.id in ours]


def test_the_private_use_finder_finds_one():
    found = _private_uses("from lab import engine\nimport lab.io\nengine._x(); self._y; lab._z")
    assert sorted(found) == ["engine._x", "lab._z"]


def test_no_private_name_is_imported_across_modules():
    private = sorted(f"{m} imports {name} from {t}" for m, t, name in _imports(_modules()) if name and _private(name))
    assert private == []
    # nor reached through a module or class imported from another of ours: other._helper(...)
    reached = [f"{m}: {use}" for m, f in _modules().items() for use in _private_uses(f.read_text(encoding="utf-8"))]
    assert reached == []


@pytest.mark.parametrize("pkg", ["lab", "apps"])
def test_every_package_says_what_comes_in_and_what_goes_out(pkg):
    folders = {f.parent for f in (ROOT / pkg).rglob("*.py")}
    assert [d for d in folders if not (d / "__init__.py").exists()] == []  # no namespace package by accident
    for init in sorted((ROOT / pkg).rglob("__init__.py")):
        doc = ast.get_docstring(ast.parse(init.read_text(encoding="utf-8")))
        assert doc and len(doc.split()) >= 12, f"{init.relative_to(ROOT)}: a docstring of what the package does"


def test_the_dashboards_views_read_the_sessions_store_not_the_query_package():
    views = [(m, t) for m, t, _ in _imports(_modules()) if m.startswith("apps.views.")]
    assert len(views) > 20 and [(m, t) for m, t in views if t.startswith("lab.query")] == []
