"""Commands that drive a session: run, demo, resume, compact; and opening a session to write it, whatever the store
(shared with chat).  A journal file is opened through its checkpoint when one checks out; a database's session is folded
from its rows under the writer's lock."""

from __future__ import annotations

import os
import sys
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, NamedTuple

from tiny_agent.cli.basics import Found, Where, corrupt, handle_of, print_json, progress, read_input
from tiny_agent.cli.declarations import Drive
from tiny_agent.cli.settings import (
    compacting_for,
    endpoint_for,
    limits_for,
    parse_durability,
    policy_for,
    recorded_options,
    recorded_target,
    system_prompt,
)
from tiny_agent.errors import (
    BlockedError,
    Busy,
    CorruptionError,
    Interrupted,
    Locked,
    Refused,
    RunFailed,
    StepLimitReached,
    StorageError,
    Terminated,
    UsageError,
    VerificationFailed,
    os_error,
)
from tiny_agent.oversight.render import counted

if TYPE_CHECKING:
    from tiny_agent.agent.live import TerminalDisplay
    from tiny_agent.agent.loop import Driver, DriveResult, Runtime
    from tiny_agent.cli.declarations import Compact, Demo, Resume, Run
    from tiny_agent.journal.state import SessionState
    from tiny_agent.providers.endpoint import Endpoint
    from tiny_agent.stores.base import Store
    from tiny_agent.stores.journal import Durability, JournalWriter


def _drive(
    writer: JournalWriter, runtime: Runtime, action: Callable[[Driver], DriveResult], verbose: bool = False
) -> tuple[DriveResult, str | None]:
    """Run ``action`` (a Driver method), always release the session, and say if the closing seal failed (a full disk):
    the caller reports the outcome first, then the seal."""
    from tiny_agent.agent.loop import Driver
    from tiny_agent.stores.journal import WriterPoisoned

    driver = Driver(writer, runtime, report=progress, verbose=verbose)
    seal_failure: str | None = None
    try:
        result = action(driver)
    finally:
        runtime.close()
        try:
            writer.close()
        except WriterPoisoned as error:
            seal_failure = str(error)
    return result, seal_failure


def _finish(
    result: DriveResult,
    writer: JournalWriter,
    as_json: bool,
    seal_failure: str | None,
    display: TerminalDisplay | None,
    store: Store,
) -> None:
    """Print the outcome (the answer on stdout), then raise what the exit code must say."""
    handle = writer_handle(writer, store)
    if as_json:
        print_json(
            {
                "session": writer.state.header.id,
                "handle": handle,
                "path": str(writer.path),
                "outcome": result.status,
                "refused": result.refused,
                "final": result.final,
                "reason": result.reason,
                "usage": writer.state.usage,
            }
        )
    else:
        if result.status == "completed" or result.final is not None:
            show_answer(result, display)
        if result.status == "completed" and result.reason:
            progress(f"completed, but {result.reason}")
    if seal_failure is not None:
        raise StorageError(
            f"{seal_failure}; the outcome above is durable, but the journal's last line is not sealed: "
            f"`tiny-agent resume {handle}` seals it once there is space"
        )
    _raise_for(result, handle)


def show_answer(result: DriveResult, display: TerminalDisplay | None) -> None:
    """The final answer on stdout unless the live display printed it already; an empty one is said on stderr."""
    final = result.final
    if final is not None and not final.strip() and not result.refused:
        progress("(empty answer)")
    elif final is not None and (display is None or display.printed_text.strip() != final.strip()):
        sys.stdout.write(final.rstrip("\n") + "\n")


def _raise_for(result: DriveResult, handle: str) -> None:
    if result.refused:
        raise Refused(f"the model declined to answer; its refusal is the answer (session {handle})")
    if result.status == "failed":
        error = StepLimitReached if result.step_limit else RunFailed
        hint = " (raise it with --max-tokens)" if result.cut_off else ""
        raise error(f"{result.reason}{hint} (session {handle}; `tiny-agent replay {handle}` shows it)")
    if result.unreachable:
        retry = f"`tiny-agent resume {handle}` tries again once the provider is up (or `--abort`s the run)"
        raise BlockedError(f"{result.reason}; the run stays open: {retry}")
    if result.status == "aborted":
        stopped = Terminated if result.stopped_by == "terminate" else Interrupted
        raise stopped(f"run {result.reason}; the journal records it cleanly (session {handle})")
    if result.status == "blocked":
        raise BlockedError(result.reason or "recovery is blocked")


