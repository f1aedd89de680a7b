"""The ``tiny-agent`` command line: thin glue between typer and the modules that do the work.

Every failure a user can cause ends here as one line on stderr and a documented
exit code (docs/cli.md); no traceback ever reaches a terminal.  Modules that
talk HTTP are imported inside the commands that need them, so that ``replay``
and friends start without loading httpx.
"""

from __future__ import annotations

import os
import sys
from typing import NoReturn

import typer

EXIT_OK = 0
EXIT_FAILED = 1
"""A run or resume ended in a durable failure (provider error, rejected response)."""
EXIT_USAGE = 2
EXIT_DRIFT = 3
"""``audit`` found a stored response that today's seam normalizes differently."""
EXIT_INTERNAL = 70
EXIT_CORRUPT = 65
"""EX_DATAERR: a journal, provider body or input file is malformed."""
EXIT_NO_INPUT = 66
"""EX_NOINPUT: no such session or file."""
EXIT_TEMPFAIL = 75
"""EX_TEMPFAIL: another writer holds the session, or recovery is blocked."""
EXIT_INTERRUPTED = 130


class CliError(Exception):
    """A failure to report as one line on stderr with a specific exit code."""

    def __init__(self, message: str, exit_code: int) -> None:
        super().__init__(message)
        self.exit_code = exit_code


app = typer.Typer(
    add_completion=False,
    no_args_is_help=True,
    pretty_exceptions_enable=False,
    help="An event-sourced session journal for LLM agents: run, replay, audit and resume sessions.",
)


@app.callback()
def _commands() -> None:
    """An event-sourced session journal for LLM agents: run, replay, audit and resume sessions."""


def fail(message: str, exit_code: int) -> NoReturn:
    raise CliError(message, exit_code)


def main(argv: list[str] | None = None) -> NoReturn:
    try:
        result = app(args=argv, prog_name="tiny-agent", standalone_mode=False)
    except typer.TyperException as error:
        _die(f"USAGE: {error.format_message()} (see 'tiny-agent --help')", EXIT_USAGE)
    except CliError as error:
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
    # One line, a label first (an error code, or NOT_FOUND, USAGE, ...), so
    # scripts can match on it.
    print(message.replace("\n", " "), file=sys.stderr)
    sys.exit(exit_code)


def _quiet_stdout() -> None:
    devnull = os.open(os.devnull, os.O_WRONLY)
    os.dup2(devnull, sys.stdout.fileno())


# --------------------------------------------------------------------------
# Shared option types and helpers
# --------------------------------------------------------------------------

SessionsDirOption = typer.Option(
    None,
    "--sessions-dir",
    help="Where sessions live (default: $TINY_AGENT_SESSIONS_DIR, else ./sessions).",
    show_default=False,
)


def _resolve(reference: str, sessions_dir: str | None):  # -> Path
    from tiny_agent.store import AmbiguousSession, SessionNotFound, resolve_session, sessions_dir as directory_of

    try:
        return resolve_session(reference, directory_of(sessions_dir))
    except SessionNotFound as error:
        fail(f"NOT_FOUND: {error}", EXIT_NO_INPUT)
    except AmbiguousSession as error:
        fail(f"USAGE: {error}", EXIT_USAGE)


def _print_json(value: object) -> None:
    import msgspec

    sys.stdout.write(msgspec.json.encode(value).decode() + "\n")


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
    from tiny_agent.errors import CorruptionError
    from tiny_agent.journal import read_journal

    if as_json and messages:
        fail("USAGE: --json and --messages are exclusive", EXIT_USAGE)
    path = _resolve(session, sessions_dir)
    try:
        state = read_journal(path)
    except CorruptionError as error:
        if as_json:
            _print_json({"ok": False, "error": error.to_json()})
        fail(f"{error} [{path}]", EXIT_CORRUPT)
    except IsADirectoryError:
        fail(f"NOT_FOUND: {path} is a directory, not a journal", EXIT_NO_INPUT)
    except FileNotFoundError:
        fail(f"NOT_FOUND: {path}: no such file", EXIT_NO_INPUT)
    except OSError as error:
        fail(f"IO_ERROR: {path}: {error.strerror or error}", EXIT_NO_INPUT)
    if as_json:
        _print_json({"ok": True, "state": state.to_json()})
    elif messages:
        _print_json(state.activeContext)
    else:
        _print_human(state, path)


