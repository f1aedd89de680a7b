"""The tools as the model meets them: confinement, regular files only, writes that ask first, bash unconfined."""

from __future__ import annotations

import io
import os
import socket
import sys
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import TypeVar

import pytest

from tiny_agent.agent.tools.toolbox import (
    DIFF_LINE_LIMIT,
    DIFF_WIDTH_LIMIT,
    READ_LIMIT,
    ApprovalDecision,
    TerminalApprover,
    ToolBox,
    WriteProposal,
    ask_on_terminal,
    printable,
    render_proposal,
    terminal_approver,
)
from tiny_agent.journal.tools import ToolOutcome

T = TypeVar("T")


def within(seconds: float, work: Callable[[], T]) -> T:
    """``work()``, or a failure after ``seconds``: a regression that blocks must fail, not hang the suite."""
    results: list[T] = []
    errors: list[BaseException] = []

    def target() -> None:
        try:
            results.append(work())
        except BaseException as error:  # re-raised in the test's thread below
            errors.append(error)

    thread = threading.Thread(target=target, daemon=True)
    thread.start()
    thread.join(seconds)
    if thread.is_alive():
        pytest.fail(f"still blocked after {seconds} s")
    if errors:
        raise errors[0]
    return results[0]


def read(toolbox: ToolBox, path: str) -> ToolOutcome:
    return within(5, lambda: toolbox.execute("read", {"path": path}))


def write(toolbox: ToolBox, path: str, content: str) -> ToolOutcome:
    return within(5, lambda: toolbox.execute("write", {"path": path, "content": content}))


class Recorder:
    """An approver that answers as told and keeps what it was shown."""

    def __init__(self, approved: bool) -> None:
        self.approved = approved
        self.proposals: list[WriteProposal] = []

    def __call__(self, proposal: WriteProposal) -> ApprovalDecision:
        self.proposals.append(proposal)
        reason = "approved by the user" if self.approved else "the user declined"
        return ApprovalDecision(approved=self.approved, reason=reason)


# -- read ---------------------------------------------------------------------------------


def test_read_returns_a_text_file(tmp_path: Path) -> None:
    (tmp_path / "notes.md").write_text("# Notes\n")
    assert read(ToolBox(tmp_path), "notes.md") == ToolOutcome(content="# Notes\n", ok=True)


def test_read_of_a_fifo_answers_at_once(tmp_path: Path) -> None:
    os.mkfifo(tmp_path / "pipe")
    assert read(ToolBox(tmp_path), "pipe") == ToolOutcome(content="Error: pipe: is a FIFO, not a regular file", ok=False)


def test_read_of_a_symlink_to_a_fifo_inside_answers_at_once(tmp_path: Path) -> None:
    os.mkfifo(tmp_path / "pipe")
    (tmp_path / "link").symlink_to("pipe")
    assert read(ToolBox(tmp_path), "link") == ToolOutcome(content="Error: link: is a FIFO, not a regular file", ok=False)


def test_read_of_a_directory_and_a_socket_is_refused(tmp_path: Path) -> None:
    (tmp_path / "folder").mkdir()
    server = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    server.bind(str(tmp_path / "sock"))
    try:
        toolbox = ToolBox(tmp_path)
        assert read(toolbox, "folder").content == "Error: folder: is a directory, not a regular file"
        assert read(toolbox, "sock").content == "Error: sock: is a socket, not a regular file"
    finally:
        server.close()


def test_read_of_a_device_is_refused(tmp_path: Path) -> None:
    try:
        os.mknod(tmp_path / "null", 0o600 | 0o020000, os.makedev(1, 3))
    except PermissionError:
        pytest.skip("cannot make a device node here (no CAP_MKNOD)")
    outcome = read(ToolBox(tmp_path), "null")
    assert outcome == ToolOutcome(content="Error: null: is a character device, not a regular file", ok=False)