def _read_prompt(prompt: str) -> str:
    """The prompt as UTF-8 text (``-`` reads it from stdin); bad bytes are a usage error, before anything is written."""
    if prompt == "-":
        data = read_input("-")
        try:
            prompt = data.decode("utf-8")
        except UnicodeDecodeError as error:
            raise UsageError(f"the prompt on stdin is not UTF-8 text (byte {error.start})") from None
    try:
        prompt.encode("utf-8")
    except UnicodeEncodeError:
        raise UsageError("the prompt is not valid UTF-8 text (check the shell's encoding)") from None
    if not prompt.strip():
        raise UsageError("the prompt is empty")
    return prompt


def runtime_for(
    options: Drive,
    endpoint: Endpoint,
    display: TerminalDisplay | None,
    summary: str | None = None,
    state: SessionState | None = None,
) -> Runtime:
    """The agent's runtime: tools safe by default (write asks on a terminal), the sessions store protected; no project
    instructions for ``compact`` (``summary``: its guidance), and the request options ``state`` recorded unless flags say."""
    from tiny_agent.agent.instructions import Instructions, load_instructions, user_skills_folder
    from tiny_agent.agent.loop import build_runtime
    from tiny_agent.agent.tools.mcp import servers_from_flags
    from tiny_agent.agent.tools.toolbox import terminal_approver
    from tiny_agent.providers.userconfig import load_user_config
    from tiny_agent.stores.files.store import sessions_dir

    servers = servers_from_flags(options.mcp or [], load_user_config(os.environ).mcp if options.mcp else {})
    if options.allow_mcp and not servers:
        raise UsageError("--allow-mcp names a server given with --mcp; there is none")
    approve_mcp = None
    if servers:
        from tiny_agent.agent.tools.mcp.hub import terminal_approver as mcp_approver

        approve_mcp = mcp_approver()
    runtime = build_runtime(
        endpoint,
        system_prompt=system_prompt(options.system),
        cwd=Path.cwd(),
        allow_bash=options.allow_bash,
        allow_write=options.allow_write,
        approve=None if options.allow_write else terminal_approver(),
        protected=[sessions_dir(None)],
        policy=policy_for(options, endpoint, recorded_options(state)),
        compacting=compacting_for(options, endpoint, summary or ""),
        limits=limits_for(options),
        display=display,
        instructions=Instructions()
        if options.no_project_instructions or summary is not None
        else load_instructions(Path.cwd(), user_skills_folder(os.environ)),
        mcp_servers=servers,
        allow_mcp=options.allow_mcp or [],
        approve_mcp=approve_mcp,
    )
    notice = runtime.toolbox.unconfined_notice
    if notice is not None:
        progress(notice)
    return runtime


def _display() -> TerminalDisplay | None:
    """Live output only when stdout is a terminal; piped output gets the final answer alone."""
    if not sys.stdout.isatty():
        return None
    from tiny_agent.agent.live import TerminalDisplay

    return TerminalDisplay()


class Started(NamedTuple):
    """A session open for a run (its writer holds the lock), and what drives it."""

    writer: JournalWriter
    endpoint: Endpoint
    display: TerminalDisplay | None
    runtime: Runtime


def start(options: Drive, where: Where, session: str | None, continue_: bool, summary: str | None = None) -> Started:
    """Open ``session`` (or the newest one here, or a new one made once the endpoint is known) and its runtime."""
    if session is not None and continue_:
        raise UsageError("--session and --continue are exclusive")
    durability = parse_durability(options.durability)
    found = where.find(session) if session is not None else newest_here(where) if continue_ else None
    writer = open_idle(found, durability) if found is not None else None
    endpoint, display, runtime = _prepare(options, writer, require_key=True, summary=summary)
    return Started(writer or new_session(endpoint, where, durability), endpoint, display, runtime)


