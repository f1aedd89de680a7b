"""``tiny-agent chat``: an interactive loop on one session, each line a run.

The session's writer is held for the whole chat (another process cannot
write it meanwhile).  Each line is one run, driven by the same loop as
``run``: Ctrl-C during a run aborts that run durably and returns to the
prompt; Ctrl-C at the prompt clears the line; Ctrl-D (or ``/exit``) leaves,
and the journal is sealed on the way out.
"""

from __future__ import annotations

import os
import sys
from pathlib import Path
from typing import TYPE_CHECKING, Final

from tiny_agent.cli.basics import Found, Where, progress
from tiny_agent.cli.driving import start
from tiny_agent.cli.writing import handle_of

if TYPE_CHECKING:
    from tiny_agent.agent.live import TerminalDisplay
    from tiny_agent.agent.loop import DriveResult, Runtime
    from tiny_agent.cli.declarations import Chat
    from tiny_agent.stores.journal import JournalWriter

PROMPT: Final = "› "
COMMANDS: Final = {
    "/replay": "the transcript so far",
    "/audit": "raw vs canonical for every model attempt",
    "/usage": "tokens so far and the cache hit rate",
    "/tools": "the tools the model may call, and how bash is confined",
    "/exit": "leave (Ctrl-D too)",
}


def chat(args: Chat) -> None:
    where = Where(args.stored)
    writer, endpoint, display, runtime = start(args.drive, where, args.session, args.continue_)
    progress(f"session {handle_of(writer, where.store)} · {endpoint.name} · {endpoint.model} · /exit or Ctrl-D to leave")
    try:
        _loop(writer, runtime, display, where)
    finally:
        runtime.close()
        writer.close()


def _loop(writer: JournalWriter, runtime: Runtime, display: TerminalDisplay | None, where: Where) -> None:
    history = _History()
    while True:
        try:
            line = input(PROMPT)
        except EOFError:
            sys.stdout.write("\n")
            break
        except KeyboardInterrupt:
            sys.stdout.write("\n")
            continue
        text = line.strip()
        if not text:
            continue
        if text.startswith("/"):
            if _slash(text, writer, runtime, where):
                break
            continue
        _one_run(writer, runtime, display, line)
    history.save()


def _one_run(writer: JournalWriter, runtime: Runtime, display: TerminalDisplay | None, prompt: str) -> None:
    from tiny_agent.agent.loop import Driver

    result = Driver(writer, runtime, report=progress).run(prompt)
    _show(result, display)


def _show(result: DriveResult, display: TerminalDisplay | None) -> None:
    shown_live = display is not None and result.final is not None and display.printed_text.strip() == result.final.strip()
    if result.final is not None and not shown_live:
        sys.stdout.write(result.final.rstrip("\n") + "\n")
    if result.cut_off:
        progress("the answer above was cut off by the model's token limit (raise it with --max-tokens)")
    if result.status == "failed":
        progress(f"the run failed: {result.reason}")
    elif result.status == "aborted":
        progress("the run was aborted; the journal records it (you can go on)")
    elif result.status == "blocked":
        progress(f"blocked: {result.reason}")
    sys.stdout.flush()


def _slash(text: str, writer: JournalWriter, runtime: Runtime, where: Where) -> bool:
    """Run a slash command; True to leave the chat."""
    from tiny_agent.oversight.render import transcript_lines, usage_summary

    command = text.split()[0]
    out = sys.stdout
    if command == "/exit":
        return True
    if command == "/replay":
        for line in transcript_lines(writer.state):
            out.write(line + "\n")
    elif command == "/audit":
        _audit(where.find(str(writer.path) if writer.path.suffix == ".jsonl" else writer.state.header.id))
    elif command == "/usage":
        out.write(f"usage: {usage_summary(writer.state.usage)}\n")
    elif command == "/tools":
        for spec in runtime.toolbox.specs():
            out.write(f"{spec.name:<6} {spec.description} (replay: {spec.replay})\n")
        mode = runtime.toolbox.sandbox_mode
        if mode is not None:
            out.write(f"bash runs {'inside bubblewrap' if mode == 'bubblewrap' else 'unconfined'}\n")
    else:
        known = ", ".join(COMMANDS)
        out.write(f"unknown command {command}; try {known}\n")
    out.flush()
    return False


def _audit(found: Found) -> None:
    from tiny_agent.oversight.audit import audit_chunks
    from tiny_agent.oversight.render import audit_lines

    for line in audit_lines(audit_chunks(found.chunks(), found.name)):
        sys.stdout.write(line + "\n")


class _History:
    """Readline editing and a history file in the per-user state directory (when readline is there).

    Importing readline is what turns on line editing for ``input()``; it
    also records each line entered, so saving is all that is left to do.
    """

    def __init__(self) -> None:
        try:
            import readline
        except ImportError:  # a Python built without readline: plain input() still works
            self._readline = None
            return
        self._readline = readline
        self._path = _history_path()
        if self._path.is_file():
            try:
                readline.read_history_file(self._path)
            except OSError:
                progress(f"could not read the chat history {self._path}; starting without it")

    def save(self) -> None:
        if self._readline is None:
            return
        try:
            self._path.parent.mkdir(mode=0o700, parents=True, exist_ok=True)
            self._readline.write_history_file(self._path)
            os.chmod(self._path, 0o600)
        except OSError:
            progress(f"could not save the chat history to {self._path}")


def _history_path() -> Path:
    state_home = os.environ.get("XDG_STATE_HOME") or ""
    base = Path(state_home) if os.path.isabs(state_home) else Path.home() / ".local" / "state"
    return base / "tiny-agent" / "chat_history"