def test_paths_that_leave_the_working_directory_are_refused(tmp_path: Path) -> None:
    root = tmp_path / "root"
    root.mkdir()
    (tmp_path / "secret.txt").write_text("outside")
    (root / "escape").symlink_to(tmp_path / "secret.txt")
    (root / "dir-escape").symlink_to(tmp_path)
    (root / "dev-null").symlink_to("/dev/null")
    toolbox = ToolBox(root)
    assert read(toolbox, "../secret.txt").content == "Error: ../secret.txt: leaves the working directory"
    assert read(toolbox, "escape").content == "Error: escape: leaves the working directory"
    assert read(toolbox, "dir-escape/secret.txt").content == "Error: dir-escape/secret.txt: leaves the working directory"
    assert read(toolbox, "dev-null").content == "Error: dev-null: leaves the working directory"
    assert read(toolbox, str(tmp_path / "secret.txt")).content.endswith(
        "absolute paths are not allowed; use a path relative to the working directory"
    )
    assert read(toolbox, "").content == "Error: path is empty or contains a NUL byte"
    assert read(toolbox, "a\x00b").content == "Error: path is empty or contains a NUL byte"


def test_a_symlink_that_stays_inside_is_followed(tmp_path: Path) -> None:
    (tmp_path / "real.txt").write_text("real")
    (tmp_path / "alias.txt").symlink_to("real.txt")
    assert read(ToolBox(tmp_path), "alias.txt") == ToolOutcome(content="real", ok=True)


def test_read_refuses_large_binary_and_missing_files(tmp_path: Path) -> None:
    (tmp_path / "big.txt").write_bytes(b"a" * (READ_LIMIT + 1))
    (tmp_path / "blob").write_bytes(b"\xff\xfe\x00")
    toolbox = ToolBox(tmp_path)
    assert read(toolbox, "big.txt").content == "Error: big.txt: larger than 256 KiB"
    assert read(toolbox, "blob").content == "Error: blob: not a UTF-8 text file"
    assert read(toolbox, "missing.txt").content == "Error: missing.txt: No such file or directory"


# -- write ---------------------------------------------------------------------------------


def test_without_flag_or_terminal_a_write_is_refused(tmp_path: Path) -> None:
    outcome = write(ToolBox(tmp_path), "sub/a.txt", "hello")
    assert outcome == ToolOutcome(
        content="Error: writing sub/a.txt was not approved: no terminal; use --allow-write", ok=False
    )
    assert not (tmp_path / "sub").exists()  # nothing, not even the directory, was made


def test_allow_write_writes_and_says_so(tmp_path: Path) -> None:
    outcome = write(ToolBox(tmp_path, allow_write=True), "sub/a.txt", "héllo\n")
    assert outcome == ToolOutcome(content="wrote 7 bytes to sub/a.txt (allowed by --allow-write)", ok=True)
    assert (tmp_path / "sub" / "a.txt").read_text() == "héllo\n"


def test_an_approved_write_shows_a_diff_first(tmp_path: Path) -> None:
    (tmp_path / "a.txt").write_text("one\ntwo\nthree\n")
    approver = Recorder(approved=True)
    outcome = write(ToolBox(tmp_path, approve=approver), "a.txt", "one\n2\nthree\n")
    assert outcome == ToolOutcome(content="wrote 12 bytes to a.txt (approved by the user)", ok=True)
    assert (tmp_path / "a.txt").read_text() == "one\n2\nthree\n"
    [proposal] = approver.proposals
    assert (proposal.path, proposal.exists, proposal.size_before, proposal.size_after) == ("a.txt", True, 14, 12)
    assert proposal.diff == "--- a/a.txt\n+++ b/a.txt\n@@ -1,3 +1,3 @@\n one\n-two\n+2\n three"


def test_a_new_file_is_proposed_as_a_diff_from_nothing(tmp_path: Path) -> None:
    approver = Recorder(approved=True)
    assert write(ToolBox(tmp_path, approve=approver), "new/b.txt", "x\ny\n").ok
    [proposal] = approver.proposals
    assert (proposal.exists, proposal.size_before, proposal.size_after) == (False, None, 4)
    assert proposal.diff == "--- /dev/null\n+++ b/new/b.txt\n@@ -0,0 +1,2 @@\n+x\n+y"