def _print_human(state, path) -> None:  # type: ignore[no-untyped-def]
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
        fail(f"EMPTY: {_input_name(source)} is empty (expected one JSON response body)", EXIT_CORRUPT)
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
        fail(f"MALFORMED_JSON: {_input_name(source)}: {outcome.reason}", EXIT_CORRUPT)
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
    except FileNotFoundError:
        fail(f"NOT_FOUND: {source}: no such file", EXIT_NO_INPUT)
    except IsADirectoryError:
        fail(f"NOT_FOUND: {source}: is a directory", EXIT_NO_INPUT)
    except OSError as error:
        fail(f"IO_ERROR: {source}: {error.strerror or error}", EXIT_NO_INPUT)


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


def _progress(line: str) -> None:
    sys.stderr.write(f"· {line}\n")
    sys.stderr.flush()


def _system_prompt(path: str | None) -> str:
    if path is None:
        return ""
    try:
        with open(path, encoding="utf-8") as file:
            return file.read()
    except FileNotFoundError:
        fail(f"NOT_FOUND: --system {path}: no such file", EXIT_NO_INPUT)
    except (OSError, UnicodeDecodeError) as error:
        fail(f"USAGE: --system {path}: cannot read it as UTF-8 text ({error})", EXIT_USAGE)


def _provider(base_url: str | None, model: str | None, fallback_model: str | None = None, require_key: bool = True):  # -> ProviderConfig
    from tiny_agent.provider import ProviderError, resolve_config

    try:
        return resolve_config(base_url, model or _env_model() or fallback_model, require_key=require_key)
    except ProviderError as error:
        fail(f"CONFIG: {error.message}", EXIT_USAGE)


def _env_model() -> str | None:
    return os.environ.get("TINY_AGENT_MODEL") or None


def _durability(value: str) -> str:
    if value not in ("fsync", "process"):
        fail(f"USAGE: --durability must be fsync or process, not {value!r}", EXIT_USAGE)
    return value


def _open_writer(path, durability: str):  # type: ignore[no-untyped-def]
    from tiny_agent.errors import CorruptionError
    from tiny_agent.journal import JournalError, JournalWriter, SessionLocked

    try:
        writer = JournalWriter.open(path, durability=durability)  # type: ignore[arg-type]
    except SessionLocked as error:
        fail(f"LOCKED: {error}", EXIT_TEMPFAIL)
    except CorruptionError as error:
        fail(f"{error} [{path}]", EXIT_CORRUPT)
    except JournalError as error:
        fail(f"USAGE: {error}", EXIT_USAGE)
    except OSError as error:
        fail(f"IO_ERROR: {path}: {error.strerror or error}", EXIT_NO_INPUT)
    if writer.repaired_tail is not None:
        _progress(f"cut a torn tail (an interrupted write) into {writer.repaired_tail.name}")
    return writer


def _drive(writer, runtime, action):  # type: ignore[no-untyped-def]
    """Run ``action`` (a Driver method) and always release the session afterwards."""
    from tiny_agent.agent import Driver
    from tiny_agent.provider import ProviderError

    driver = Driver(writer, runtime, report=_progress)
    try:
        return action(driver)
    except ProviderError as error:
        fail(f"CONFIG: {error.message}", EXIT_USAGE)
    finally:
        runtime.close()
        writer.close()


