"""The committed example journals replay as their manifest says."""

from __future__ import annotations

import json

import pytest
from conftest import PROJECT_ROOT
from test_replay_cli import call

EXAMPLES = PROJECT_ROOT / "sessions" / "examples"
MANIFEST = json.loads((EXAMPLES / "manifest.json").read_text())


def test_manifest_lists_every_example():
    assert sorted(MANIFEST) == sorted(path.name for path in EXAMPLES.glob("*.jsonl"))


@pytest.mark.parametrize("name", sorted(MANIFEST))
def test_example_replays_as_documented(capsys, name):
    expected = MANIFEST[name]
    code, out, err = call(capsys, "replay", str(EXAMPLES / name))
    assert code == expected["exit"]
    if "code" in expected:
        assert err.startswith(expected["code"] + " at line ")
    else:
        assert "#1 user" in out
