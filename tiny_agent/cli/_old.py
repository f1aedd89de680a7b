"""The ``tiny-agent`` command line: thin glue between typer and the modules that do the work.

Every failure a user can cause is a :class:`tiny_agent.errors.TinyAgentError`
raised where it is found; ``main`` turns it into one line on stderr (its label
first) and the label's exit code, in one place.  No traceback ever reaches a
terminal.  Modules that talk HTTP are imported inside the commands that need
them, so that ``replay`` and friends start without loading httpx.
"""

from __future__ import annotations

import os
import sys
from pathlib import Path
from typing import TYPE_CHECKING, NoReturn

import typer

from tiny_agent.errors import (
    EXIT_CORRUPT,
    EXIT_INTERNAL,
    EXIT_INTERRUPTED,
    EXIT_OK,
    EXIT_USAGE,
    BlockedError,
    Busy,
    CorruptionError,
    DriftFound,
    EmptyInput,
    Interrupted,
    MalformedInput,
    RunFailed,
    StorageError,
    Terminated,
    TinyAgentError,
    UsageError,
    VerificationFailed,
    os_error,
)

if TYPE_CHECKING:
    from collections.abc import Callable

    from tiny_agent.agent import Driver, DriveResult, Runtime
    from tiny_agent.journal import Durability, JournalWriter
    from tiny_agent.provider import ProviderConfig, Timeouts
    from tiny_agent.state import SessionState
    from tiny_agent.store import FileStore

app = typer.Typer(
    add_completion=False,
    no_args_is_help=True,
    pretty_exceptions_enable=False,
    help="An event-sourced session journal for LLM agents: run, replay, audit and resume sessions.",
)


@app.callback()
def _commands() -> None:
    """An event-sourced session journal for LLM agents: run, replay, audit and resume sessions."""


def main(argv: list[str] | None = None) -> NoReturn:
    try:
        result = app(args=argv, prog_name="tiny-agent", standalone_mode=False)
    except typer.Exit as done:
        sys.exit(done.exit_code)
    except typer.TyperException as error:
        _die(f"USAGE: {error.format_message()} (see 'tiny-agent --help')", EXIT_USAGE)
    except TinyAgentError as error:
        _die(str(error), error.exit_code)
    except (KeyboardInterrupt, typer.Abort):
        _die("INTERRUPTED: stopped by the user", EXIT_INTERRUPTED)
    except BrokenPipeError:
        # The reader went away (e.g. `| head`); nothing left to say to it.
        _quiet_stdout()
        sys.exit(EXIT_OK)
    except Exception as error:  # the last line of defence: never show a traceback
        if os.environ.get("TINY_AGENT_DEBUG"):
            raise
        _die(f"INTERNAL: {type(error).__name__}: {error} (a bug; set TINY_AGENT_DEBUG=1 for details)", EXIT_INTERNAL)
    sys.exit(result if isinstance(result, int) else EXIT_OK)


def _die(message: str, exit_code: int) -> NoReturn:
    print(message.replace("\n", " "), file=sys.stderr)
    sys.exit(exit_code)


def _quiet_stdout() -> None:
    devnull = os.open(os.devnull, os.O_WRONLY)
    os.dup2(devnull, sys.stdout.fileno())


# --------------------------------------------------------------------------
# Shared options and helpers
# --------------------------------------------------------------------------

SessionsDirOption = typer.Option(
    None,
    "--sessions-dir",
    help="Where sessions live (default: $TINY_AGENT_SESSIONS_DIR, else ~/.local/share/tiny-agent/sessions).",
    show_default=False,
)


def _store(sessions_dir: str | None) -> FileStore:
    from tiny_agent.store import open_store

    return open_store(sessions_dir)


def _resolve(reference: str, sessions_dir: str | None) -> Path:
    session = _store(sessions_dir).resolve(reference)
    if session.path is None:
        raise UsageError(f"{session.name} is not a journal file")
    return session.path


def _print_json(value: object) -> None:
    import msgspec

    sys.stdout.buffer.write(msgspec.json.encode(value) + b"\n")
    sys.stdout.flush()


def _read_journal(path: Path) -> SessionState:
    from tiny_agent.journal import read_journal

    try:
        return read_journal(path)
    except OSError as error:
        raise os_error(error, str(path)) from None


