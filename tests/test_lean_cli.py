"""The lean path: a command line it understands starts without typer, and says and does exactly what typer's path does.

- typer's app and the lean parser are made from the same declarations; typer's commands have them, option by option;
- it hands typer every command line it does not understand completely;
- where it runs a command, the values, output, errors and exit codes are typer's;
- ``tiny-agent replay FILE`` and ``tiny-agent sessions`` load neither typer, pydantic, importlib.metadata nor the HTTP
  client, and ``tiny-agent run`` none but the HTTP client (checked in a subprocess, at exit).
"""

from __future__ import annotations

import errno
import inspect
import json
import os
import socket
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from builders import write_tool_session
from conftest import PROJECT_ROOT
from hypothesis import given, settings
from hypothesis import strategies as st

from tiny_agent.cli import basics, lean, looking
from tiny_agent.cli.declarations import COMMANDS, Opt, Param, body_of, parameters
from tiny_agent.cli.lean import _spellings, parse


def lean_spellings(parameter: Param) -> list[str]:
    return [flag for flag, _ in _spellings(parameter)]



def _typer_commands() -> dict[str, Any]:
    import typer.main

    from tiny_agent.cli.app import app

    return dict(typer.main.get_command(app).commands)  # type: ignore[attr-defined]


TYPER = _typer_commands()


def _declared(command: Any) -> tuple[dict[str, tuple[object, ...]], list[tuple[str, bool]]]:
    """A typer command's options by parameter: (names, kind, default, minimum); its arguments: (name, variadic)."""
    options: dict[str, tuple[object, ...]] = {}
    arguments: list[tuple[str, bool]] = []
    for parameter in command.params:
        where = f"{command.name} {parameter.name}"
        # What the lean parser never does: read the environment, prompt, count, call back, take several values at once.
        assert parameter.envvar is None and parameter.callback is None and not parameter.is_eager, where
        annotation = parameter.type_descriptor.annotation
        if parameter.param_type_name == "argument":
            arguments.append((parameter.name, parameter.nargs == -1))
            assert annotation == (list[str] if parameter.nargs == -1 else str), where
            continue
        assert parameter.prompt is None and not parameter.count and parameter.nargs == 1, where
        if parameter.is_flag:
            kind = "switch" if parameter.secondary_opts else "flag"
        elif parameter.multiple:
            assert annotation == list[str], where
            kind = "texts"
        else:
            kind = {int: "integer", float: "number", str: "text"}.get(annotation)
            assert kind is not None, f"{where}: an option of type {annotation}"
        names = tuple(sorted(parameter.opts + parameter.secondary_opts))
        options[parameter.name] = (names, kind, parameter.required, parameter.default, parameter.min, parameter.max)
    return options, arguments


@pytest.mark.parametrize("name", sorted(COMMANDS))
def test_typers_command_has_the_declared_parameters(name):
    """What the lean parser reads from the declarations is what typer's command was made with."""
    options, arguments = _declared(TYPER[name])
    declared = list(parameters(COMMANDS[name]))
    ours = {
        parameter.name: (
            tuple(sorted(lean_spellings(parameter))),
            parameter.kind,
            parameter.required,
            None if parameter.required else parameter.default,
            parameter.spelt.minimum,
            parameter.spelt.maximum,
        )
        for parameter in declared
        if isinstance(parameter.spelt, Opt)
    }
    assert ours == options
    assert [(parameter.name, parameter.kind == "arguments") for parameter in declared if not parameter.flags] == arguments


@pytest.mark.parametrize("name", sorted(COMMANDS))
def test_every_command_has_a_body_taking_its_declaration(name):
    (parameter,) = inspect.signature(body_of(COMMANDS[name])).parameters.values()
    assert parameter.annotation == COMMANDS[name].__name__


def test_typer_has_every_declared_command_and_no_other():
    assert set(COMMANDS) == set(TYPER)


# -- what it leaves to typer --------------------------------------------------------------------