def test_a_declined_write_changes_nothing_and_is_an_error_result(tmp_path: Path) -> None:
    (tmp_path / "a.txt").write_text("old\n")
    outcome = write(ToolBox(tmp_path, approve=Recorder(approved=False)), "a.txt", "new\n")
    assert outcome == ToolOutcome(content="Error: writing a.txt was not approved: the user declined", ok=False)
    assert (tmp_path / "a.txt").read_text() == "old\n"


def test_allow_write_wins_over_the_approver(tmp_path: Path) -> None:
    approver = Recorder(approved=False)
    assert write(ToolBox(tmp_path, allow_write=True, approve=approver), "a.txt", "x").ok
    assert approver.proposals == []


def test_a_binary_or_large_file_gets_no_diff(tmp_path: Path) -> None:
    (tmp_path / "blob").write_bytes(b"\xff\x00")
    approver = Recorder(approved=False)
    toolbox = ToolBox(tmp_path, approve=approver)
    write(toolbox, "blob", "text")
    write(toolbox, "huge.txt", "a" * (READ_LIMIT + 1))
    binary, huge = approver.proposals
    assert (binary.diff, binary.no_diff_reason, binary.size_before) == (None, "the file is not UTF-8 text", 2)
    assert (huge.diff, huge.no_diff_reason) == (None, "the new content is larger than 256 KiB")


def test_lone_surrogates_are_an_error_result_and_nobody_is_asked(tmp_path: Path) -> None:
    approver = Recorder(approved=True)
    outcome = write(ToolBox(tmp_path, approve=approver), "a.txt", "bad \udc80 text")
    reason = "the content is not valid Unicode text (surrogates not allowed at 4)"
    assert outcome == ToolOutcome(content=f"Error: a.txt: {reason}", ok=False)
    assert approver.proposals == []
    assert not (tmp_path / "a.txt").exists()


def test_write_into_a_fifo_or_a_directory_is_refused_at_once(tmp_path: Path) -> None:
    os.mkfifo(tmp_path / "pipe")
    (tmp_path / "folder").mkdir()
    toolbox = ToolBox(tmp_path, allow_write=True)
    assert write(toolbox, "pipe", "x").content == "Error: pipe: is a FIFO, not a regular file"
    assert write(toolbox, "folder", "x").content == "Error: folder: is a directory, not a regular file"


def test_write_outside_the_working_directory_is_refused(tmp_path: Path) -> None:
    root = tmp_path / "root"
    root.mkdir()
    (root / "out").symlink_to(tmp_path)
    toolbox = ToolBox(root, allow_write=True)
    assert write(toolbox, "../x.txt", "x").content == "Error: ../x.txt: leaves the working directory"
    assert write(toolbox, "out/x.txt", "x").content == "Error: out/x.txt: leaves the working directory"
    assert not (tmp_path / "x.txt").exists()


def test_protected_paths_may_be_read_but_not_written(tmp_path: Path) -> None:
    (tmp_path / "sessions").mkdir()
    (tmp_path / "sessions" / "j.jsonl").write_text("kept\n")
    toolbox = ToolBox(tmp_path, allow_write=True, protected=[Path("sessions")])
    assert read(toolbox, "sessions/j.jsonl").content == "kept\n"
    outcome = write(toolbox, "sessions/j.jsonl", "forged\n")
    refusal = "sessions is kept by tiny-agent itself; the tools may read it but not change it"
    assert outcome.content == f"Error: sessions/j.jsonl: {refusal}"
    assert write(toolbox, "sessions/new.jsonl", "x").ok is False
    assert (tmp_path / "sessions" / "j.jsonl").read_text() == "kept\n"


def test_a_file_that_appears_while_the_user_decides_is_not_replaced(tmp_path: Path) -> None:
    def approve_after_someone_else_writes(proposal: WriteProposal) -> ApprovalDecision:
        (tmp_path / "race.txt").write_text("theirs")
        return ApprovalDecision(approved=True, reason="approved by the user")

    outcome = write(ToolBox(tmp_path, approve=approve_after_someone_else_writes), "race.txt", "ours")
    assert outcome == ToolOutcome(content="Error: race.txt: File exists", ok=False)
    assert (tmp_path / "race.txt").read_text() == "theirs"