def _corrupt(error: CorruptionError, path: Path, as_json: bool) -> NoReturn:
    """A refused journal: the one-line error on stderr, and with --json also the error object on stdout."""
    if as_json:
        _print_json({"ok": False, "error": error.to_json()})
    raise CorruptionError(error.code, error.line, error.seq, f"{error.reason} [{path}]") from None


# --------------------------------------------------------------------------
# replay
# --------------------------------------------------------------------------


@app.command()
def replay(
    session: str = typer.Argument(..., help="A journal path, a session id, or a unique prefix of one."),
    as_json: bool = typer.Option(False, "--json", help="Print the reduced state in the conformance shape."),
    messages: bool = typer.Option(False, "--messages", help="Print the Chat Completions messages the model sees next."),
    sessions_dir: str | None = SessionsDirOption,
) -> None:
    """Rebuild a session from its journal and show the transcript (or the state, or the next messages)."""
    if as_json and messages:
        raise UsageError("--json and --messages are exclusive")
    path = _resolve(session, sessions_dir)
    try:
        state = _read_journal(path)
    except CorruptionError as error:
        _corrupt(error, path, as_json)
    if as_json:
        _print_json({"ok": True, "state": state.to_json()})
    elif messages:
        _print_json(state.activeContext)
    else:
        _print_human(state, path)


def _print_human(state: SessionState, path: Path) -> None:
    from tiny_agent.render import footer_lines, transcript_lines

    size = path.stat().st_size
    out = sys.stdout
    for line in transcript_lines(state):
        out.write(line + "\n")
    for line in footer_lines(state, size):
        out.write(line + "\n")


# --------------------------------------------------------------------------
# normalize
# --------------------------------------------------------------------------


@app.command()
def normalize(
    source: str = typer.Argument(..., help="A file holding one Chat Completions response body, or - for stdin."),
) -> None:
    """Run the normalization seam on one provider response and show what the transcript would keep."""
    from tiny_agent.normalize import Accepted, normalize_body

    body = _read_input(source)
    if not body.strip():
        raise EmptyInput(f"{_input_name(source)} is empty (expected one JSON response body)")
    outcome = normalize_body(body)
    if isinstance(outcome, Accepted):
        _print_json(
            {
                "message": outcome.message,
                "stopReason": outcome.stop_reason,
                "usage": outcome.usage,
                "dropped": outcome.dropped,
            }
        )
        return
    if outcome.reason.startswith("response body is not JSON"):
        raise MalformedInput(f"{_input_name(source)}: {outcome.reason}")
    _print_json({"rejected": outcome.reason, "usage": outcome.usage})
    raise typer.Exit(EXIT_CORRUPT)


def _input_name(source: str) -> str:
    return "stdin" if source == "-" else source


def _read_input(source: str) -> bytes:
    if source == "-":
        return sys.stdin.buffer.read()
    try:
        with open(source, "rb") as file:
            return file.read()
    except OSError as error:
        raise os_error(error, source) from None


# --------------------------------------------------------------------------
# run, demo, resume: commands that drive a session
# --------------------------------------------------------------------------

ModelOption = typer.Option(None, "--model", help="Model id (default: $TINY_AGENT_MODEL).", show_default=False)
BaseUrlOption = typer.Option(
    None, "--base-url", help="Chat Completions base URL (default: $TINY_AGENT_BASE_URL, else OpenRouter).", show_default=False
)
SystemOption = typer.Option(None, "--system", help="A file holding the system prompt.", show_default=False)
AllowBashOption = typer.Option(False, "--allow-bash", help="Offer the bash tool (off by default).")
DurabilityOption = typer.Option(
    "fsync", "--durability", help="fsync: every commit survives power loss; process: it survives a crash (faster)."
)
ConnectTimeoutOption = typer.Option(
    None, "--connect-timeout", help="Seconds to wait for a connection (default: $TINY_AGENT_CONNECT_TIMEOUT, else 10).",
    show_default=False,
)
ReadTimeoutOption = typer.Option(
    None, "--read-timeout",
    help="Seconds to wait for a response to start or for more of a whole body (default: $TINY_AGENT_READ_TIMEOUT, else 600).",
    show_default=False,
)
StreamIdleTimeoutOption = typer.Option(
    None, "--stream-idle-timeout",
    help="Seconds a stream may stall between bytes (default: $TINY_AGENT_STREAM_IDLE_TIMEOUT, else 120).",
    show_default=False,
)