def _finish_command(result, writer, as_json: bool) -> None:  # type: ignore[no-untyped-def]
    from tiny_agent.store import session_id_of

    if as_json:
        _print_json(
            {
                "session": writer.state.header.id if writer.state else session_id_of(writer.path),
                "path": str(writer.path),
                "outcome": result.status,
                "final": result.final,
            }
        )
    elif result.status == "completed" and result.final is not None:
        sys.stdout.write(result.final.rstrip("\n") + "\n")
    if result.status == "failed":
        fail(f"FAILED: {result.reason} (the journal records it: {writer.path})", EXIT_FAILED)
    if result.status == "aborted":
        fail(f"INTERRUPTED: run aborted; the journal records it cleanly ({writer.path})", EXIT_INTERRUPTED)
    if result.status == "blocked":
        fail(f"BLOCKED: {result.reason}", EXIT_TEMPFAIL)


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
    as_json: bool = typer.Option(False, "--json", help='Print {"session","path","outcome","final"}.'),
) -> None:
    """Run one prompt to completion against a Chat Completions endpoint, journaling everything."""
    from pathlib import Path

    from tiny_agent.agent import build_runtime

    if not prompt.strip():
        fail("USAGE: the prompt is empty", EXIT_USAGE)
    durability = _durability(durability)
    provider = _provider(base_url, model)
    runtime = build_runtime(provider, system_prompt=_system_prompt(system), cwd=Path.cwd(), allow_bash=allow_bash)
    if session is not None:
        writer = _open_writer(_resolve(session, sessions_dir), durability)
        if writer.state.operation.__class__.__name__ != "IdleOperation":
            writer.close(seal=False)
            fail(f"BUSY: {session} has an unfinished operation; finish it with `tiny-agent resume {session}`", EXIT_TEMPFAIL)
    else:
        writer = _new_session(provider, sessions_dir, durability)
    result = _drive(writer, runtime, lambda driver: driver.run(prompt))
    _finish_command(result, writer, as_json)


def _new_session(provider, sessions_dir: str | None, durability: str):  # type: ignore[no-untyped-def]
    from pathlib import Path

    from tiny_agent.configuration import environment_identity
    from tiny_agent.store import create_session, sessions_dir as directory_of

    cwd = Path.cwd()
    fields = {
        "cwd": os.path.realpath(cwd),
        "provider": provider.provider_name,
        "model": provider.model,
        "environmentIdentity": environment_identity(cwd),
    }
    try:
        return create_session(directory_of(sessions_dir), fields, durability=durability)
    except OSError as error:
        fail(f"IO_ERROR: cannot create a session in {directory_of(sessions_dir)}: {error.strerror or error}", EXIT_NO_INPUT)


@app.command()
def demo(
    sessions_dir: str | None = SessionsDirOption,
) -> None:
    """Run a real session against a Chat Completions server on 127.0.0.1 (no network, no key), then replay it."""
    from pathlib import Path

    from tiny_agent.agent import build_runtime
    from tiny_agent.journal import read_journal
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
    _print_human(read_journal(writer.path), writer.path)
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
    as_json: bool = typer.Option(False, "--json", help="Machine-readable output (with --dry-run: the plan's JSON)."),
) -> None:
    """Finish a session that crashed: repair its tail, then plan, act and commit until it is idle."""
    from pathlib import Path

    from tiny_agent.agent import build_runtime

    if current_config is not None and not dry_run:
        fail("USAGE: --current-config only plans; add --dry-run", EXIT_USAGE)
    if abort and dry_run:
        fail("USAGE: --abort and --dry-run are exclusive", EXIT_USAGE)
    durability = _durability(durability)
    path = _resolve(session, sessions_dir)
    if dry_run:
        _plan_only(path, current_config, base_url, model, system, allow_bash, as_json)
        return
    writer = _open_writer(path, durability)
    provider = _provider(base_url, model, fallback_model=writer.state.header.model, require_key=False)
    runtime = build_runtime(provider, system_prompt=_system_prompt(system), cwd=Path.cwd(), allow_bash=allow_bash)
    if writer.state.operation.__class__.__name__ == "IdleOperation":
        writer.close()
        _say_nothing_to_do(as_json, path)
        return

    def finish_it(driver):  # type: ignore[no-untyped-def]
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


def _say_nothing_to_do(as_json: bool, path) -> None:  # type: ignore[no-untyped-def]
    if as_json:
        _print_json({"path": str(path), "outcome": "idle", "actions": 0})
    else:
        sys.stdout.write(f"nothing to do: {path} is idle (no open run)\n")


