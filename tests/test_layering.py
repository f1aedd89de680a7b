"""Layering as the docstrings describe it: pure modules never import I/O modules, not even lazily.

Imports inside ``if TYPE_CHECKING:`` are types only and do not count.  The check follows imports
transitively through the package, so a pure module cannot reach the disk, the network or a
subprocess by way of another module either.
"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest
from conftest import PROJECT_ROOT

PACKAGE = PROJECT_ROOT / "tiny_agent"

PURE = [
    "adapters",
    "api",
    "canonical",
    "compaction",
    "configuration",
    "endpoint",
    "errors",
    "facts",
    "fold",
    "json_profile",
    "keys",
    "lineage",
    "links",
    "normalize",
    "pgschema",
    "profiles",
    "recovery",
    "redact",
    "reducer",
    "render",
    "settlement",
    "state",
    "tools",
    "transactions",
    "transcript",
    "wire",
    "wording",
]
"""Modules (or packages) that compute: bytes and values in, values out."""

IO = [
    "agent",
    "audit",
    "catalog",
    "checkpoints",
    "cli",
    "failpoints",
    "filestore",
    "interop",
    "journal",
    "live",
    "loopback",
    "pgcheckpoints",
    "pgstore",
    "provider",
    "report",
    "runtime",
    "sandbox",
    "store",
    "toolbox",
    "userconfig",
    "verify",
    "view",
]
"""Modules that touch the disk, the network, processes, signals or the terminal."""

OUTSIDE = ("httpx", "subprocess", "socket", "psycopg", "typer")
"""Third-party or standard modules that only I/O code may use."""


def _module_files(name: str) -> list[Path]:
    path = PACKAGE / name
    if path.is_dir():
        return sorted(path.rglob("*.py"))
    file = PACKAGE / f"{name}.py"
    return [file] if file.exists() else []


def _imports(file: Path) -> set[str]:
    tree = ast.parse(file.read_text(encoding="utf-8"))
    found: set[str] = set()

    def visit(node: ast.AST, typing_only: bool) -> None:
        if isinstance(node, ast.If) and "TYPE_CHECKING" in ast.unparse(node.test):
            for child in node.body:
                visit(child, True)
            for child in node.orelse:
                visit(child, typing_only)
            return
        if not typing_only:
            if isinstance(node, ast.Import):
                found.update(alias.name for alias in node.names)
            elif isinstance(node, ast.ImportFrom) and node.module:
                found.add(node.module)
                found.update(f"{node.module}.{alias.name}" for alias in node.names)
        for child in ast.iter_child_nodes(node):
            visit(child, typing_only)

    visit(tree, False)
    return found


def _top(name: str) -> str | None:
    """The package-level module an import names (``tiny_agent.fold.core`` -> ``fold``)."""
    if not name.startswith("tiny_agent."):
        return None
    parts = name.split(".")
    return parts[1] if len(parts) > 1 else None


def _reach(start: str) -> tuple[set[str], set[str]]:
    """Package modules and outside modules reachable from ``start`` by non-typing imports."""
    seen: set[str] = set()
    outside: set[str] = set()
    queue = [start]
    while queue:
        name = queue.pop()
        if name in seen:
            continue
        seen.add(name)
        for file in _module_files(name):
            for imported in _imports(file):
                root = imported.split(".")[0]
                if root in OUTSIDE:
                    outside.add(root)
                top = _top(imported)
                if top is not None and top not in seen and _module_files(top):
                    queue.append(top)
    return seen, outside


def test_every_module_is_classified() -> None:
    modules = {path.stem for path in PACKAGE.glob("*.py")} | {path.name for path in PACKAGE.iterdir() if path.is_dir()}
    modules -= {"__init__", "__main__", "__pycache__", "ids"}
    assert modules <= set(PURE) | set(IO), f"classify {sorted(modules - set(PURE) - set(IO))} as pure or I/O"


@pytest.mark.parametrize("module", PURE)
def test_a_pure_module_reaches_no_io(module: str) -> None:
    reached, outside = _reach(module)
    assert not reached & set(IO), f"{module} reaches I/O modules {sorted(reached & set(IO))}"
    assert not outside, f"{module} reaches {sorted(outside)}"