def _prepare(
    options: Drive, writer: JournalWriter | None, *, require_key: bool, summary: str | None = None
) -> tuple[Endpoint, TerminalDisplay | None, Runtime]:
    """The endpoint (the flags over what the session recorded), the display and the runtime; ``writer`` is closed
    unsealed if any of it fails."""
    try:
        endpoint = endpoint_for(options, recorded_target(writer.state) if writer else None, require_key=require_key)
        display = _display()
        return endpoint, display, runtime_for(options, endpoint, display, summary, writer.state if writer else None)
    except BaseException:
        if writer is not None:
            writer.close(seal=False)
        raise


def run(args: Run) -> None:
    text = _read_prompt(args.prompt)
    where = Where(args.stored)
    writer, endpoint, display, runtime = start(args.drive, where, args.session, args.continue_)
    progress(f"session {writer_handle(writer, where.store)} · {endpoint.name} · {endpoint.model}")
    result, seal_failure = _drive(writer, runtime, lambda driver: driver.run(text), args.drive.verbose)
    _finish(result, writer, args.as_json, seal_failure, display, where.store)


def demo(args: Demo) -> None:
    from tiny_agent.cli.looking import print_found
    from tiny_agent.loopback import DEMO_MODEL, DEMO_PROMPT, LoopbackServer, demo_script
    from tiny_agent.providers.selection import Requested, select_endpoint

    with LoopbackServer(demo_script()) as server:
        options = Drive(provider="custom", base_url=server.base_url, model=DEMO_MODEL, stream=False)
        # a custom Chat Completions profile on loopback, whatever keys are set
        endpoint = select_endpoint(Requested(provider="custom", base_url=server.base_url, model=DEMO_MODEL), {}, None)
        progress(f"a scripted Chat Completions server is listening on {server.base_url}")
        display = _display()
        runtime = runtime_for(options, endpoint, display)
        where = Where(args.stored)
        writer = new_session(endpoint, where, "fsync")
        progress(f"new session {writer_handle(writer, where.store)} ({writer.path})")
        progress(f"prompt: {DEMO_PROMPT}")
        result, seal_failure = _drive(writer, runtime, lambda driver: driver.run(DEMO_PROMPT))
        requests = server.request_count
    if result.status != "completed" or seal_failure is not None:
        _finish(result, writer, False, seal_failure, display, where.store)
    handle = writer_handle(writer, where.store)
    out = sys.stdout
    out.write(f"\n=== replay of {writer.path} ===\n\n")
    found = found_of(writer, where)
    print_found(found.fold().state, found)
    out.write(
        f"\nThe provider was asked {counted(requests, 'time')}; each response is in the journal twice: raw, exactly as\n"
        f"received (with its reasoning, refusal and annotations), and canonical, as the seam kept it.\n"
        f"Look closer:\n"
        f"  tiny-agent replay {handle} --json\n"
        f"  tiny-agent audit {handle}\n"
        f"  tiny-agent verify {handle}\n"
    )


def resume(args: Resume) -> None:
    from tiny_agent.journal.state import IdleOperation

    options, abort, as_json = args.drive, args.abort, args.as_json
    if args.current_config is not None and not args.dry_run:
        raise UsageError("--current-config only plans; add --dry-run")
    if abort and args.dry_run:
        raise UsageError("--abort and --dry-run are exclusive")
    durability = parse_durability(options.durability)
    found = Where(args.stored).find(args.session)
    if args.dry_run:
        return _plan_only(found, args.current_config, options, as_json)
    writer, store = open_writer(found, durability), found.store
    if type(writer.state.operation) is IdleOperation:  # nothing to resume (no provider needed): only an unsealed line is sealed
        try:
            sealed_now = writer.seal_missing_on_idle()
        finally:
            writer.close(seal=False)
        if sealed_now:
            progress(f"{writer.path.name} was idle but its last line was not sealed; it is sealed now")
        return _say_nothing_to_do(as_json, writer, store)
    _, display, runtime = _prepare(options, writer, require_key=False)

    def finish_it(driver: Driver) -> DriveResult:
        if abort:
            driver.abort()
        return driver.drive()

    result, seal_failure = _drive(writer, runtime, finish_it, options.verbose)
    if result.status == "idle" and result.actions == 0 and seal_failure is None:
        return _say_nothing_to_do(as_json, writer, store)
    if abort and result.status == "aborted" and not result.interrupted and seal_failure is None:
        progress("session is idle again (aborted, as asked)")
        if as_json:
            print_json({"path": str(writer.path), "outcome": "aborted", "actions": result.actions})
        return
    if not as_json and result.status in ("completed", "aborted", "failed"):
        progress(f"session is idle again ({result.status})")
    _finish(result, writer, as_json, seal_failure, display, store)