@pytest.mark.parametrize(
    "words",
    [
        [],
        ["--version"],
        ["--help"],
        ["replay", "--help"],
        ["replay"],
        ["replay", "a", "b"],
        ["replay", "a", "--jsn"],
        ["replay", "a", "--json=yes"],
        ["replay", "a", "--json", "--json"],
        ["replay", "a", "--sessions-dir"],
        ["replay", "a", "--sessions-dir", "--json"],
        ["replay", "a", "--"],
        ["replay", "-x"],
        ["sessions", "--limit", "0"],
        ["sessions", "--limit", "ten"],
        ["sessions", "--limit", "1.5"],
        ["view", "s", "-oout.html"],
        ["view", "s", "-o=out.html"],
        ["verify", "-h"],
        ["providers", "extra"],
        ["run"],
        ["run", "a", "b"],
        ["run", "hi", "--retries", "16"],
        ["run", "hi", "--retries", "-1"],
        ["run", "hi", "--compact-at", "0.05"],
        ["run", "hi", "--compact-at", "1.5"],
        ["run", "hi", "--retry-wait", "soon"],
        ["run", "hi", "--retry-wait", "nan"],
        ["run", "hi", "--connect-timeout", "inf"],
        ["run", "hi", "--stream=yes"],
        ["run", "hi", "--stream", "--no-stream"],
        ["run", "hi", "--system", "-x"],
        ["run", "hi", "--mcp"],
        ["run", "hi", "-cv"],
        ["run", "-h"],
        ["compact", "s", "--system", "x"],
        ["compact", "s", "a", "b"],
        ["fork", "s"],
        ["resume"],
        ["chat", "extra"],
    ],
)
def test_command_lines_it_does_not_fully_understand_go_to_typer(words):
    assert parse(words) is None


def test_a_shell_asking_for_completions_goes_to_typer(monkeypatch):
    calls: list[list[str] | None] = []

    def typer_main(argv: list[str] | None = None) -> None:
        calls.append(argv)
        raise SystemExit(0)

    monkeypatch.setenv(lean.COMPLETION_ENV, "complete_bash")
    monkeypatch.setattr("tiny_agent.cli.app.main", typer_main)
    with pytest.raises(SystemExit):
        lean.main(["sessions"])
    assert calls == [["sessions"]]


# -- same values as typer -------------------------------------------------------------------------

SAME_VALUES = [
    ["replay", "s"],
    ["replay", "--json", "s", "--sessions-dir", "d"],
    ["replay", "s", "--messages", "--full", "--sessions-dir=d"],
    ["normalize", "-"],
    ["normalize", "body.json", "--provider", "openrouter", "--api", "chat"],
    ["audit", "s", "--json"],
    ["verify"],
    ["verify", "a", "b", "--json"],
    ["verify", "--all", "--sessions-dir", ""],
    ["sessions"],
    ["sessions", "--limit", " 5", "--all", "--json"],
    ["sessions", "--limit=+7"],
    ["sessions", "--limit", "1_0"],
    ["providers", "--json"],
    ["view", "s", "-o", "-", "--open"],
    ["view", "s", "--output=page.html"],
    ["report"],
    ["report", "--by", "model", "--since", "2026-01-01", "--html", "r.html", "--all"],
    ["run", "hi"],
    ["run", "-", "--session", "s", "--json", "--sessions-dir", "d"],
    ["run", "hi", "-c", "-m", "m", "--provider", "groq", "--base-url", "http://x", "--api", "chat", "--system", "@f"],
    ["run", "hi", "--allow-bash", "--allow-write", "--no-project-instructions", "--verbose", "--no-auto-compact"],
    ["run", "hi", "--mcp", "a", "--mcp=b c", "--allow-mcp", "a", "--stream", "--max-tokens", "5", "--tool-choice", "x"],
    ["run", "hi", "--no-stream", "--retries", "15", "--retry-wait", "0", "--max-steps", "3", "--durability", "process"],
    ["run", "hi", "--connect-timeout", "1.5", "--read-timeout=2", "--stream-idle-timeout", "1e1", "--attempt-timeout", "9"],
    ["run", "hi", "--max-response-bytes", "100", "--context-window", "256", "--compact-at", "1", "--keep-tokens", "0"],
    ["run", "hi", "--compact-at", "0.1", "--retries", "0", "--store", "postgresql://x/y", "-v"],
    ["demo"],
    ["demo", "--sessions-dir", "d"],
    ["resume", "s"],
    ["resume", "s", "--abort", "--dry-run", "--current-config", "c.json", "--json", "--model", "m"],
    ["compact", "s"],
    ["compact", "s", "keep the numbers", "--keep-tokens", "100", "--context-window", "1000"],
    ["chat"],
    ["chat", "--session", "s", "--mcp", "x", "--no-stream"],
    ["chat", "-c", "--allow-bash"],
    ["upgrade", "j.jsonl", "--durability", "process", "--json"],
    ["fork", "s", "--at", "seq:3", "--json"],
    ["export", "s"],
    ["export", "s", "--v2", "-o", "out.jsonl"],
    ["import", "-", "--json"],
]


