"""`tiny-agent chat` driven through a pseudo-terminal, as a person would use it."""

from __future__ import annotations

import fcntl
import os
import pty
import re
import select
import subprocess
import sys
import termios
import time
from pathlib import Path

import pytest
import replies
from conftest import PROJECT_ROOT

from tiny_agent.journal.transcript import ToolMessage
from tiny_agent.loopback import LoopbackServer, Reply
from tiny_agent.stores.journal import read_journal

PROMPT = "› ".encode()


class Terminal:
    """A child process on a pty: type lines, read what it shows."""

    def __init__(self, args: list[str], cwd: Path, env: dict[str, str]) -> None:
        self.master, slave = pty.openpty()
        # A session of its own with the pty as its controlling terminal, so ^C there is a SIGINT to it.
        self.process = subprocess.Popen(
            args, stdin=slave, stdout=slave, stderr=slave, cwd=cwd, env=env, close_fds=True,
            start_new_session=True, preexec_fn=lambda: fcntl.ioctl(0, termios.TIOCSCTTY, 0),
        )
        os.close(slave)
        self.seen = b""
        self.mark = 0
        """Where the last expected text ended: each read_until looks only after it, so expectations are met in order."""

    def read_until(self, needle: bytes, timeout: float = 60.0) -> bytes:
        """Wait for ``needle`` after the text expected last (never one shown earlier)."""
        deadline = time.monotonic() + timeout
        while needle not in self.seen[self.mark :]:
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                raise AssertionError(f"{needle!r} never appeared; the terminal shows:\n{self.seen.decode(errors='replace')}")
            ready, _, _ = select.select([self.master], [], [], remaining)
            if ready:
                try:
                    chunk = os.read(self.master, 65536)
                except OSError:
                    chunk = b""
                if not chunk:
                    raise AssertionError(f"the process ended before {needle!r}:\n{self.seen.decode(errors='replace')}")
                self.seen += chunk
        self.mark = self.seen.index(needle, self.mark) + len(needle)
        return self.seen

    def type(self, text: str) -> None:
        os.write(self.master, text.encode())

    def at_prompt(self, text: str) -> None:
        """Type ``text`` once the chat's prompt is back (typed earlier, it could reach a run instead of the prompt)."""
        self.read_until(PROMPT)
        self.type(text)

    def close(self, timeout: float = 60.0) -> int:
        """Wait for the process to end, reading what it still shows (a full pty would block it)."""
        deadline = time.monotonic() + timeout
        try:
            while self.process.poll() is None and time.monotonic() < deadline:
                ready, _, _ = select.select([self.master], [], [], 0.1)
                if ready:
                    try:
                        self.seen += os.read(self.master, 65536)
                    except OSError:
                        break
            return self.process.wait(timeout=max(0.1, deadline - time.monotonic()))
        finally:
            os.close(self.master)


@pytest.fixture()
def home(tmp_path: Path) -> Path:
    (tmp_path / "work").mkdir()
    (tmp_path / "work" / "README.md").write_text("# Example\n")
    return tmp_path


def chat(home: Path, server: LoopbackServer, *flags: str) -> Terminal:
    """``tiny-agent chat`` against ``server`` (model m, no retries) in the home's workspace."""
    args = [sys.executable, "-m", "tiny_agent", "chat", "--base-url", server.base_url, "--model", "m", "--retries", "0", *flags]
    return Terminal(args, home / "work", _env(home))


def _env(home: Path) -> dict[str, str]:
    env = {key: value for key, value in os.environ.items() if not key.endswith("_API_KEY") and not key.startswith("TINY_AGENT_")}
    env.update(HOME=str(home), PYTHONPATH=str(PROJECT_ROOT), TERM="xterm", XDG_STATE_HOME=str(home / "state"))
    env["TINY_AGENT_SESSIONS_DIR"] = str(home / "sessions")
    return env