def test_ctrl_c_while_asking_is_not_swallowed(tmp_path: Path) -> None:
    def interrupted(proposal: WriteProposal) -> ApprovalDecision:
        raise KeyboardInterrupt

    with pytest.raises(KeyboardInterrupt):
        ToolBox(tmp_path, approve=interrupted).execute("write", {"path": "a.txt", "content": "x"})
    assert not (tmp_path / "a.txt").exists()


# -- the terminal approver -------------------------------------------------------------------


PROPOSAL = WriteProposal(path="a.txt", exists=True, size_before=4, size_after=4, diff="--- a/a.txt\n+++ b/a.txt\n-old\n+new")


@pytest.mark.parametrize(
    ("typed", "approved", "reason"),
    [
        ("y\n", True, "approved by the user"),
        ("YES\n", True, "approved by the user"),
        ("\n", False, "the user declined"),
        ("n\n", False, "the user declined"),
        ("sure\n", False, "the user declined"),
        ("a\n", True, "approved by the user, always for this session"),
        ("", False, "the terminal closed before an answer"),
    ],
)
def test_the_terminal_approver_reads_y_or_no(typed: str, approved: bool, reason: str) -> None:
    shown = io.StringIO()
    decision = ask_on_terminal(PROPOSAL, answers=io.StringIO(typed), prompts=shown)
    assert decision == ApprovalDecision(approved=approved, reason=reason)
    assert shown.getvalue().startswith(
        "tiny-agent: the model asks to replace a.txt (4 bytes now, 4 bytes after)\n--- a/a.txt\n+++ b/a.txt\n-old\n+new\n"
        "Write a.txt? [y/N, a: always for this session] "
    )


def test_a_proposal_cannot_steer_the_terminal() -> None:
    sneaky = WriteProposal(
        path="a\x1b[2J.txt", exists=False, size_before=None, size_after=3, diff="+\x1b[1A\rWrite ok? \u202e[y/N]\u2028"
    )
    text = render_proposal(sneaky)
    assert "\x1b" not in text and "\r" not in text and "\u202e" not in text and "\u2028" not in text
    assert "a\\x1b[2J.txt" in text
    assert "+\\x1b[1A\\x0dWrite ok? \\u202e[y/N]\\u2028" in text
    assert printable("tab\tand ünïcode") == "tab\tand ünïcode"


def test_a_proposal_without_a_diff_says_why() -> None:
    proposal = WriteProposal(
        path="blob", exists=True, size_before=2, size_after=4, diff=None, no_diff_reason="the file is not UTF-8 text"
    )
    assert render_proposal(proposal).splitlines()[-1] == "(no diff shown: the file is not UTF-8 text)"


def test_long_diffs_and_long_lines_are_cut(tmp_path: Path) -> None:
    approver = Recorder(approved=False)
    content = "".join(f"line {number}\n" for number in range(500)) + "x" * 1000 + "\n"
    write(ToolBox(tmp_path, approve=approver), "long.txt", content)
    [proposal] = approver.proposals
    assert proposal.diff is not None
    lines = proposal.diff.split("\n")
    assert len(lines) == DIFF_LINE_LIMIT + 1
    assert lines[-1] == f"[diff truncated: {3 + 501 - DIFF_LINE_LIMIT} more lines]"
    approver = Recorder(approved=False)
    write(ToolBox(tmp_path, approve=approver), "wide.txt", "y" * 1000)
    wide = approver.proposals[0].diff
    assert wide is not None
    assert wide.split("\n")[-1] == "+" + "y" * (DIFF_WIDTH_LIMIT - 1) + f" [line cut: {1001 - DIFF_WIDTH_LIMIT} more characters]"