def _progress(line: str) -> None:
    sys.stderr.write(f"· {line}\n")
    sys.stderr.flush()


def _system_prompt(path: str | None) -> str:
    if path is None:
        return ""
    try:
        with open(path, encoding="utf-8") as file:
            return file.read()
    except UnicodeDecodeError as error:
        raise UsageError(f"--system {path}: not UTF-8 text ({error.reason} at byte {error.start})") from None
    except OSError as error:
        raise os_error(error, f"--system {path}") from None


def _provider(
    base_url: str | None,
    model: str | None,
    timeouts: Timeouts,
    fallback_model: str | None = None,
    require_key: bool = True,
) -> ProviderConfig:
    from tiny_agent.provider import resolve_config

    chosen = model or os.environ.get("TINY_AGENT_MODEL") or fallback_model
    return resolve_config(base_url, chosen, timeouts=timeouts, require_key=require_key)


def _timeouts(connect: float | None, read: float | None, stream_idle: float | None) -> Timeouts:
    """Flags first, then the environment, then the defaults (long: slow local models need them)."""
    from tiny_agent.provider import Timeouts

    defaults = Timeouts()
    return Timeouts(
        connect=_seconds("--connect-timeout", connect, "TINY_AGENT_CONNECT_TIMEOUT", defaults.connect),
        read=_seconds("--read-timeout", read, "TINY_AGENT_READ_TIMEOUT", defaults.read),
        stream_idle=_seconds("--stream-idle-timeout", stream_idle, "TINY_AGENT_STREAM_IDLE_TIMEOUT", defaults.stream_idle),
    )


def _seconds(flag: str, value: float | None, variable: str, default: float) -> float:
    if value is None:
        text = os.environ.get(variable)
        if not text:
            return default
        try:
            value = float(text)
        except ValueError:
            raise UsageError(f"${variable} must be a number of seconds, not {text!r}") from None
        flag = f"${variable}"
    if not value > 0:
        raise UsageError(f"{flag} must be a positive number of seconds, not {value:g}")
    return value


def _durability(value: str) -> Durability:
    if value == "fsync":
        return "fsync"
    if value == "process":
        return "process"
    raise UsageError(f"--durability must be fsync or process, not {value!r}")


def _open_writer(path: Path, durability: Durability) -> JournalWriter:
    from tiny_agent.journal import JournalWriter

    try:
        writer = JournalWriter.open(path, durability=durability)
    except CorruptionError as error:
        _corrupt(error, path, as_json=False)
    except OSError as error:
        raise os_error(error, str(path)) from None
    if writer.repaired_tail is not None:
        _progress(f"cut a torn tail (an interrupted write) into {writer.repaired_tail.name}")
    if writer.tightened_mode is not None:
        _progress(f"{path.name} was readable by others (mode {writer.tightened_mode:o}); it is 0600 again")
    return writer


def _drive(writer: JournalWriter, runtime: Runtime, action: Callable[[Driver], DriveResult]) -> DriveResult:
    """Run ``action`` (a Driver method) and always release the session afterwards.

    A closing seal that cannot be written (a full disk) does not hide the
    run's outcome: it is reported after the result, by :func:`_finish_command`.
    """
    from tiny_agent.agent import Driver
    from tiny_agent.journal import WriterPoisoned

    driver = Driver(writer, runtime, report=_progress)
    try:
        result = action(driver)
    finally:
        runtime.close()
        try:
            writer.close()
        except WriterPoisoned as error:
            _seal_failures.append(str(error))
    return result


_seal_failures: list[str] = []
"""Closing seals that could not be written in this process (reported after the run's outcome)."""


def _report_seal_failure() -> None:
    if _seal_failures:
        failure = _seal_failures.pop()
        raise StorageError(
            f"{failure}; the run's outcome above is durable, but its last line is not sealed: "
            "`tiny-agent resume` seals it once there is space"
        )


def _finish_command(result: DriveResult, writer: JournalWriter, as_json: bool) -> None:
    _report_outcome(result, writer, as_json)
    _report_seal_failure()


