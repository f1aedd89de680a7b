"""The fold's layout: each reference rule next to its fast twin, pure imports, flat attributes."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest
from spec_example import example_bytes

from tiny_agent import fold
from tiny_agent.fold import Fold, reduce_chunks

FOLD_PACKAGE = Path(fold.__file__).parent

TWINS = {
    "_fast_fact": "_fact",
    "_fast_entry_fact": "_entry_fact",
    "_fast_record_fact": "_record_fact",
    "_fast_user_entry": "_user_entry",
    "_fast_assistant_entry": "_assistant_entry",
    "_fast_tool_entry": "_tool_entry",
    "_fast_tool_started": "_tool_started_record",
    "_fast_step_attempt": "_step_attempt",
    "_fast_run_started": "_run_started",
    "_fast_run_finished": "_check_run_completed",
    "_fast_usage": "_usage_fact",
    "_fast_raw": "_raw_fact",
    "_fast_seal": "_seal_fact",
}


def test_every_fast_rule_has_a_twin_listed_here():
    fast = {name for name in dir(Fold) if name.startswith("_fast_")}
    assert fast == set(TWINS)


@pytest.mark.parametrize("fast, reference", sorted(TWINS.items()))
def test_each_fast_rule_sits_in_the_module_of_its_reference_rule(fast, reference):
    assert getattr(Fold, fast).__module__ == getattr(Fold, reference).__module__


ALLOWED_IMPORTS = (
    "tiny_agent.fold",
    "tiny_agent.journal",
    "tiny_agent.errors",
    "msgspec",
    "__future__",
    "base64",
    "binascii",
    "codecs",
    "collections",
    "functools",
    "hashlib",
    "re",
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


def test_a_fold_keeps_its_attributes_under_cpythons_shared_key_limit():
    """Past 30 instance attributes CPython 3.11 stops sharing key tables, and every ``self.x`` slows down."""
    fold = Fold()
    reduce_chunks((example_bytes(9),), fold)
    assert len(vars(fold)) <= 30, sorted(vars(fold))