def test_no_terminal_no_approver(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr("sys.stdin", io.StringIO("y\n"))
    assert terminal_approver() is None


def test_a_terminal_gets_the_terminal_approver(monkeypatch: pytest.MonkeyPatch) -> None:
    class Terminal(io.StringIO):
        def isatty(self) -> bool:
            return True

    monkeypatch.setattr("sys.stdin", Terminal("y\n"))
    monkeypatch.setattr("sys.stderr", Terminal())
    approver = terminal_approver()
    assert isinstance(approver, TerminalApprover)
    monkeypatch.setattr("sys.stdin", Terminal("n\na\nn\n"))
    reasons = [approver(PROPOSAL).reason for _ in range(4)]
    assert reasons == [
        "the user declined",
        "approved by the user, always for this session",
        "approved: the user said always for this session",
        "approved: the user said always for this session",
    ]
    assert sys.stdin.read() == "n\n"


# -- bash without the sandbox ------------------------------------------------------------------


def unconfined(root: Path, **options: object) -> ToolBox:
    return ToolBox(root, allow_bash=True, sandbox="none", **options)  # type: ignore[arg-type]


def test_bash_is_off_unless_offered(tmp_path: Path) -> None:
    toolbox = ToolBox(tmp_path)
    assert [spec.name for spec in toolbox.specs()] == ["read", "write", "edit", "list", "glob", "grep"]
    assert toolbox.execute("bash", {"command": "true"}).content == "Error: unknown tool bash"


def test_unconfined_bash_says_so(tmp_path: Path) -> None:
    toolbox = unconfined(tmp_path)
    assert toolbox.sandbox_mode == "none"
    assert toolbox.unconfined_notice == (
        "bash is not sandboxed: the sandbox was turned off; a command can read and write anything you can, and use the network"
    )
    outcome = toolbox.execute("bash", {"command": "echo out; echo err >&2; exit 3"})
    assert outcome == ToolOutcome(content="[sandbox: none]\nout\nerr\n\n[exit status 3]", ok=False)


def test_unconfined_bash_still_gets_a_scrubbed_environment(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("TINY_AGENT_API_KEY", "sk-test-0123456789abcdef")
    monkeypatch.setenv("OPENAI_API_KEY", "sk-openai-0123456789abcdef")
    content = unconfined(tmp_path).execute("bash", {"command": "env"}).content
    assert "sk-" not in content
    assert "API_KEY" not in content


def test_the_environment_can_be_given(tmp_path: Path) -> None:
    toolbox = unconfined(tmp_path, environ={"PATH": os.environ["PATH"], "LANG": "C.UTF-8", "GITHUB_TOKEN": "ghp_secret"})
    content = toolbox.execute("bash", {"command": "echo $LANG-$GITHUB_TOKEN-$HOME"}).content
    assert content.splitlines()[1] == "C.UTF-8--"


def test_a_timeout_kills_the_whole_process_group(tmp_path: Path) -> None:
    toolbox = unconfined(tmp_path, bash_timeout=0.5)
    outcome = toolbox.execute("bash", {"command": "(sleep 1.5; echo late > late.txt) & sleep 30; echo done > done.txt"})
    assert outcome == ToolOutcome(content="[sandbox: none]\nError: command timed out after 0.5 s and was killed", ok=False)
    assert not (tmp_path / "done.txt").exists(), "the call returned when the command was killed, not when it ended"
    time.sleep(2)
    assert not (tmp_path / "late.txt").exists()


def test_a_process_that_leaves_the_group_cannot_hold_the_call_open(tmp_path: Path) -> None:
    """Without the sandbox ``setsid`` escapes the kill; the call still returns instead of waiting on its pipe."""
    toolbox = unconfined(tmp_path, bash_timeout=0.5)
    outcome = within(10, lambda: toolbox.execute("bash", {"command": "setsid sleep 3 & sleep 30"}))
    assert outcome.content.endswith("timed out after 0.5 s and was killed")


def test_output_is_capped(tmp_path: Path) -> None:
    outcome = unconfined(tmp_path).execute("bash", {"command": "head -c 70000 /dev/zero | tr '\\0' a"})
    assert outcome.content.endswith("\n[output truncated at 64 KiB]\n[exit status 0]")


def test_the_existing_constructor_still_works(tmp_path: Path) -> None:
    toolbox = ToolBox(tmp_path, allow_bash=False, bash_timeout=5.0)
    assert toolbox.root == tmp_path.resolve()
    assert toolbox.validate("read", {"path": 1}) == 'argument "path" is not a string'
    assert toolbox.validate("nope", {}) == "unknown tool nope"