def _report_outcome(result: DriveResult, writer: JournalWriter, as_json: bool) -> None:
    if as_json:
        _print_json(
            {
                "session": writer.state.header.id,
                "path": str(writer.path),
                "outcome": result.status,
                "final": result.final,
                "reason": result.reason,
                "usage": writer.state.usage,
            }
        )
    elif result.status == "completed" and result.final is not None:
        sys.stdout.write(result.final.rstrip("\n") + "\n")
    if result.status == "failed":
        raise RunFailed(f"{result.reason} (the journal records it: {writer.path})")
    if result.status == "aborted":
        stopped = Terminated if result.stopped_by == "terminate" else Interrupted
        raise stopped(f"run aborted; the journal records it cleanly ({writer.path})")
    if result.status == "blocked":
        raise BlockedError(result.reason or "recovery is blocked")


@app.command()
def run(
    prompt: str = typer.Argument(..., help="What to ask."),
    session: str | None = typer.Option(None, "--session", help="Continue this idle session instead of starting one."),
    model: str | None = ModelOption,
    base_url: str | None = BaseUrlOption,
    system: str | None = SystemOption,
    sessions_dir: str | None = SessionsDirOption,
    allow_bash: bool = AllowBashOption,
    durability: str = DurabilityOption,
    connect_timeout: float | None = ConnectTimeoutOption,
    read_timeout: float | None = ReadTimeoutOption,
    stream_idle_timeout: float | None = StreamIdleTimeoutOption,
    as_json: bool = typer.Option(False, "--json", help='Print {"session","path","outcome","final","reason","usage"}.'),
) -> None:
    """Run one prompt to completion against a Chat Completions endpoint, journaling everything."""
    from tiny_agent.agent import build_runtime
    from tiny_agent.state import IdleOperation

    if not prompt.strip():
        raise UsageError("the prompt is empty")
    chosen_durability = _durability(durability)
    provider = _provider(base_url, model, _timeouts(connect_timeout, read_timeout, stream_idle_timeout))
    runtime = build_runtime(provider, system_prompt=_system_prompt(system), cwd=Path.cwd(), allow_bash=allow_bash)
    if session is not None:
        writer = _open_writer(_resolve(session, sessions_dir), chosen_durability)
        if type(writer.state.operation) is not IdleOperation:
            writer.close(seal=False)
            raise Busy(f"{session} has an unfinished operation; finish it with `tiny-agent resume {session}`")
    else:
        writer = _new_session(provider, sessions_dir, chosen_durability)
    result = _drive(writer, runtime, lambda driver: driver.run(prompt))
    _finish_command(result, writer, as_json)


def _new_session(provider: ProviderConfig, sessions_dir: str | None, durability: Durability) -> JournalWriter:
    from tiny_agent.configuration import environment_identity

    cwd = Path.cwd()
    store = _store(sessions_dir)
    try:
        writer = store.create(
            cwd=os.path.realpath(cwd),
            provider=provider.provider_name,
            model=provider.model,
            environment_identity=environment_identity(cwd),
            durability=durability,
        )
    except OSError as error:
        raise os_error(error, f"cannot create a session in {store.label}") from None
    handle = store.handles().get(writer.state.header.id, writer.state.header.id)
    _progress(f"session {handle} ({writer.path})")
    return writer


@app.command()
def demo(
    sessions_dir: str | None = SessionsDirOption,
) -> None:
    """Run a real session against a Chat Completions server on 127.0.0.1 (no network, no key), then replay it."""
    from tiny_agent.agent import build_runtime
    from tiny_agent.loopback import DEMO_MODEL, DEMO_PROMPT, LoopbackServer, demo_script
    from tiny_agent.provider import ProviderConfig

    with LoopbackServer(demo_script()) as server:
        provider = ProviderConfig(server.base_url, DEMO_MODEL)
        _progress(f"a scripted Chat Completions server is listening on {server.base_url}")
        runtime = build_runtime(provider, system_prompt="", cwd=Path.cwd())
        writer = _new_session(provider, sessions_dir, "fsync")
        _progress(f"new session {writer.path}")
        _progress(f"prompt: {DEMO_PROMPT}")
        result = _drive(writer, runtime, lambda driver: driver.run(DEMO_PROMPT))
        requests = server.request_count
    if result.status != "completed":
        _finish_command(result, writer, False)
    out = sys.stdout
    out.write(f"\n=== replay of {writer.path} ===\n\n")
    _print_human(_read_journal(writer.path), writer.path)
    out.write(
        f"\nThe provider was asked {requests} times; each response is in the journal twice: raw, exactly as\n"
        f"received (with its reasoning, refusal and annotations), and canonical, as the seam kept it.\n"
        f"Look closer:\n"
        f"  tiny-agent replay {writer.path} --json\n"
        f"  tiny-agent audit {writer.path}\n"
        f"  tiny-agent verify {writer.path}\n"
    )