def test_chat_runs_each_line_and_answers_slash_commands(home: Path) -> None:
    script = [replies.answer("Hello there."), replies.read(), replies.answer("It is an example.")]
    with LoopbackServer(script) as server:
        terminal = chat(home, server)
        terminal.at_prompt("hi\n")
        terminal.read_until(b"Hello there.")
        terminal.type("what is this?\n")
        terminal.read_until(b"It is an example.")
        terminal.type("/usage\n")
        terminal.read_until(b"cache hit rate")
        terminal.type("/tools\n")
        terminal.read_until(b"read ")
        terminal.read_until(b"bash is not offered (start chat with --allow-bash)")
        terminal.type("/replay\n")
        terminal.read_until(b"#5 tool read")
        terminal.read_until(b"It is an example.\r\n\xe2\x80\xba ")
        terminal.type("\x04")
        assert terminal.close() == 0
    (journal,) = (home / "sessions").glob("*.jsonl")
    state = read_journal(journal)
    assert state.runCount == 2
    assert state.sealed
    assert (home / "state" / "tiny-agent" / "chat_history").read_text().count("hi") >= 1


def _ask_and_wait(terminal: Terminal, server: LoopbackServer) -> None:
    """Type a prompt at the chat's prompt and wait until the server has the request."""
    terminal.at_prompt("take your time\n")
    deadline = time.monotonic() + 60
    while server.request_count == 0 and time.monotonic() < deadline:
        time.sleep(0.05)


def test_ctrl_c_aborts_the_run_but_not_the_chat(home: Path) -> None:
    slow = Reply(body=replies.answer("too late").body, delay=30)
    with LoopbackServer([slow, replies.answer("Still here.")]) as server:
        terminal = chat(home, server)
        _ask_and_wait(terminal, server)
        terminal.type("\x03")
        terminal.read_until(b"aborted")
        terminal.at_prompt("are you there?\n")
        terminal.read_until(b"Still here.")
        terminal.type("/exit\n")
        assert terminal.close() == 0
    (journal,) = (home / "sessions").glob("*.jsonl")
    text = journal.read_text()
    assert '"outcome":"aborted"' in text
    assert '"outcome":"completed"' in text


def test_sigterm_during_a_run_aborts_it_and_ends_the_chat_143(home: Path) -> None:
    slow = Reply(body=replies.answer("too late").body, delay=30)
    with LoopbackServer([slow]) as server:
        terminal = chat(home, server)
        _ask_and_wait(terminal, server)
        terminal.process.terminate()
        assert terminal.close() == 143, terminal.seen.decode(errors="replace")
    assert ABORT_NOTICE.search(terminal.seen) and b"TERMINATED: the run was aborted and the chat ends" in terminal.seen
    (journal,) = (home / "sessions").glob("*.jsonl")
    assert '"outcome":"aborted"' in journal.read_text()


ABORT_NOTICE = re.compile(rb"(\n|\r\x1b\[K)\xc2\xb7 abort requested")
"""The notice begins a line of its own: after a newline, or on the wait's line once it is cleared."""


def test_the_abort_notice_starts_its_own_line_after_streamed_text(home: Path) -> None:
    stalled = replies.stream("chat", replies.text_answer("Streaming a long answer, word by word, " * 20), stall_after=600, stall_for=30)
    with LoopbackServer([stalled, replies.answer("Still here.")]) as server:
        terminal = chat(home, server, "--stream")
        terminal.at_prompt("go\n")
        terminal.read_until(b"Streaming a long")
        terminal.type("\x03")
        terminal.read_until(b"aborted")
        terminal.at_prompt("/exit\n")
        assert terminal.close() == 0
    assert ABORT_NOTICE.search(terminal.seen), terminal.seen.decode(errors="replace")