def _say_nothing_to_do(as_json: bool, writer: JournalWriter, store: Store) -> None:
    """An idle session: nothing to finish; after an abort, how to go on (``resume`` does not answer the prompt again)."""
    if as_json:
        print_json({"path": str(writer.path), "outcome": "idle", "actions": 0})
    else:
        sys.stdout.write(_idle_words(writer.state, writer_handle(writer, store)) + "\n")


def _idle_words(state: SessionState, handle: str) -> str:
    last = state.lastOutcome
    if last is None or last.kind != "run" or last.outcome != "aborted":
        return f"nothing to do: session {handle} is idle (no open run)"
    return (
        f"nothing to resume: the last run of session {handle} was aborted (Ctrl-C, SIGTERM or resume --abort), "
        f"as its journal records, and its prompt stays unanswered\n"
        f"go on with `tiny-agent run PROMPT --session {handle}` or `tiny-agent chat --session {handle}` "
        f"(or --continue in the directory it was made in)"
    )


def _plan_only(found: Found, current_config: str | None, options: Drive, as_json: bool) -> None:
    import msgspec

    from tiny_agent.agent.recovery import (
        IDLE_FINISH,
        Blocked,
        CurrentConfiguration,
        StartStep,
        blocked_reason,
        committable,
        describe_block,
        explain,
        plan_recovery,
    )
    from tiny_agent.journal.state import IdleOperation
    from tiny_agent.stores.journal import cannot_record_responses

    refuse_if_held(found)
    try:
        state = found.fold().state
    except CorruptionError as error:
        corrupt(error, found.path, as_json)
    if current_config is not None:  # a fixture's plan, as the planner gives it
        try:
            current = msgspec.json.decode(read_input(current_config), type=CurrentConfiguration)
        except msgspec.DecodeError as error:
            raise UsageError(f"--current-config {current_config}: {error}") from None
        plan = plan_recovery(state, current)
        why = describe_block(plan.reason) if isinstance(plan, Blocked) else None
    elif type(state.operation) is IdleOperation:
        if as_json:
            print_json(IDLE_FINISH)
        else:
            sys.stdout.write(f"next: {_idle_words(state, found.named)}\n")
        return
    else:
        runtime = runtime_for(options, endpoint_for(options, recorded_target(state), require_key=False), None, state=state)
        configuration = runtime.configuration_for(state)
        plan = committable(plan_recovery(state, runtime.current(state)), state)
        why = blocked_reason(plan, state, configuration) if isinstance(plan, Blocked) else None
    if as_json:
        print_json(plan)
    else:
        sys.stdout.write(f"next: {explain(plan, state) if why is None else f'blocked, {why}'}\n")
    if why is not None:
        raise BlockedError(why)
    if isinstance(plan, StartStep) and state.version < 3:
        raise BlockedError(cannot_record_responses(found.path))


def compact(args: Compact) -> None:
    where = Where(args.stored)
    writer, _, display, runtime = start(args.drive, where, args.session, continue_=False, summary=args.instructions or "")
    before = len(writer.state.activeContext)
    result, seal_failure = _drive(writer, runtime, lambda driver: driver.compact(), args.drive.verbose)
    if result.status == "completed":
        progress(compacted(before, writer))
    _finish(result, writer, False, seal_failure, display, where.store)


