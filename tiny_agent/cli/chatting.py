"""``tiny-agent chat``: an interactive loop on one session (its writer held throughout), each line a run driven as by
``run``, and slash commands (docs/cli.md)."""

from __future__ import annotations

import os
import sys
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Final

import msgspec

from tiny_agent.cli.basics import Where, print_lines, progress
from tiny_agent.cli.driving import Started, compacted, found_of, new_session, runtime_for, show_answer, start, writer_handle
from tiny_agent.cli.settings import endpoint_for, parse_durability, recorded_target

if TYPE_CHECKING:
    from tiny_agent.agent.loop import DriveResult
    from tiny_agent.cli.declarations import Chat, Drive

PROMPT: Final = "› "


def chat(args: Chat) -> None:
    where = Where(args.stored)  # one store for the whole chat
    session = _Chat(args.drive, where, start(args.drive, where, args.session, args.continue_))
    progress(f"session {session.handle} · {session.endpoint.name} · {session.endpoint.model} · /help lists the commands")
    restore = _keep_output_on_interrupt()
    try:
        session.loop()
    finally:
        restore()
        session.runtime.close()
        session.writer.close()


def _keep_output_on_interrupt() -> Callable[[], None]:
    """Ctrl-C makes a terminal discard the output it has not shown yet (ISIG without NOFLSH): a character our
    next line was writing could lose its first byte (``^C�``).  NOFLSH while the chat runs; the settings back after."""
    try:
        import termios
    except ImportError:
        return lambda: None
    try:
        fd = sys.stdin.fileno()
        saved = termios.tcgetattr(fd)
        termios.tcsetattr(fd, termios.TCSANOW, [*saved[:3], saved[3] | termios.NOFLSH, *saved[4:]])
    except (termios.error, OSError, ValueError):  # not a terminal: nothing to keep
        return lambda: None
    return lambda: termios.tcsetattr(fd, termios.TCSANOW, saved)