def test_slash_commands(home: Path) -> None:
    script = [replies.answer("One."), replies.answer("Two."), replies.answer("The summary."), replies.answer("Fresh.")]
    with LoopbackServer(script) as server:
        terminal = chat(home, server)
        terminal.at_prompt("/help\n")
        for command in ("/help", "/model", "/clear", "/compact", "/cost", "/tools", "/replay", "/audit", "/exit"):
            terminal.read_until(command.encode())
        terminal.at_prompt("first\n")
        terminal.read_until(b"One.")
        terminal.at_prompt("/model other\n")
        terminal.read_until(b"the next turn asks other")
        terminal.at_prompt("second\n")
        terminal.read_until(b"Two.")
        terminal.at_prompt("/compact mention the numbers\n")
        terminal.read_until(b"compacted: the model's context went from 4 messages to")
        terminal.at_prompt("/cost\n")
        terminal.read_until(b"cache hit rate")
        terminal.read_until(b"cost: ")
        terminal.at_prompt("/tools\n")
        terminal.read_until(b"read ")
        terminal.at_prompt("/audit\n")
        terminal.read_until(b"totals")
        terminal.at_prompt("/clear\n")
        terminal.read_until(b"new session ")
        terminal.at_prompt("third\n")
        terminal.read_until(b"Fresh.")
        terminal.at_prompt("/replay\n")
        terminal.read_until(b"#1 user")
        terminal.at_prompt("/nosuch\n")
        terminal.read_until(b"unknown command /nosuch; /help lists them")
        terminal.at_prompt("/exit\n")
        assert terminal.close() == 0
        models = [request.body["model"] for request in server.requests]
        summary_request = server.requests[2].body["messages"][-1]["content"]
    assert models == ["m", "other", "other", "other"]
    assert summary_request.endswith("\n\nmention the numbers")
    first, second = sorted((home / "sessions").glob("*.jsonl"), key=lambda path: read_journal(path).runCount, reverse=True)
    state = read_journal(first)
    assert state.sealed and state.runCount == 2
    assert state.lastSnapshot is not None and "other" in state.lastSnapshot.routingIdentity
    assert '"type":"compactionStarted"' in first.read_text()
    assert [message.content for message in read_journal(second).transcript] == ["third", "Fresh."]
    handle = re.search(rb"new session ([0-9a-f]+)", terminal.seen)[1].decode()  # type: ignore[index]
    assert read_journal(second).header.id.rsplit("-", 1)[1].startswith(handle)


def test_a_write_approved_always_is_not_asked_again(home: Path) -> None:
    write_a = replies.calls(("write", '{"path":"a.txt","content":"A\\n"}'))
    write_b = replies.calls(("write", '{"path":"b.txt","content":"B\\n"}'))
    with LoopbackServer([write_a, write_b, replies.answer("Both written.")]) as server:
        terminal = chat(home, server)
        terminal.at_prompt("write two files\n")
        terminal.read_until(b"Write a.txt? [y/N, a: always for this session] ")
        terminal.type("a\n")
        terminal.read_until(b"Both written.")
        terminal.at_prompt("/exit\n")
        assert terminal.close() == 0
    assert b"Write b.txt?" not in terminal.seen
    assert (home / "work" / "a.txt").read_text() == "A\n" and (home / "work" / "b.txt").read_text() == "B\n"
    (journal,) = (home / "sessions").glob("*.jsonl")
    results = [message.content for message in read_journal(journal).transcript if isinstance(message, ToolMessage)]
    assert results == [
        "wrote 2 bytes to a.txt (approved by the user, always for this session)",
        "wrote 2 bytes to b.txt (approved: the user said always for this session)",
    ]


def test_after_an_empty_answer_the_next_line_follows_it(home: Path) -> None:
    empty = Reply(body=(PROJECT_ROOT / "fixtures" / "wire" / "llamacpp" / "empty-answer.json").read_bytes())
    with LoopbackServer([empty, replies.answer("Now an answer.")]) as server:
        terminal = chat(home, server)
        terminal.at_prompt("hi\n")
        terminal.read_until(b"(empty answer)")
        terminal.read_until(b"the model's answer was empty")
        terminal.at_prompt("again\n")
        terminal.read_until(b"Now an answer.")
        terminal.at_prompt("\x04")
        assert terminal.close() == 0
    (journal,) = (home / "sessions").glob("*.jsonl")
    roles = [type(message).__name__ for message in read_journal(journal).transcript]
    assert roles == ["UserMessage", "AssistantMessage", "UserMessage", "AssistantMessage"]


def test_ctrl_c_does_not_make_the_terminal_drop_output_while_the_chat_runs(home: Path) -> None:
    """Without NOFLSH a ^C discards what the terminal has not shown yet, which can cut a character (``^C�``)."""
    with LoopbackServer([]) as server:
        args = [sys.executable, "-m", "tiny_agent", "chat", "--base-url", server.base_url, "--model", "m"]
        terminal = Terminal(args, home / "work", _env(home))  # a new pty: NOFLSH off
        terminal.read_until(PROMPT)
        during = termios.tcgetattr(terminal.master)[3] & termios.NOFLSH
        terminal.type("/exit\n")
        terminal.process.wait(timeout=60)
        after = termios.tcgetattr(terminal.master)[3] & termios.NOFLSH
        assert terminal.close() == 0
    assert (bool(during), after) == (True, 0), "set while the chat runs, and put back"
