"""The layout as docs/architecture.md draws it: layers that import only downwards, pure code that reaches no I/O.

Every import counts, lazy ones and ``if TYPE_CHECKING:`` ones too: an import up the layers, even
for a type, is a dependency the picture does not show.  The pure check follows imports
transitively, so a pure module cannot reach the disk, the network or a subprocess by way of
another module either (type-only imports are exempt there: they run no code).
"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest
from conftest import PROJECT_ROOT

PACKAGE = PROJECT_ROOT / "tiny_agent"

LAYERS = ["errors", "journal", "fold", "wire", "providers", "stores", "agent", "oversight", "view", "loopback", "cli"]
"""The top-level entries of the package, bottom first: each may import only from itself and those before it."""

PURE = [
    "errors",
    "journal",
    "fold",
    "wire",
    "providers.profiles",
    "providers.keys",
    "providers.endpoint",
    "providers.selection",
    "stores.postgres.schema",
    "agent.compaction",
    "agent.configuration",
    "agent.recovery",
    "agent.settlement",
    "agent.transactions",
    "agent.tools.builtin",
    "oversight.cost",
    "oversight.lineage",
    "oversight.render",
]
"""Modules (or packages) that compute: bytes and values in, values out."""

OUTSIDE = ("httpcore", "httpx", "subprocess", "socket", "psycopg", "typer", "mcp")
"""Third-party or standard modules that only I/O code may use."""

CLOCK = "journal.ids"
"""UUIDv7 ids and the clock: the one impurity pure code may reach (a fact needs an id and a time)."""

IO_STDLIB = ("os", "pathlib", "shutil", "tempfile", "signal", "threading", "select", "fcntl")
"""Standard modules through which code touches the world (a pure module may not import them)."""


def _all_modules() -> dict[str, Path]:
    found: dict[str, Path] = {}
    for file in PACKAGE.rglob("*.py"):
        parts = list(file.relative_to(PACKAGE).with_suffix("").parts)
        if parts[-1] == "__init__":
            parts = parts[:-1]
        found[".".join(parts)] = file
    return found


MODULES = _all_modules()


def _imports(file: Path, *, with_types: bool) -> set[str]:
    tree = ast.parse(file.read_text(encoding="utf-8"))
    found: set[str] = set()

    def visit(node: ast.AST, typing_only: bool) -> None:
        if isinstance(node, ast.If) and "TYPE_CHECKING" in ast.unparse(node.test):
            for child in node.body:
                visit(child, True)
            for child in node.orelse:
                visit(child, typing_only)
            return
        if with_types or not typing_only:
            if isinstance(node, ast.Import):
                found.update(alias.name for alias in node.names)
            elif isinstance(node, ast.ImportFrom) and node.module:
                found.add(node.module)
                found.update(f"{node.module}.{alias.name}" for alias in node.names)
        for child in ast.iter_child_nodes(node):
            visit(child, typing_only)

    visit(tree, False)
    return found


def _package_module(name: str) -> str | None:
    """The package module an import names (``tiny_agent.fold.core.Fold`` -> ``fold.core``), if any."""
    if not name.startswith("tiny_agent."):
        return None
    parts = name.split(".")[1:]
    while parts and ".".join(parts) not in MODULES:
        parts.pop()
    return ".".join(parts) or None


def _layer(module: str) -> str:
    return module.split(".")[0]


def test_the_top_level_is_the_layers() -> None:
    entries = {path.stem if path.suffix == ".py" else path.name for path in PACKAGE.iterdir() if path.name != "__pycache__"}
    assert entries == set(LAYERS) | {"__init__", "__main__"}
    assert len(list(PACKAGE.iterdir())) - (PACKAGE / "__pycache__").exists() <= 14


@pytest.mark.parametrize("module", sorted(MODULES), ids=str)
def test_a_module_imports_only_down_the_layers(module: str) -> None:
    if not module or module == "__main__":
        return
    mine = LAYERS.index(_layer(module))
    for name in _imports(MODULES[module], with_types=True):
        target = _package_module(name)
        if target is not None:
            assert LAYERS.index(_layer(target)) <= mine, f"{module} imports {target}, a layer above it"


def _reach(start: str) -> tuple[set[str], set[str]]:
    """Package modules and outside modules reachable from ``start`` by imports that run."""
    seen: set[str] = set()
    outside: set[str] = set()
    queue = [name for name in MODULES if name == start or name.startswith(start + ".")]
    while queue:
        name = queue.pop()
        if name in seen:
            continue
        seen.add(name)
        if name == CLOCK:
            continue
        for imported in _imports(MODULES[name], with_types=False):
            root = imported.split(".")[0]
            if root in OUTSIDE or root in IO_STDLIB:
                outside.add(root)
            target = _package_module(imported)
            if target is not None and target not in seen:
                queue.append(target)
    return seen, outside


def _is_pure(module: str) -> bool:
    return any(module == pure or module.startswith(pure + ".") for pure in PURE)


@pytest.mark.parametrize("module", PURE)
def test_a_pure_module_reaches_no_io(module: str) -> None:
    reached, outside = _reach(module)
    impure = sorted(name for name in reached if not _is_pure(name))
    assert not impure, f"{module} reaches modules that do I/O: {impure}"
    assert not outside, f"{module} reaches {sorted(outside)}"


LEAN_PATH = ["cli.declarations", "cli.basics", "cli.looking"]
"""What ``tiny-agent replay`` and the other read-only commands run before typer would be needed (tests/test_lean_cli.py)."""


@pytest.mark.parametrize("module", LEAN_PATH)
def test_the_lean_path_reaches_no_typer(module: str) -> None:
    _, outside = _reach(module)
    assert "typer" not in outside, f"{module} reaches typer"


def test_the_cli_app_imports_no_command_module_and_none_imports_it_but_main() -> None:
    """Commands are declared (cli.declarations) and found by name: no module imports the app back."""
    app_imports = {_package_module(name) for name in _imports(MODULES["cli.app"], with_types=True)} - {None}
    assert app_imports <= {"", "errors", "cli.basics", "cli.declarations"}, app_imports
    importers = {name for name in MODULES if "cli.app" in {_package_module(i) for i in _imports(MODULES[name], with_types=True)}}
    assert importers == {"cli.lean"}