class _Chat:
    """One chat: the session being written, what drives it, and the slash commands."""

    def __init__(self, options: Drive, where: Where, started: Started) -> None:
        self.options, self.where = options, where
        self.writer, self.endpoint, self.display, self.runtime = started
        self.commands: dict[str, tuple[Callable[[str], bool | None], str]] = {
            "/help": (self.help, "these commands"),
            "/model": (self.model, "NAME: the model of the next turn on (the journal records it); alone: the model now"),
            "/clear": (self.clear, "start a new session (this one is kept; its handle is said)"),
            "/compact": (self.compact, "[INSTRUCTIONS]: summarise the history so far, keeping the newest messages"),
            "/cost": (self.cost, "tokens so far, the cache hit rate, and the cost where prices are known"),
            "/usage": (self.cost, "the same as /cost"),
            "/tools": (self.tools, "the tools the model may call, and how bash is confined"),
            "/replay": (self.replay, "the transcript so far"),
            "/audit": (self.audit, "raw vs canonical for every model attempt"),
            "/exit": (lambda rest: True, "leave (Ctrl-D too)"),
        }

    @property
    def handle(self) -> str:
        return writer_handle(self.writer, self.where.store)

    def loop(self) -> None:
        save_history = _history()
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
            if text.startswith("/"):
                name, _, rest = text.partition(" ")
                command = self.commands.get(name)
                if command is None:
                    sys.stdout.write(f"unknown command {name}; /help lists them\n")
                elif command[0](rest.strip()):
                    break
                sys.stdout.flush()
            elif text:
                self.run(line)
        save_history()

    def run(self, prompt: str) -> None:
        from tiny_agent.agent.loop import Driver
        from tiny_agent.journal.state import IdleOperation

        driver = Driver(self.writer, self.runtime, report=progress, verbose=self.options.verbose)
        if type(driver.state.operation) is not IdleOperation:  # the provider could not be reached: that run first
            progress("finishing the open run first")
            self.show(driver.drive())
        if type(driver.state.operation) is IdleOperation:
            self.show(driver.run(prompt))

    def show(self, result: DriveResult) -> None:
        show_answer(result, self.display)
        if result.refused:
            progress("the model declined to answer (a refusal; you can go on)")
        elif result.status == "failed":
            progress(f"the run failed: {result.reason}")
        elif result.status == "aborted" and result.stopped_by == "terminate":
            from tiny_agent.errors import Terminated

            raise Terminated(f"the run was aborted and the chat ends; the journal records it cleanly (session {self.handle})")
        elif result.status == "aborted":
            progress("the run was aborted; the journal records it (you can go on)")
        elif result.unreachable:
            progress(f"{result.reason}; the run stays open: your next line tries it again first")
        elif result.status == "blocked":
            progress(f"blocked: {result.reason}")
        sys.stdout.flush()

    # -- the slash commands (each takes the rest of its line; True leaves the chat) --------------------

    def help(self, rest: str) -> None:
        width = max(len(name) for name in self.commands)
        print_lines(f"{name:<{width}}  {what}" for name, (_, what) in self.commands.items())

    def model(self, rest: str) -> None:
        if not rest:
            sys.stdout.write(f"model: {self.endpoint.model} ({self.endpoint.name})\n")
            return
        options = msgspec.structs.replace(self.options, model=rest)
        endpoint = endpoint_for(options, recorded_target(self.writer.state), require_key=True)
        runtime = runtime_for(options, endpoint, self.display, state=self.writer.state)
        runtime.toolbox.approve = self.runtime.toolbox.approve  # "always for this session" outlives a change of model
        self.runtime.close()
        self.options, self.endpoint, self.runtime = options, endpoint, runtime
        sys.stdout.write(f"the next turn asks {endpoint.model} ({endpoint.name}); its step's configuration records it\n")

    def clear(self, rest: str) -> None:
        from tiny_agent.agent.tools.toolbox import terminal_approver

        before, writer = self.handle, new_session(self.endpoint, self.where, parse_durability(self.options.durability))
        self.writer.close()
        self.writer = writer
        if self.runtime.toolbox.approve is not None:
            self.runtime.toolbox.approve = terminal_approver()  # a new session asks again
        sys.stdout.write(f"new session {self.handle} (session {before} is kept: `tiny-agent chat --session {before}`)\n")

    def compact(self, rest: str) -> None:
        from tiny_agent.agent.loop import Driver

        before = len(self.writer.state.activeContext)
        policy = self.runtime.compacting
        self.runtime.compacting = msgspec.structs.replace(policy, instructions=rest)
        try:
            result = Driver(self.writer, self.runtime, report=progress, verbose=self.options.verbose).compact()
        finally:
            self.runtime.compacting = policy
        if result.status == "completed":
            sys.stdout.write(compacted(before, self.writer) + "\n")
        elif result.status != "idle":
            self.show(result)

    def cost(self, rest: str) -> None:
        from tiny_agent.oversight.audit import audit_chunks
        from tiny_agent.oversight.cost import attempt_cost, cost_text, total
        from tiny_agent.oversight.render import usage_summary
        from tiny_agent.providers.userconfig import load_user_config

        found = found_of(self.writer, self.where)
        prices = load_user_config(os.environ).models
        cost = total(attempt_cost(attempt, prices) for attempt in audit_chunks(found.chunks(), found.name).attempts)
        sys.stdout.write(f"usage: {usage_summary(self.writer.state.usage)}\ncost: {cost_text(cost)}\n")

    def tools(self, rest: str) -> None:
        print_lines(f"{spec.name:<6} {spec.description} (replay: {spec.replay})" for spec in self.runtime.toolbox.specs())
        mode = self.runtime.toolbox.sandbox_mode
        confined = {None: "is not offered (start chat with --allow-bash)", "bubblewrap": "runs inside bubblewrap"}
        sys.stdout.write(f"bash {confined.get(mode, 'runs unconfined')}\n")

    def replay(self, rest: str) -> None:
        from tiny_agent.oversight.render import transcript_lines

        print_lines(transcript_lines(self.writer.state))

    def audit(self, rest: str) -> None:
        from tiny_agent.oversight.audit import audit_chunks
        from tiny_agent.oversight.render import audit_lines

        found = found_of(self.writer, self.where)
        print_lines(audit_lines(audit_chunks(found.chunks(), found.name)))


def _history() -> Callable[[], None]:
    """Readline editing (importing readline turns it on for ``input()``, and records each line) and a history file in
    the per-user state directory; returns what saves it.  A Python built without readline: plain input() still works."""
    try:
        import readline
    except ImportError:
        return lambda: None
    state_home = os.environ.get("XDG_STATE_HOME") or ""
    base = Path(state_home) if os.path.isabs(state_home) else Path.home() / ".local" / "state"
    path = base / "tiny-agent" / "chat_history"
    if path.is_file():
        try:
            readline.read_history_file(path)
        except OSError:
            progress(f"could not read the chat history {path}; starting without it")

    def save() -> None:
        try:
            path.parent.mkdir(mode=0o700, parents=True, exist_ok=True)
            readline.write_history_file(path)
            os.chmod(path, 0o600)
        except OSError:
            progress(f"could not save the chat history to {path}")

    return save