def _plan_only(path, current_config, base_url, model, system, allow_bash, as_json) -> None:  # type: ignore[no-untyped-def]
    from pathlib import Path

    import msgspec

    from tiny_agent.agent import build_runtime
    from tiny_agent.errors import CorruptionError
    from tiny_agent.journal import read_journal
    from tiny_agent.recovery import CurrentConfiguration, explain, plan_recovery

    try:
        state = read_journal(path)
    except CorruptionError as error:
        fail(f"{error} [{path}]", EXIT_CORRUPT)
    if current_config is not None:
        try:
            current = msgspec.json.decode(_read_input(current_config), type=CurrentConfiguration)
        except msgspec.DecodeError as error:
            fail(f"USAGE: --current-config {current_config}: {error}", EXIT_USAGE)
    else:
        provider = _provider(base_url, model, fallback_model=state.header.model, require_key=False)
        current = build_runtime(provider, system_prompt=_system_prompt(system), cwd=Path.cwd(), allow_bash=allow_bash).current()
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
    from tiny_agent.errors import CorruptionError

    path = _resolve(session, sessions_dir)
    try:
        report = audit_session(path)
    except CorruptionError as error:
        fail(f"{error} [{path}]", EXIT_CORRUPT)
    except OSError as error:
        fail(f"IO_ERROR: {path}: {error.strerror or error}", EXIT_NO_INPUT)
    if as_json:
        _print_json(report)
    else:
        from tiny_agent.render import audit_lines

        for line in audit_lines(report):
            sys.stdout.write(line + "\n")
    if report.drift:
        raise typer.Exit(EXIT_DRIFT)


def _progress_bar(label: str):  # type: ignore[no-untyped-def]
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
    from tiny_agent.catalog import known_lengths
    from tiny_agent.store import list_journals, sessions_dir as directory_of
    from tiny_agent.verify import verify as verify_journal

    directory = directory_of(sessions_dir)
    if all_sessions and sessions:
        fail("USAGE: give sessions or --all, not both", EXIT_USAGE)
    if not all_sessions and not sessions:
        fail("USAGE: name at least one session, or pass --all", EXIT_USAGE)
    paths = list_journals(directory) if all_sessions else [_resolve(reference, sessions_dir) for reference in sessions]
    if not paths:
        sys.stdout.write(f"no sessions in {directory}\n" if not as_json else "[]\n")
        return
    show = _progress_bar("verify") if len(paths) > 1 else None
    verdicts = []
    lengths: dict = {}
    for position, path in enumerate(paths, start=1):
        if path.parent not in lengths:
            lengths[path.parent] = known_lengths(path.parent)
        verdicts.append(verify_journal(path, lengths[path.parent].get(path.name)))
        if show is not None:
            show(position, len(paths))
    if as_json:
        _print_json(verdicts)
    else:
        labels = {"ok": "OK", "corrupt": "CORRUPT", "open-tail": "OPEN TAIL", "unsealed": "UNSEALED", "unreadable": "UNREADABLE"}
        for verdict in verdicts:
            sys.stdout.write(f"{labels[verdict.status]:<10}  {verdict.path}  {verdict.detail}\n")
    bad = [verdict for verdict in verdicts if verdict.status in ("corrupt", "unreadable")]
    if bad:
        fail(f"CORRUPT: {len(bad)} of {len(verdicts)} session(s) failed verification", EXIT_CORRUPT)


@app.command()
def sessions(
    as_json: bool = typer.Option(False, "--json", help="Print the list as a JSON array."),
    limit: int | None = typer.Option(None, "--limit", min=1, help="Show only the N newest sessions."),
    sessions_dir: str | None = SessionsDirOption,
) -> None:
    """List sessions, newest first: id, created, model, status, runs, first prompt, tokens."""
    import time

    from tiny_agent.catalog import list_sessions
    from tiny_agent.store import sessions_dir as directory_of

    directory = directory_of(sessions_dir)
    if not directory.is_dir():
        fail(f"NOT_FOUND: no sessions directory at {directory}", EXIT_NO_INPUT)
    rows = list_sessions(directory, limit, progress=_progress_bar("reading"))
    if as_json:
        _print_json(rows)
        return
    if not rows:
        sys.stdout.write(f"no sessions in {directory}\n")
        return
    table = [("session", "created (UTC)", "model", "status", "runs", "tokens", "first prompt")]
    for row in rows:
        created = time.strftime("%Y-%m-%d %H:%M", time.gmtime(row.created / 1000)) if row.created else "?"
        prompt = (row.prompt or row.error or "").replace("\n", " ")
        prompt = prompt if len(prompt) <= 48 else prompt[:45] + "..."
        table.append((row.session[:13], created, row.model or "?", row.status, str(row.runs), f"{row.tokens:,}", prompt))
    widths = [max(len(line[column]) for line in table) for column in range(len(table[0]))]
    for line in table:
        sys.stdout.write("  ".join(cell.ljust(width) for cell, width in zip(line, widths)).rstrip() + "\n")
