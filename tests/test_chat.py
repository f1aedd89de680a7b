"""`tiny-agent chat` driven through a pseudo-terminal, as a person would use it."""

from __future__ import annotations

import fcntl
import os
import pty
import select
import subprocess
import sys
import termios
import time
from pathlib import Path

import pytest
import replies
from conftest import PROJECT_ROOT

from tiny_agent.loopback import LoopbackServer, Reply
from tiny_agent.stores.journal import read_journal


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


def _env(home: Path) -> dict[str, str]:
    env = {key: value for key, value in os.environ.items() if not key.endswith("_API_KEY") and not key.startswith("TINY_AGENT_")}
    env.update(HOME=str(home), PYTHONPATH=str(PROJECT_ROOT), TERM="xterm", XDG_STATE_HOME=str(home / "state"))
    env["TINY_AGENT_SESSIONS_DIR"] = str(home / "sessions")
    return env


def test_chat_runs_each_line_and_answers_slash_commands(home: Path) -> None:
    script = [replies.answer("Hello there."), replies.read(), replies.answer("It is an example.")]
    with LoopbackServer(script) as server:
        args = [sys.executable, "-m", "tiny_agent", "chat", "--base-url", server.base_url, "--model", "m", "--retries", "1"]
        terminal = Terminal(args, home / "work", _env(home))
        terminal.read_until("› ".encode())
        terminal.type("hi\n")
        terminal.read_until(b"Hello there.")
        terminal.type("what is this?\n")
        terminal.read_until(b"It is an example.")
        terminal.type("/usage\n")
        terminal.read_until(b"cache hit rate")
        terminal.type("/tools\n")
        terminal.read_until(b"read ")
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


def test_ctrl_c_aborts_the_run_but_not_the_chat(home: Path) -> None:
    slow = Reply(body=replies.answer("too late").body, delay=30)
    with LoopbackServer([slow, replies.answer("Still here.")]) as server:
        args = [sys.executable, "-m", "tiny_agent", "chat", "--base-url", server.base_url, "--model", "m", "--retries", "1"]
        terminal = Terminal(args, home / "work", _env(home))
        terminal.read_until("› ".encode())
        terminal.type("take your time\n")
        deadline = time.monotonic() + 60
        while server.request_count == 0 and time.monotonic() < deadline:
            time.sleep(0.05)
        terminal.type("\x03")
        terminal.read_until(b"aborted")
        terminal.read_until("› ".encode())
        terminal.type("are you there?\n")
        terminal.read_until(b"Still here.")
        terminal.type("/exit\n")
        assert terminal.close() == 0
    (journal,) = (home / "sessions").glob("*.jsonl")
    text = journal.read_text()
    assert '"outcome":"aborted"' in text
    assert '"outcome":"completed"' in text
