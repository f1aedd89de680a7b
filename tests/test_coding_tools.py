"""edit, list, glob and grep: what they do, their bounds, their confinement, .gitignore, and that edit is never replayed."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
from pathlib import Path

import pytest
import replies
from conftest import PROJECT_ROOT
from test_toolbox import Recorder, within

from tiny_agent.agent.tools import files
from tiny_agent.agent.tools.builtin import BUILTIN, EDIT, GREP, validate_arguments
from tiny_agent.agent.tools.files import gitignore_rules, glob_regex, ignored
from tiny_agent.agent.tools.toolbox import NO_APPROVER_REASON, ToolBox
from tiny_agent.journal.tools import ToolOutcome
from tiny_agent.journal.transcript import ToolMessage
from tiny_agent.loopback import LoopbackServer, Reply
from tiny_agent.stores.journal import read_journal


def run(toolbox: ToolBox, name: str, **arguments: object) -> ToolOutcome:
    return within(30, lambda: toolbox.execute(name, arguments))


@pytest.fixture()
def tree(tmp_path: Path) -> Path:
    """A repository with a working directory one level down, a .gitignore above it and one inside."""
    (tmp_path / ".git").mkdir()
    (tmp_path / ".gitignore").write_text("build/\n*.log\n!keep.log\n/top-only.txt\n")
    root = tmp_path / "work"
    (root / "src" / "sub").mkdir(parents=True)
    (root / "build").mkdir()
    (root / "src" / "a.py").write_text("hello\nworld\n")
    (root / "src" / "sub" / "b.py").write_text("HELLO again\n")
    (root / "src" / "sub" / ".gitignore").write_text("# generated\nskip-*.py\n")
    (root / "src" / "sub" / "skip-me.py").write_text("hello\n")
    (root / "build" / "c.py").write_text("hello\n")
    (root / "x.log").write_text("hello\n")
    (root / "keep.log").write_text("hello\n")
    (root / "top-only.txt").write_text("hello\n")  # anchored to the repository root, not to work/
    (root / "blob.bin").write_bytes(b"hello\x00\x01")
    os.mkfifo(root / "pipe")
    (tmp_path / "outside").mkdir()
    (tmp_path / "outside" / "secret.py").write_text("hello secret\n")
    (root / "out").symlink_to(tmp_path / "outside")
    (root / "out.py").symlink_to(tmp_path / "outside" / "secret.py")
    return root


# -- declarations and arguments ---------------------------------------------------------------


def test_each_tool_is_declared_once_with_its_replay_policy() -> None:
    policies = {spec.name: (spec.replay, spec.replay_key) for spec in BUILTIN}
    assert len(policies) == len(BUILTIN)
    assert {name: replay for name, (replay, _) in policies.items()} == {
        "read": "safe", "list": "safe", "glob": "safe", "grep": "safe", "write": "never", "edit": "never", "bash": "never",
    }
    assert all(key == f"builtin:{name}:v1" for name, (_, key) in policies.items())
    assert EDIT.parameters["required"] == ["path", "old_text", "new_text"]
    assert GREP.parameters["required"] == ["pattern"]


@pytest.mark.parametrize(
    ("arguments", "problem"),
    [
        ({"pattern": "x"}, None),
        ({"pattern": "x", "ignore_case": True, "limit": 1000}, None),
        ({"pattern": "x", "ignore_case": "yes"}, 'argument "ignore_case" is not true or false'),
        ({"pattern": "x", "limit": 0}, 'argument "limit" must be between 1 and 1000'),
        ({"pattern": "x", "limit": 1001}, 'argument "limit" must be between 1 and 1000'),
        ({"pattern": "x", "limit": 2.0}, 'argument "limit" is not an integer'),
        ({"pattern": "x", "limit": True}, 'argument "limit" is not an integer'),
        ({"pattern": 1}, 'argument "pattern" is not a string'),
        ({"path": "."}, 'missing argument "pattern"'),
        ({"pattern": "x", "flags": "i"}, 'unknown argument "flags"'),
        ([], "arguments are not a JSON object"),
    ],
)
def test_arguments_are_checked_against_the_declaration(arguments: object, problem: str | None) -> None:
    assert validate_arguments(GREP.parameters, arguments) == problem


def test_bad_arguments_are_error_results(tmp_path: Path) -> None:
    outcome = ToolBox(tmp_path).execute("grep", {"pattern": "x", "limit": -1})
    assert outcome == ToolOutcome(content='Error: argument "limit" must be between 1 and 1000', ok=False)


# -- edit ------------------------------------------------------------------------------------------


def test_edit_replaces_the_one_occurrence(tmp_path: Path) -> None:
    (tmp_path / "a.py").write_text("x = 1\ny = 2\n")
    outcome = run(ToolBox(tmp_path, allow_write=True), "edit", path="a.py", old_text="y = 2", new_text="y = 3")
    assert outcome == ToolOutcome(content="edited a.py: replaced 1 occurrence (allowed by --allow-write)", ok=True)
    assert (tmp_path / "a.py").read_text() == "x = 1\ny = 3\n"


@pytest.mark.parametrize(
    ("old", "why"),
    [
        ("z", "a.py: old_text was not found; it must occur exactly once (nothing was changed)"),
        ("= ", "a.py: old_text occurs 2 times; it must occur exactly once (nothing was changed)"),
        ("aa", "a.py: old_text occurs 2 times; it must occur exactly once (nothing was changed)"),  # overlapping
        ("", "old_text is empty"),
        ("x = 1", "old_text and new_text are the same: nothing to change"),
    ],
)
def test_edit_fails_unless_the_old_text_occurs_exactly_once(tmp_path: Path, old: str, why: str) -> None:
    (tmp_path / "a.py").write_text("x = 1\ny = aaa\n")
    recorder = Recorder(approved=True)
    new = "x = 1" if old == "x = 1" else "q"
    assert run(ToolBox(tmp_path, approve=recorder), "edit", path="a.py", old_text=old, new_text=new) == ToolOutcome(
        content=f"Error: {why}", ok=False
    )
    assert recorder.proposals == []
    assert (tmp_path / "a.py").read_text() == "x = 1\ny = aaa\n"


def test_edit_shows_a_diff_and_asks_like_write(tmp_path: Path) -> None:
    (tmp_path / "a.py").write_text("x = 1\n")
    declined = Recorder(approved=False)
    outcome = run(ToolBox(tmp_path, approve=declined), "edit", path="a.py", old_text="1", new_text="2")
    assert outcome == ToolOutcome(content="Error: editing a.py was not approved: the user declined", ok=False)
    assert declined.proposals[0].diff is not None and "-x = 1\n+x = 2" in declined.proposals[0].diff
    assert (tmp_path / "a.py").read_text() == "x = 1\n"
    approved = Recorder(approved=True)
    outcome = run(ToolBox(tmp_path, approve=approved), "edit", path="a.py", old_text="1", new_text="2")
    assert outcome.content == "edited a.py: replaced 1 occurrence (approved by the user)"
    refused = run(ToolBox(tmp_path), "edit", path="a.py", old_text="2", new_text="3")
    assert refused.content == f"Error: editing a.py was not approved: {NO_APPROVER_REASON}"
    assert (tmp_path / "a.py").read_text() == "x = 2\n"


def test_edit_needs_an_existing_small_utf8_text_file(tmp_path: Path) -> None:
    toolbox = ToolBox(tmp_path, allow_write=True)
    (tmp_path / "latin.txt").write_bytes(b"caf\xe9\n")
    (tmp_path / "big.txt").write_text("a" * (300 * 1024))
    os.mkfifo(tmp_path / "pipe")
    assert run(toolbox, "edit", path="new.txt", old_text="a", new_text="b").content == (
        "Error: new.txt: no such file; edit changes an existing UTF-8 text file"
    )
    assert run(toolbox, "edit", path="latin.txt", old_text="caf", new_text="b").content == (
        "Error: latin.txt: the file is not UTF-8 text; edit changes an existing UTF-8 text file"
    )
    assert "larger than 256 KiB" in run(toolbox, "edit", path="big.txt", old_text="a", new_text="b").content
    assert run(toolbox, "edit", path="pipe", old_text="a", new_text="b").content == "Error: pipe: is a FIFO, not a regular file"
    (tmp_path / "ok.txt").write_text("a\n")
    assert "not valid Unicode text" in run(toolbox, "edit", path="ok.txt", old_text="a", new_text="\ud800").content
    assert (tmp_path / "ok.txt").read_text() == "a\n"


def test_edit_refuses_protected_paths(tmp_path: Path) -> None:
    (tmp_path / "sessions").mkdir()
    (tmp_path / "sessions" / "s.jsonl").write_text("{}\n")
    outcome = run(ToolBox(tmp_path, allow_write=True, protected=[Path("sessions")]), "edit", path="sessions/s.jsonl", old_text="{}", new_text="[]")
    assert outcome.content.startswith("Error: sessions/s.jsonl: sessions is kept by tiny-agent itself")


# -- confinement -------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("name", "arguments", "error"),
    [
        ("edit", {"path": "../outside/secret.py", "old_text": "hello", "new_text": "bye"}, "../outside/secret.py: leaves the working directory"),
        ("edit", {"path": "out.py", "old_text": "hello", "new_text": "bye"}, "out.py: leaves the working directory"),
        ("edit", {"path": "out/secret.py", "old_text": "hello", "new_text": "bye"}, "out/secret.py: leaves the working directory"),
        ("list", {"path": ".."}, "..: leaves the working directory"),
        ("list", {"path": "out"}, "out: leaves the working directory"),
        ("list", {"path": "src/../../outside"}, "src/../../outside: leaves the working directory"),
        ("glob", {"pattern": "*", "path": "out"}, "out: leaves the working directory"),
        ("glob", {"pattern": "../outside/*"}, "../outside/*: a pattern is relative to path and cannot leave it"),
        ("glob", {"pattern": "/etc/*"}, "/etc/*: a pattern is relative to path and cannot leave it"),
        ("grep", {"pattern": "secret", "path": "../outside"}, "../outside: leaves the working directory"),
        ("grep", {"pattern": "secret", "path": "out.py"}, "out.py: leaves the working directory"),
    ],
)
def test_paths_outside_the_working_directory_are_refused(tree: Path, name: str, arguments: dict[str, object], error: str) -> None:
    outcome = run(ToolBox(tree, allow_write=True), name, **arguments)
    assert outcome == ToolOutcome(content=f"Error: {error}", ok=False)
    assert (tree.parent / "outside" / "secret.py").read_text() == "hello secret\n"


@pytest.mark.parametrize("name", ["list", "glob", "grep", "edit"])
def test_absolute_paths_are_refused(tree: Path, name: str) -> None:
    absolute = str(tree / "src")
    arguments = {"list": {"path": absolute}, "glob": {"pattern": "*", "path": absolute}, "grep": {"pattern": "x", "path": absolute},
                 "edit": {"path": absolute + "/a.py", "old_text": "hello", "new_text": "bye"}}[name]
    outcome = run(ToolBox(tree, allow_write=True), name, **arguments)
    assert outcome.ok is False and "absolute paths are not allowed" in outcome.content


def test_walks_never_follow_a_symbolic_link_out(tree: Path) -> None:
    toolbox = ToolBox(tree)
    assert "secret" not in run(toolbox, "grep", pattern="secret").content
    found = run(toolbox, "glob", pattern="**").content.split("\n")
    assert "out" in found and "out.py" in found  # listed as names, never entered or read
    assert not any(path.startswith("out/") for path in found)


# -- list ------------------------------------------------------------------------------------------------


def test_list_shows_sizes_kinds_and_links(tree: Path) -> None:
    assert run(ToolBox(tree), "list").content.split("\n") == [
        "blob.bin  7 bytes", "build/", "keep.log  6 bytes", f"out -> {tree.parent / 'outside'}",
        f"out.py -> {tree.parent / 'outside' / 'secret.py'}", "pipe  (a FIFO)", "src/", "top-only.txt  6 bytes", "x.log  6 bytes",
    ]
    assert run(ToolBox(tree), "list", path="src").content == "a.py  12 bytes\nsub/"


def test_walks_skip_git_and_unreadable_directories(tmp_path: Path) -> None:
    (tmp_path / ".git").mkdir()
    (tmp_path / ".git" / "config").write_text("hello\n")
    (tmp_path / "locked").mkdir()
    (tmp_path / "locked" / "a.txt").write_text("hello\n")
    (tmp_path / "b.txt").write_text("hello\n")
    (tmp_path / "locked").chmod(0)
    try:
        if os.access(tmp_path / "locked", os.R_OK):
            pytest.skip("running as root: a directory without permissions is still readable")
        assert run(ToolBox(tmp_path), "grep", pattern="hello").content == "b.txt:1: hello"
        assert run(ToolBox(tmp_path), "glob", pattern="**").content == "b.txt\nlocked/"
    finally:
        (tmp_path / "locked").chmod(0o755)
    assert run(ToolBox(tmp_path), "grep", pattern="hello").content == "b.txt:1: hello\nlocked/a.txt:1: hello"


def test_list_of_an_empty_directory_a_file_and_a_missing_path(tree: Path) -> None:
    (tree / "empty").mkdir()
    toolbox = ToolBox(tree)
    assert run(toolbox, "list", path="empty") == ToolOutcome(content="empty: the directory is empty", ok=True)
    assert run(toolbox, "list", path="keep.log") == ToolOutcome(content="Error: keep.log: Not a directory", ok=False)
    assert run(toolbox, "list", path="pipe") == ToolOutcome(content="Error: pipe: Not a directory", ok=False)
    assert run(toolbox, "list", path="nope") == ToolOutcome(content="Error: nope: No such file or directory", ok=False)


def test_names_that_are_not_utf8_come_out_as_text(tmp_path: Path) -> None:
    with open(os.path.join(os.fsencode(tmp_path), b"caf\xe9.txt"), "wb") as file:
        file.write(b"hello\n")
    toolbox = ToolBox(tmp_path)
    for name, arguments in (("list", {}), ("glob", {"pattern": "*.txt"}), ("grep", {"pattern": "hello"})):
        outcome = run(toolbox, name, **arguments)
        assert outcome.ok and "caf\ufffd.txt" in outcome.content
        outcome.content.encode("utf-8")  # the journal can hold it


def test_list_is_bounded(tmp_path: Path) -> None:
    for index in range(files.LIST_LIMIT + 5):
        (tmp_path / f"f{index:05}").write_text("")
    lines = run(ToolBox(tmp_path), "list").content.split("\n")
    assert len(lines) == files.LIST_LIMIT + 1
    assert lines[-1] == "[more entries not shown: narrow the search]"


# -- glob --------------------------------------------------------------------------------------------------


def test_glob_matches_relative_to_path_and_respects_gitignore(tree: Path) -> None:
    toolbox = ToolBox(tree)
    assert run(toolbox, "glob", pattern="**/*.py").content == "out.py\nsrc/a.py\nsrc/sub/b.py"
    assert run(toolbox, "glob", pattern="*.py", path="src").content == "src/a.py"
    assert run(toolbox, "glob", pattern="s?c/*").content == "src/a.py\nsrc/sub/"
    assert run(toolbox, "glob", pattern="*.[!p]*").content == "blob.bin\nkeep.log\ntop-only.txt"
    assert run(toolbox, "glob", pattern="*.zip") == ToolOutcome(content="no path matches *.zip", ok=True)
    assert run(toolbox, "glob", pattern="[z-a]").content.startswith("Error: [z-a]: not a valid pattern")
    assert run(toolbox, "glob", pattern="*", path="keep.log").content == "Error: keep.log: Not a directory"


@pytest.mark.parametrize(
    ("gitignore", "path", "is_directory", "expected"),
    [
        ("*.log", "a/b/x.log", False, True),
        ("*.log\n!keep.log", "a/keep.log", False, False),
        ("build/", "a/build", True, True),
        ("build/", "a/build", False, False),
        ("/build", "a/build", True, False),
        ("/build", "build", True, True),
        ("a/*.txt", "a/x.txt", False, True),
        ("a/*.txt", "b/a/x.txt", False, False),
        ("**/logs", "x/y/logs", True, True),
        ("logs/**", "logs/a/b", False, True),
        ("a/**/b", "a/x/y/b", False, True),
        ("a/**/b", "a/b", False, True),
        ("\\#hash", "#hash", False, True),
        ("# comment", "# comment", False, False),
        ("\\!bang", "!bang", False, True),
        ("trail   ", "trail", False, True),
        ("space\\ ", "space ", False, True),
        ("[ab]x", "bx", False, True),
        ("[!ab]x", "bx", False, False),
        ("[z-a]\n*.c", "x.c", False, True),  # a broken set is skipped, the rest still apply
    ],
)
def test_the_gitignore_subset(gitignore: str, path: str, is_directory: bool, expected: bool) -> None:
    assert ignored((("/r/", gitignore_rules(gitignore)),), "/r/" + path, is_directory) is expected


def test_glob_regex_keeps_stars_within_a_name() -> None:
    assert glob_regex("*.py", anywhere=False).match("a.py")
    assert not glob_regex("*.py", anywhere=False).match("src/a.py")
    assert glob_regex("*.py", anywhere=True).match("src/a.py")
    assert glob_regex("**/*.py", anywhere=False).match("a.py")


# -- grep --------------------------------------------------------------------------------------------------------


def test_grep_skips_ignored_binary_and_special_files(tree: Path) -> None:
    toolbox = ToolBox(tree)
    assert run(toolbox, "grep", pattern="hel+o").content == "keep.log:1: hello\nsrc/a.py:1: hello\ntop-only.txt:1: hello"
    assert run(toolbox, "grep", pattern="hello", ignore_case=True).content == (
        "keep.log:1: hello\nsrc/a.py:1: hello\nsrc/sub/b.py:1: HELLO again\ntop-only.txt:1: hello"
    )
    assert run(toolbox, "grep", pattern="o", glob="*.py").content == "src/a.py:1: hello\nsrc/a.py:2: world"
    assert run(toolbox, "grep", pattern="o", glob="sub/*.py", path="src", ignore_case=True).content == "src/sub/b.py:1: HELLO again"
    assert run(toolbox, "grep", pattern="world", path="src/a.py").content == "src/a.py:2: world"
    assert run(toolbox, "grep", pattern="nothing") == ToolOutcome(content="no matches", ok=True)


def test_grep_refuses_bad_patterns_and_special_files(tree: Path) -> None:
    toolbox = ToolBox(tree)
    assert run(toolbox, "grep", pattern="(").content.startswith("Error: (: not a valid pattern (missing ), unterminated subpattern")
    assert run(toolbox, "grep", pattern="x", path="pipe") == ToolOutcome(content="Error: pipe: is a FIFO, not a regular file", ok=False)
    assert run(toolbox, "grep", pattern="x", path="nope") == ToolOutcome(content="Error: nope: No such file or directory", ok=False)


def test_grep_output_is_bounded(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    (tmp_path / "many.txt").write_text("match\n" * 50 + "match " + "y" * 5000 + "\n")
    toolbox = ToolBox(tmp_path)
    assert run(toolbox, "grep", pattern="match", limit=3).content.split("\n") == [
        "many.txt:1: match", "many.txt:2: match", "many.txt:3: match", "[more matching lines not shown: narrow the search]",
    ]
    last = run(toolbox, "grep", pattern="y").content
    assert last == f"many.txt:51: match {'y' * (files.LINE_LIMIT - 6)} [line cut: {5006 - files.LINE_LIMIT} more characters]"
    monkeypatch.setattr(files, "GREP_FILE_LIMIT", 100)
    assert run(toolbox, "grep", pattern="match").content == "no matches\n[1 files over 0 MiB not searched: many.txt]"


def test_a_runaway_expression_is_stopped(tmp_path: Path) -> None:
    """The timer stops even one catastrophic match; run in a child so that a regression fails instead of hanging."""
    (tmp_path / "a.txt").write_text("a" * 40 + "b\n")
    script = (
        "import signal, sys; from pathlib import Path; from tiny_agent.agent.tools import files; "
        "from tiny_agent.agent.tools.toolbox import ToolBox; files.SEARCH_SECONDS = 0.5; "
        "before = signal.getsignal(signal.SIGALRM); "
        "print(ToolBox(Path(sys.argv[1])).execute('grep', {'pattern': '(a+)+$'}).content); "
        "print(signal.getsignal(signal.SIGALRM) is before, signal.getitimer(signal.ITIMER_REAL))"
    )
    env = {**os.environ, "PYTHONPATH": str(PROJECT_ROOT)}
    done = subprocess.run([sys.executable, "-c", script, str(tmp_path)], capture_output=True, text=True, timeout=120, env=env)
    assert done.stdout == "[search stopped after 0.5 s: narrow it]\nTrue (0.0, 0.0)\n", done.stderr


# -- never replayed ----------------------------------------------------------------------------------------------


class EditingModel:
    """Asks for an edit that doubles an x, and a grep; then answers."""

    def __call__(self, request: object) -> Reply:
        messages = request["messages"] if isinstance(request, dict) else []
        if messages and messages[-1]["role"] == "user":
            edit = json.dumps({"path": "counter.txt", "old_text": "x", "new_text": "xx"})
            grep = json.dumps({"pattern": "x+"})
            return Reply(body=replies.calls(("edit", edit), ("grep", grep), ids=["call_edit", "call_grep"]).body)
        return Reply(body=replies.answer("done").body)


@pytest.mark.parametrize("failpoint", ["before-tool:edit", "after-tool:edit", "after-tool:grep"])
def test_after_a_kill_edit_is_never_run_again_and_grep_is(tmp_path: Path, failpoint: str) -> None:
    workspace = tmp_path / "work"
    workspace.mkdir()
    (workspace / "counter.txt").write_text("x\n")
    env = {key: value for key, value in os.environ.items() if not key.startswith(("TINY_AGENT_", "OPENROUTER_", "OPENAI_"))}
    with LoopbackServer([EditingModel()] * 10) as server:
        env.update(PYTHONPATH=str(PROJECT_ROOT), TINY_AGENT_BASE_URL=server.base_url, TINY_AGENT_MODEL="test/model",
                   TINY_AGENT_SESSIONS_DIR=str(tmp_path / "sessions"), XDG_CONFIG_HOME=str(tmp_path / "config"))

        def tiny(*args: str, **more: str) -> subprocess.CompletedProcess[str]:
            command = [sys.executable, "-m", "tiny_agent", *args, "--allow-write"]
            return subprocess.run(command, cwd=workspace, env={**env, **more}, capture_output=True, text=True, timeout=120)

        crashed = tiny("run", "double the x", TINY_AGENT_FAILPOINT=failpoint)
        assert crashed.returncode == -signal.SIGKILL, crashed.stderr
        edited = (workspace / "counter.txt").read_text()
        (journal,) = (tmp_path / "sessions").glob("*.jsonl")
        resumed = tiny("resume", journal.name.split("_", 1)[1].removesuffix(".jsonl"))
        assert resumed.returncode == 0, resumed.stderr
    assert (workspace / "counter.txt").read_text() == edited == ("x\n" if failpoint == "before-tool:edit" else "xx\n")
    answers = {message.tool_call_id: message.content for message in read_journal(journal).transcript if type(message) is ToolMessage}
    if failpoint.endswith(":edit"):
        assert answers["call_edit"] == "Operation interrupted after execution status became unknown; the tool was not replayed."
    else:
        assert answers["call_edit"] == "edited counter.txt: replaced 1 occurrence (allowed by --allow-write)"
    assert answers["call_grep"] == f"counter.txt:1: {edited.strip()}"  # grep ran, or was replayed after the kill