def compacted(before: int, writer: JournalWriter) -> str:
    """What a completed compaction did to the context of ``writer``'s session, which held ``before`` messages."""
    after = len(writer.state.activeContext)
    return f"compacted: the model's context went from {counted(before, 'message')} to {after} (a summary and {after - 1} kept)"


# -- opening a session to write it ------------------------------------------------------------------


def open_writer(found: Found, durability: Durability) -> JournalWriter:
    """The session's writer (MISNAMED for a journal named for another session; a v2 one refuses model attempts)."""
    try:
        writer = found.store.open_writer(found.session, durability, progress)
    except CorruptionError as error:
        corrupt(error, found.path, as_json=False)
    except OSError as error:
        raise os_error(error, found.name) from None
    if writer.repaired_tail is not None:
        progress(f"cut a torn tail (an interrupted write) into {writer.repaired_tail.name}")
    if writer.tightened_mode is not None:
        progress(f"{found.path.name} was readable by others (mode {writer.tightened_mode:o}); it is 0600 again")
    return writer


def open_idle(found: Found, durability: Durability) -> JournalWriter:
    """An idle session to start something new in: a model call comes next, so a v2 journal is refused, nothing written."""
    from tiny_agent.journal.state import IdleOperation
    from tiny_agent.stores.journal import cannot_record_responses

    writer = open_writer(found, durability)
    path = found.path
    if writer.state.version < 3:
        writer.close(seal=False)
        raise BlockedError(cannot_record_responses(path, operation_open=type(writer.state.operation) is not IdleOperation))
    if type(writer.state.operation) is not IdleOperation:
        writer.close(seal=False)
        raise Busy(f"{path.name} has an unfinished operation; finish it with `tiny-agent resume {path}`")
    return writer


def newest_here(where: Where) -> Found:
    """``--continue``: the newest session made in this directory; a corrupt one is refused with its error, never skipped."""
    here = os.path.realpath(Path.cwd())
    rows = where.store.listing(cwd=here, limit=1)
    if not rows:
        raise UsageError(f"--continue: no session was made in {here} yet; run without it to start one")
    found = where.find(rows[0].path)
    if rows[0].status != "corrupt":
        return found
    remedy = "--continue takes the newest session made here and does not skip a corrupt one: name the session to continue"
    try:
        found.fold()
    except CorruptionError as error:
        raise CorruptionError(error.code, error.line, error.seq, f"{error.reason} [{found.path}]; {remedy}") from None
    raise VerificationFailed(f"{found.path}: {rows[0].error}; {remedy}")


def new_session(endpoint: Endpoint, where: Where, durability: Durability) -> JournalWriter:
    from tiny_agent.agent.runtime import environment_identity

    cwd = Path.cwd()
    files = where.store
    try:
        return files.create(
            cwd=os.path.realpath(cwd),
            provider=endpoint.name,
            model=endpoint.model,
            environment_identity=environment_identity(cwd),
            durability=durability,
        )
    except OSError as error:
        raise os_error(error, f"cannot create a session in {files.label}") from None


def writer_handle(writer: JournalWriter, store: Store) -> str:
    """The handle of the session a writer holds (a database's session has no journal file)."""
    return handle_of(store, writer.state.header.id, writer.path if writer.path.suffix == ".jsonl" else None)


def refuse_if_held(found: Found) -> None:
    """LOCKED if a writer holds the session now (``resume --dry-run`` plans nothing for a session being written)."""
    from tiny_agent.stores.files.disk import SessionLocked, holder_pid

    holder = found.store.holder(found.session)
    if holder is None:
        return
    if found.session.path is not None:
        raise SessionLocked(found.session.path, holder_pid(found.session.path))
    raise Locked(f"session {found.session.id} is being written by {holder}; only one writer may hold a session")


def found_of(writer: JournalWriter, where: Where) -> Found:
    """The session a writer holds, to read it (a database's session has no journal file)."""
    return where.find(str(writer.path) if writer.path.suffix == ".jsonl" else writer.state.header.id)