@app.command()
def resume(
    session: str = typer.Argument(..., help="A journal path, a session id, or a unique prefix of one."),
    abort: bool = typer.Option(False, "--abort", help="Abort the open operation instead of finishing it."),
    dry_run: bool = typer.Option(False, "--dry-run", help="Print the next planned action; write nothing."),
    current_config: str | None = typer.Option(
        None, "--current-config", help="With --dry-run: plan against this configuration (the planner fixtures' `current` JSON)."
    ),
    model: str | None = ModelOption,
    base_url: str | None = BaseUrlOption,
    system: str | None = SystemOption,
    sessions_dir: str | None = SessionsDirOption,
    allow_bash: bool = AllowBashOption,
    durability: str = DurabilityOption,
    connect_timeout: float | None = ConnectTimeoutOption,
    read_timeout: float | None = ReadTimeoutOption,
    stream_idle_timeout: float | None = StreamIdleTimeoutOption,
    as_json: bool = typer.Option(False, "--json", help="Machine-readable output (with --dry-run: the plan's JSON)."),
) -> None:
    """Finish a session that crashed: repair its tail, then plan, act and commit until it is idle."""
    from tiny_agent.agent import build_runtime
    from tiny_agent.state import IdleOperation

    if current_config is not None and not dry_run:
        raise UsageError("--current-config only plans; add --dry-run")
    if abort and dry_run:
        raise UsageError("--abort and --dry-run are exclusive")
    chosen_durability = _durability(durability)
    timeouts = _timeouts(connect_timeout, read_timeout, stream_idle_timeout)
    path = _resolve(session, sessions_dir)
    if dry_run:
        _plan_only(path, current_config, base_url, model, system, allow_bash, as_json)
        return
    writer = _open_writer(path, chosen_durability)
    try:
        provider = _provider(base_url, model, timeouts, fallback_model=writer.state.header.model, require_key=False)
    except TinyAgentError:
        writer.close(seal=False)
        raise
    runtime = build_runtime(provider, system_prompt=_system_prompt(system), cwd=Path.cwd(), allow_bash=allow_bash)
    if type(writer.state.operation) is IdleOperation:
        writer.close()
        _say_nothing_to_do(as_json, path)
        return

    def finish_it(driver: Driver) -> DriveResult:
        if abort:
            driver.abort()
        return driver.drive()

    result = _drive(writer, runtime, finish_it)
    if result.status == "idle" and result.actions == 0:
        _say_nothing_to_do(as_json, path)
        return
    if abort and result.status == "aborted" and not result.interrupted:
        _progress("session is idle again (aborted, as asked)")
        if as_json:
            _print_json({"path": str(path), "outcome": "aborted", "actions": result.actions})
        return
    if not as_json and result.status in ("completed", "aborted", "failed"):
        _progress(f"session is idle again ({result.status})")
    _finish_command(result, writer, as_json)


def _say_nothing_to_do(as_json: bool, path: Path) -> None:
    if as_json:
        _print_json({"path": str(path), "outcome": "idle", "actions": 0})
    else:
        sys.stdout.write(f"nothing to do: {path} is idle (no open run)\n")


def _plan_only(
    path: Path,
    current_config: str | None,
    base_url: str | None,
    model: str | None,
    system: str | None,
    allow_bash: bool,
    as_json: bool,
) -> None:
    import msgspec

    from tiny_agent.agent import build_runtime
    from tiny_agent.recovery import CurrentConfiguration, explain, plan_recovery

    try:
        state = _read_journal(path)
    except CorruptionError as error:
        _corrupt(error, path, as_json)
    if current_config is not None:
        try:
            current = msgspec.json.decode(_read_input(current_config), type=CurrentConfiguration)
        except msgspec.DecodeError as error:
            raise UsageError(f"--current-config {current_config}: {error}") from None
    else:
        provider = _provider(base_url, model, _timeouts(None, None, None), fallback_model=state.header.model, require_key=False)
        runtime = build_runtime(provider, system_prompt=_system_prompt(system), cwd=Path.cwd(), allow_bash=allow_bash)
        current = runtime.current()
    plan = plan_recovery(state, current)
    if as_json:
        _print_json(plan)
    else:
        sys.stdout.write(f"next: {explain(plan, state)}\n")


