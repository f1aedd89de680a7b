"""docs/cli.md and the code agree on every label and exit code."""

from __future__ import annotations

import re

from conftest import PROJECT_ROOT

from tiny_agent.errors import LABELS, TinyAgentError

_ROW = re.compile(r"^\| `(?P<label>[^`]+)` \| (?P<exit>\d+) \| (?P<meaning>.+) \|$")


def _documented() -> dict[str, int]:
    text = (PROJECT_ROOT / "docs" / "cli.md").read_text(encoding="utf-8")
    section = text.split("## Labels and exit codes", 1)[1].split("\n## ", 1)[0]
    rows = [_ROW.match(line) for line in section.splitlines()]
    return {match["label"]: int(match["exit"]) for match in rows if match}


def test_the_docs_table_is_the_code_table() -> None:
    assert _documented() == LABELS


def _subclasses(cls: type[TinyAgentError]) -> list[type[TinyAgentError]]:
    found = []
    for sub in cls.__subclasses__():
        found.append(sub)
        found.extend(_subclasses(sub))
    return found


def test_every_error_class_uses_a_documented_label() -> None:
    documented = _documented()
    for cls in [TinyAgentError, *_subclasses(TinyAgentError)]:
        assert cls.label in documented, f"{cls.__name__} uses label {cls.label!r}, which docs/cli.md does not list"


def _command_names() -> list[str]:
    from tiny_agent.cli.declarations import COMMANDS

    return sorted(COMMANDS)


def test_help_text_has_no_type_noise(capsys) -> None:
    """Every command's help names its arguments plainly: no ``{SESSION}``, no ``<str>``."""
    import pytest

    from tiny_agent.cli import main

    for name in _command_names():
        with pytest.raises(SystemExit) as done:
            main([name.replace("_", "-"), "--help"])
        assert done.value.code == 0
        text = capsys.readouterr().out
        for noise in ("<str>", "<bool>", "<int>", "<float>", "{"):
            assert noise not in text, f"tiny-agent {name} --help shows {noise!r}"
