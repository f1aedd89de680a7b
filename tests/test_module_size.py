"""No module of the package grows past 600 lines: a bigger one is doing more than one thing."""

from __future__ import annotations

from pathlib import Path

import pytest
from conftest import PROJECT_ROOT

LIMIT = 600
PACKAGE = PROJECT_ROOT / "tiny_agent"

NOT_YET_SPLIT: set[str] = set()
"""Over the limit when this test was written, and outside the fold's split (issue 15): still to be split by their owners."""


def _modules() -> list[Path]:
    return sorted(PACKAGE.rglob("*.py"))


def test_there_are_modules_to_measure():
    assert len(_modules()) > 20


@pytest.mark.parametrize("path", _modules(), ids=lambda path: str(path.relative_to(PACKAGE)))
def test_module_is_at_most_600_lines(path):
    lines = len(path.read_text(encoding="utf-8").splitlines())
    if lines > LIMIT and path.relative_to(PACKAGE).as_posix() in NOT_YET_SPLIT:
        pytest.xfail(f"{path.name} has {lines} lines and is not split yet")
    assert lines <= LIMIT, f"{path.relative_to(PACKAGE)} has {lines} lines"
