"""The fold's layout: rules are functions over one data class, each fast twin next to its reference rule, pure imports."""

from __future__ import annotations

import ast
import importlib
import inspect
from pathlib import Path

import pytest
from spec_example import example_bytes

from tiny_agent import fold
from tiny_agent.fold import Fold, reduce_chunks
from tiny_agent.fold.core import FoldCore

FOLD_PACKAGE = Path(fold.__file__).parent

TWINS = {
    "Fold._fast_fact": "Fold._fact",
    "fold.fast_seal": "fold.seal_fact",
    "messages.fast_user_entry": "messages.user_entry",
    "messages.fast_assistant_entry": "messages.assistant_entry",
    "tools.fast_tool_result": "tools.tool_entry",
    "tools.fast_tool_started": "tools.tool_started",
    "steps.fast_step_attempt": "steps.step_attempt",
    "operations.fast_run_started": "operations.run_started",
    "operations.fast_run_finished": "operations.operation_finished",
    "usage.fast_usage": "usage.usage_fact",
}
"""Every fast twin and its reference rule (the kinds without a twin go to their reference rules)."""


def _fast_rules() -> set[str]:
    found = {f"Fold.{name}" for name in vars(Fold) if name.startswith("_fast_")}
    for path in FOLD_PACKAGE.glob("*.py"):
        module = importlib.import_module(f"tiny_agent.fold.{path.stem}")
        for name, value in vars(module).items():
            if name.startswith("fast_") and inspect.isfunction(value) and value.__module__ == module.__name__:
                found.add(f"{path.stem}.{name}")
    return found


def _resolve(name: str) -> object:
    owner, attribute = name.split(".")
    return getattr(Fold if owner == "Fold" else importlib.import_module(f"tiny_agent.fold.{owner}"), attribute)


def test_every_fast_rule_has_a_twin_listed_here():
    assert _fast_rules() == set(TWINS)


@pytest.mark.parametrize("fast, reference", sorted(TWINS.items()))
def test_each_fast_rule_sits_in_the_module_of_its_reference_rule(fast, reference):
    assert _resolve(fast).__module__ == _resolve(reference).__module__  # type: ignore[attr-defined]


def test_the_rules_are_functions_over_the_folds_data_not_mixins():
    """``Fold`` is :class:`FoldCore` (the state, the books, the line being folded) plus lines, header and dispatch."""
    assert Fold.__bases__ == (FoldCore,)
    assert FoldCore.__bases__ == (object,)


def test_a_fold_keeps_its_data_in_declared_members():
    """Every member is declared (``__slots__``): none can appear that a snapshot does not know of."""
    folded = Fold()
    reduce_chunks((example_bytes(9),), folded)
    assert not hasattr(folded, "__dict__")


ALLOWED_IMPORTS = (
    "tiny_agent.fold",
    "tiny_agent.journal",
    "tiny_agent.errors",
    "msgspec",
    "__future__",
    "array",
    "bisect",
    "base64",
    "binascii",
    "codecs",
    "collections",
    "functools",
    "hashlib",
    "itertools",
    "operator",
    "re",
    "types",
    "typing",
)
"""Pure modules only: no files, clocks, processes or network anywhere in the fold."""


@pytest.mark.parametrize("path", sorted(FOLD_PACKAGE.glob("*.py")), ids=lambda path: path.name)
def test_the_fold_imports_only_pure_modules(path):
    tree = ast.parse(path.read_text())
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            names = [alias.name for alias in node.names]
        elif isinstance(node, ast.ImportFrom) and node.module == "tiny_agent":
            names = [f"tiny_agent.{alias.name}" for alias in node.names]
        elif isinstance(node, ast.ImportFrom):
            names = [node.module or ""]
        else:
            continue
        for name in names:
            assert name.startswith(ALLOWED_IMPORTS), f"{path.name} imports {name}"