@pytest.mark.parametrize("words", SAME_VALUES, ids=" ".join)
def test_it_passes_the_values_typer_passes(monkeypatch, words):
    from tiny_agent.cli.app import main as typer_main

    seen: list[object] = []
    module, _, name = COMMANDS[words[0]].body.partition(".")
    monkeypatch.setattr(f"tiny_agent.cli.{module}.{name}", seen.append)
    with pytest.raises(SystemExit) as done:
        typer_main(list(words))
    assert done.value.code == 0
    invocation = parse(words)
    assert invocation is not None
    assert invocation == seen[0]


# -- same output, errors and exit codes ---------------------------------------------------------------


def _both(capsys, words: list[str]) -> tuple[tuple[object, str, str], tuple[object, str, str]]:
    from tiny_agent.cli.app import main as typer_main

    results = []
    for run in (lean.main, typer_main):
        with pytest.raises(SystemExit) as done:
            run(list(words))
        captured = capsys.readouterr()
        results.append((done.value.code, captured.out, captured.err))
    return results[0], results[1]


def test_output_errors_and_exit_codes_are_typers(capsys, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    sessions = tmp_path / "sessions"
    sessions.mkdir()
    good = sessions / "20260101T000000Z_0190f5e2-7c00-7a00-8a00-000000000001.jsonl"
    write_tool_session(good, session_id="0190f5e2-7c00-7a00-8a00-000000000001")
    broken = tmp_path / "broken.jsonl"
    broken.write_bytes(b'{"kind":"header"}\n')
    empty = tmp_path / "empty.json"
    empty.write_bytes(b"")
    not_json = tmp_path / "body.txt"
    not_json.write_bytes(b"<html>")
    directory = ["--sessions-dir", str(sessions)]
    cases = [
        ["replay", str(good), "--json", *directory],
        ["replay", str(good), *directory],
        ["replay", str(good), "--messages", *directory],
        ["replay", str(good), "--json", "--messages", *directory],
        ["replay", str(broken), "--json", *directory],
        ["replay", str(broken), *directory],
        ["replay", "nosuch", *directory],
        ["replay", str(tmp_path / "missing.jsonl"), *directory],
        ["audit", str(good), "--json", *directory],
        ["audit", str(broken), *directory],
        ["verify", *directory],
        ["verify", "--all", *directory],
        ["verify", str(broken), *directory],
        ["sessions", "--all", *directory],
        ["sessions", "--json", "--all", *directory],
        ["normalize", str(empty)],
        ["normalize", str(not_json)],
        ["normalize", str(tmp_path / "missing.json")],
        ["normalize", str(empty), "--provider", "nosuch"],
        ["report", "--by", "week", *directory],
        ["report", "--json", "--html", "x.html", *directory],
        ["view", "nosuch", *directory],
        ["run", "hi", "--session", "nosuch", *directory],
        ["run", "hi", "--provider", "nosuch", *directory],
        ["run", "hi", "--session", str(broken), *directory],
        ["resume", "nosuch", *directory],
        ["resume", str(good), "--dry-run", "--json", *directory],
        ["resume", str(broken), "--dry-run", *directory],
        ["compact", "nosuch", *directory],
        ["chat", "--session", "nosuch", *directory],
        ["fork", str(good), "--at", "nosuch", *directory],
        ["export", str(good), *directory],
        ["export", str(broken), "--v2", *directory],
        ["import", str(tmp_path / "missing.jsonl"), *directory],
        ["upgrade", str(broken), *directory],
    ]
    for words in cases:
        assert parse(words) is not None, words
        ours, typers = _both(capsys, words)
        assert ours == typers, words


@pytest.mark.parametrize(
    "raised",
    [KeyboardInterrupt(), BrokenPipeError(errno.EPIPE, "Broken pipe"), BrokenPipeError()],
    ids=["Ctrl-C", "broken pipe", "a pipe error without EPIPE"],
)
def test_an_interrupt_and_a_broken_pipe_end_as_on_typers_path(capsys, monkeypatch, raised):
    """click ends the first two itself on typer's path (130 and 1, silently); the lean path does the same."""

    def interrupted(*arguments: object, **keywords: object) -> None:
        raise raised

    monkeypatch.setattr(looking, "providers", interrupted)
    monkeypatch.setattr(lean, "quiet_stdout", lambda: None)
    monkeypatch.setattr(basics, "quiet_stdout", lambda: None)
    ours, typers = _both(capsys, ["providers"])
    assert ours == typers


# -- what it loads ------------------------------------------------------------------------------------

PROBE = """
import atexit, json, sys
target = sys.argv[1]
def report():
    loaded = sorted(name for name in sys.modules if name.split(".")[0] in {"typer", "click", "pydantic", "httpx", "httpcore"} or name == "importlib.metadata")
    with open(target, "w") as out:
        json.dump(loaded, out)
atexit.register(report)
sys.argv = ["tiny-agent", *sys.argv[2:]]
from tiny_agent.cli import main
main()
"""


def _loaded_by(tmp_path: Path, *words: str) -> tuple[int, list[str]]:
    found = tmp_path / "modules.json"
    completed = subprocess.run(
        [sys.executable, "-c", PROBE, str(found), *words],
        capture_output=True,
        text=True,
        cwd=tmp_path,
        env={**os.environ, "PYTHONPATH": str(PROJECT_ROOT)},
        timeout=60,
    )
    return completed.returncode, json.loads(found.read_text())


def test_replay_and_sessions_start_without_typer_pydantic_metadata_or_http(tmp_path):
    sessions = tmp_path / "sessions"
    sessions.mkdir()
    journal = sessions / "20260101T000000Z_0190f5e2-7c00-7a00-8a00-000000000001.jsonl"
    write_tool_session(journal, session_id="0190f5e2-7c00-7a00-8a00-000000000001")
    for words in (
        ("replay", str(journal), "--sessions-dir", str(sessions)),
        ("replay", str(journal), "--json", "--sessions-dir", str(sessions)),
        ("sessions", "--sessions-dir", str(sessions)),
        ("sessions", "--all", "--sessions-dir", str(sessions)),
    ):
        code, loaded = _loaded_by(tmp_path, *words)
        assert code == 0, words
        assert loaded == [], f"tiny-agent {' '.join(words)} loaded {loaded}"


def test_run_starts_without_typer_pydantic_or_metadata(tmp_path):
    """The next turn's wait: ``run`` loads the HTTP client it needs, not typer and what typer brings."""
    with socket.socket() as probe:  # a port nothing listens on: the run is refused at once and stays open (75)
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    words = ("run", "hi", "--provider", "custom", "--api", "chat", "--base-url", f"http://127.0.0.1:{port}/v1")
    code, loaded = _loaded_by(tmp_path, *words, "--model", "m", "--retries", "0", "--sessions-dir", str(tmp_path / "s"))
    assert code == 75
    assert "httpcore" in loaded
    assert [name for name in loaded if name.split(".")[0] not in {"httpx", "httpcore"}] == []


def test_the_typer_path_is_still_there_for_everything_else(tmp_path):
    code, loaded = _loaded_by(tmp_path, "replay", "--help")
    assert code == 0
    assert "typer" in loaded


# -- any command line: where the lean parser answers, typer passes the same values ------------------------------------

_WORDS = st.sampled_from(["s", "-", "x y", "0", "1", "15", "16", "-1", "0.5", "1e1", "nan", "inf", "-inf", "1e999", "-0", "1_0", " 2", "", "--", "-x", "=", "é"])


@st.composite
def _command_lines(draw: st.DrawFn) -> list[str]:
    name = draw(st.sampled_from(sorted(COMMANDS)))
    declared = list(parameters(COMMANDS[name]))
    spellings = [flag for parameter in declared for flag in lean_spellings(parameter)] + ["--help", "-h", "--nosuch"]
    words = [name]
    for _ in range(draw(st.integers(0, 6))):
        if draw(st.booleans()):
            words.append(draw(_WORDS))
            continue
        flag = draw(st.sampled_from(spellings))
        words.append(f"{flag}={draw(_WORDS)}" if flag.startswith("--") and draw(st.integers(0, 4)) == 0 else flag)
    return words


@settings(max_examples=600)
@given(words=_command_lines())
def test_any_line_the_lean_parser_takes_gets_typers_values(words):
    """Random lines from every command's declared spellings and awkward words: whatever the lean parser accepts, typer
    accepts with the same values (lines it declines go to typer, which then decides alone)."""
    import typer.main

    from tiny_agent.cli.app import app

    ours = parse(words)
    if ours is None:
        return
    seen: list[object] = []
    module, _, name = COMMANDS[words[0]].body.partition(".")
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(f"tiny_agent.cli.{module}.{name}", seen.append)
        typer.main.get_command(app).main(args=list(words), prog_name="tiny-agent", standalone_mode=False)
    assert seen == [ours]