# --------------------------------------------------------------------------
# audit, verify, sessions
# --------------------------------------------------------------------------


@app.command()
def audit(
    session: str = typer.Argument(..., help="A journal path, a session id, or a unique prefix of one."),
    as_json: bool = typer.Option(False, "--json", help="Print the whole audit as one JSON document."),
    sessions_dir: str | None = SessionsDirOption,
) -> None:
    """Show what each provider response was, what the seam kept, what it cost, and any drift (exit 3)."""
    from tiny_agent.audit import audit as audit_session

    path = _resolve(session, sessions_dir)
    try:
        report = audit_session(path)
    except CorruptionError as error:
        _corrupt(error, path, as_json)
    except OSError as error:
        raise os_error(error, str(path)) from None
    if as_json:
        _print_json(report)
    else:
        from tiny_agent.render import audit_lines

        for line in audit_lines(report):
            sys.stdout.write(line + "\n")
    if report.drift:
        numbers = ", ".join(str(attempt.number) for attempt in report.attempts if attempt.drift)
        raise DriftFound(f"attempt(s) {numbers} of {path}: the journal's canonical entries differ from today's seam")


def _progress_bar(label: str) -> Callable[[int, int], None] | None:
    """A one-line counter on stderr when it is a terminal; silent otherwise."""
    if not sys.stderr.isatty():
        return None

    def show(done: int, total: int) -> None:
        end = "\n" if done == total else ""
        sys.stderr.write(f"\r{label} {done}/{total}{end}")
        sys.stderr.flush()

    return show


@app.command()
def verify(
    sessions: list[str] = typer.Argument(None, help="Journal paths, session ids or unique prefixes.", show_default=False),
    all_sessions: bool = typer.Option(False, "--all", help="Verify every session in the sessions directory."),
    as_json: bool = typer.Option(False, "--json", help="Print one JSON verdict per session, as an array."),
    sessions_dir: str | None = SessionsDirOption,
) -> None:
    """Check the seal chain and every reducer rule of one, several or all sessions (exit 65 if any is corrupt)."""
    from tiny_agent.store import list_journals
    from tiny_agent.store import sessions_dir as directory_of
    from tiny_agent.verify import verdict_lines, verify_many

    directory = directory_of(sessions_dir)
    if all_sessions and sessions:
        raise UsageError("give sessions or --all, not both")
    if not all_sessions and not sessions:
        raise UsageError("name at least one session, or pass --all")
    paths = list_journals(directory) if all_sessions else [_resolve(reference, sessions_dir) for reference in sessions]
    if not paths:
        sys.stdout.write(f"no sessions in {directory}\n" if not as_json else "[]\n")
        return
    verdicts = verify_many(paths, _progress_bar("verify") if len(paths) > 1 else None)
    if as_json:
        _print_json(verdicts)
    else:
        for line in verdict_lines(verdicts):
            sys.stdout.write(line + "\n")
    bad = [verdict for verdict in verdicts if verdict.status in ("corrupt", "unreadable")]
    if bad:
        raise VerificationFailed(f"{len(bad)} of {len(verdicts)} session(s) failed verification")


@app.command()
def sessions(
    as_json: bool = typer.Option(False, "--json", help="Print the list as a JSON array."),
    limit: int | None = typer.Option(None, "--limit", min=1, help="Show only the N newest sessions."),
    all_sessions: bool = typer.Option(False, "--all", help="List the sessions of every directory, not only this one's."),
    sessions_dir: str | None = SessionsDirOption,
) -> None:
    """List this directory's sessions, newest first: handle, created, model, status, runs, tokens, first prompt."""
    from tiny_agent.catalog import list_sessions
    from tiny_agent.render import sessions_table

    store = _store(sessions_dir)
    here = None if all_sessions else os.path.realpath(Path.cwd())
    rows = list_sessions(store.directory, limit, progress=_progress_bar("reading"), cwd=here)
    if as_json:
        _print_json(rows)
        return
    if not rows:
        where = "" if all_sessions else f" made in {here} (--all lists every directory's)"
        sys.stdout.write(f"no sessions{where} in {store.label}\n")
        return
    for line in sessions_table(rows, show_cwd=all_sessions):
        sys.stdout.write(line + "\n")

