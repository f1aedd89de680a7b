"""Every reducer fixture of the reference project, read from ../shared at test time."""

from __future__ import annotations

import json

import pytest
from conftest import conformance_dir

from tiny_agent.errors import CorruptionError
from tiny_agent.fold.lines import reduce_bytes


def _reducer_cases() -> list[dict[str, object]]:
    manifest = conformance_dir() / "fixtures" / "manifest.json"
    if not manifest.exists():
        return []
    return json.loads(manifest.read_text())["fixtures"]


def reduce_to_conformance_shape(data: bytes) -> dict[str, object]:
    try:
        state = reduce_bytes(data)
    except CorruptionError as error:
        return {"ok": False, "error": error.to_json()}
    return {"ok": True, "state": state.to_json()}


def test_manifest_is_present(conformance):
    assert len(_reducer_cases()) >= 38


@pytest.mark.parametrize("case", _reducer_cases(), ids=lambda case: case["name"])
def test_reducer_fixture(case, conformance):
    fixtures = conformance / "fixtures"
    expected = json.loads((fixtures / case["expected"]).read_text())
    actual = reduce_to_conformance_shape((fixtures / case["file"]).read_bytes())
    assert actual == expected
