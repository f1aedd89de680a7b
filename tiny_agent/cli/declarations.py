"""Every command and option, declared once (no typer): typer's app and the lean parser are both made from here.

A command is a Struct: its docstring is its help, its fields its parameters in ``--help`` order, spelt by their
``Annotated`` :class:`Opt` or :class:`Arg`; a Struct-typed field is a group of options spliced in where it stands
(:class:`Omit` leaves some out).  ``body`` names the function that runs the command, given its Struct.
"""

import re
from collections.abc import Callable, Iterator, Mapping
from importlib import import_module
from typing import Annotated, Any, ClassVar, Final, Literal, get_args, get_origin

import msgspec

Kind = Literal["argument", "arguments", "flag", "switch", "text", "texts", "integer", "number"]
"""How a parser reads a parameter: ``texts`` is an option given any number of times."""


class Opt(msgspec.Struct, frozen=True):
    """An option as ``--help`` shows it (``"-o --output FILE"``; a switch is ``--on/--off``), its help and bounds.

    An option whose help says ``default: $VARIABLE`` reads that variable when it is not given.
    """

    spelling: str
    help: str
    minimum: int | float | None = None
    maximum: int | float | None = None

    @property
    def names(self) -> list[str]:
        return [word for word in self.spelling.split() if word.startswith("-")]

    @property
    def metavar(self) -> str | None:
        return next((word for word in self.spelling.split() if not word.startswith("-")), None)

    @property
    def env(self) -> str | None:
        found = re.search(r"default: \$(\w+)", self.help)
        return found[1] if found else None


class Arg(msgspec.Struct, frozen=True):
    metavar: str
    help: str


class Omit(msgspec.Struct, frozen=True):
    """On a group: the options of the group this command does not take, by field name (they keep the group's defaults)."""

    fields: str


# -- the option groups -------------------------------------------------------------------------------


class Stored(msgspec.Struct, frozen=True):
    """Where sessions live."""

    sessions_dir: Annotated[
        str | None,
        Opt(
            "--sessions-dir DIR",
            "Where sessions live (default: $TINY_AGENT_SESSIONS_DIR, else ~/.local/share/tiny-agent/sessions).",
        ),
    ] = None
    store_url: Annotated[
        str | None,
        Opt(
            "--store URL",
            "Where sessions live: a postgresql:// URL or a directory (default: $TINY_AGENT_STORE, else the sessions directory).",
        ),
    ] = None


Durability = Annotated[
    str, Opt("--durability fsync|process", "fsync: every commit survives power loss; process: it survives a crash (faster).")
]


class Drive(msgspec.Struct, frozen=True):
    """The options of the commands that talk to a model: run, resume, chat and compact."""

    provider: Annotated[
        str | None,
        Opt("--provider NAME", "A provider profile (`tiny-agent providers` lists them; default: $TINY_AGENT_PROVIDER)."),
    ] = None
    model: Annotated[
        str | None, Opt("--model -m MODEL", "Model id (default: $TINY_AGENT_MODEL, the config file, the session's).")
    ] = None
    base_url: Annotated[
        str | None, Opt("--base-url URL", "The API's base URL (default: $TINY_AGENT_BASE_URL, else the profile's).")
    ] = None
    api: Annotated[str | None, Opt("--api API", "For --provider custom: chat, anthropic or responses.")] = None
    system: Annotated[str | None, Opt("--system TEXT|@FILE", "The system prompt: the text itself, or @FILE for a file's.")] = None
    allow_bash: Annotated[bool, Opt("--allow-bash", "Offer the bash tool (sandboxed with bubblewrap when available).")] = False
    allow_write: Annotated[bool, Opt("--allow-write", "Let write and edit change files without asking.")] = False
    no_project_instructions: Annotated[
        bool, Opt("--no-project-instructions", "Offer the model no AGENTS.md files and no skills (docs/tools.md).")
    ] = False
    mcp: Annotated[
        list[str] | None,
        Opt("--mcp SERVER", "Offer an MCP server's tools: a configured [mcp.NAME], a URL or a command (repeatable)."),
    ] = None
    allow_mcp: Annotated[
        list[str] | None, Opt("--allow-mcp NAME", "Run this MCP server's tools without asking (repeatable).")
    ] = None
    stream: Annotated[
        bool | None, Opt("--stream/--no-stream", "Stream the answer (default: where the provider supports it).")
    ] = None
    max_tokens: Annotated[int | None, Opt("--max-tokens N", "Cap the tokens of each answer.", minimum=1)] = None
    tool_choice: Annotated[
        str | None,
        Opt("--tool-choice auto|none|required|NAME", "Whether the model must call a tool, or which (until a run has a call)."),
    ] = None
    retries: Annotated[
        int,
        Opt(
            "--retries N",
            "Retries of a model step (N+1 attempts in all), for 429, 5xx, timeouts and refused connections.",
            minimum=0,
            maximum=15,
        ),
    ] = 2
    retry_wait: Annotated[
        float, Opt("--retry-wait SECONDS", "First backoff in seconds (doubled per retry, with jitter).", minimum=0.0)
    ] = 1.0
    max_steps: Annotated[int, Opt("--max-steps N", "Model requests per run before it stops inside the contract.", minimum=1)] = 50
    durability: Durability = "fsync"
    connect_timeout: Annotated[
        float | None,
        Opt("--connect-timeout SECONDS", "Seconds to wait for a connection (default: $TINY_AGENT_CONNECT_TIMEOUT, else 10)."),
    ] = None
    read_timeout: Annotated[
        float | None,
        Opt(
            "--read-timeout SECONDS",
            "Seconds to wait for a response to start or for more of a whole body (default: $TINY_AGENT_READ_TIMEOUT, else 600).",
        ),
    ] = None
    stream_idle_timeout: Annotated[
        float | None,
        Opt(
            "--stream-idle-timeout SECONDS",
            "Seconds a stream may stall between bytes (default: $TINY_AGENT_STREAM_IDLE_TIMEOUT, else 120).",
        ),
    ] = None
    attempt_timeout: Annotated[
        float | None,
        Opt(
            "--attempt-timeout SECONDS",
            "Seconds one model request may take in all, however it trickles (default: $TINY_AGENT_ATTEMPT_TIMEOUT, else 1800).",
        ),
    ] = None
    max_response_bytes: Annotated[
        int | None,
        Opt(
            "--max-response-bytes BYTES",
            "The largest response body kept, as received and decoded (default: $TINY_AGENT_MAX_RESPONSE_BYTES, else 64 MiB).",
        ),
    ] = None
    context_window: Annotated[
        int | None,
        Opt(
            "--context-window TOKENS",
            "The model's context window in tokens (default: the config file's, else known model families).",
            minimum=256,
        ),
    ] = None
    compact_at: Annotated[
        float,
        Opt(
            "--compact-at SHARE", "Compact when the estimated context passes this share of the window.", minimum=0.1, maximum=1.0
        ),
    ] = 0.8
    keep_tokens: Annotated[
        int | None,
        Opt(
            "--keep-tokens TOKENS",
            "Tokens of the newest turns a compaction keeps verbatim (default: a fifth of the window).",
            minimum=0,
        ),
    ] = None
    no_auto_compact: Annotated[
        bool, Opt("--no-auto-compact", "Never compact on its own (before a run, during one, or after a context-length error).")
    ] = False
    verbose: Annotated[bool, Opt("--verbose -v", "Progress lines name steps, entries and responses by id.")] = False


# -- the commands, in the order the top-level help lists them -------------------------------------------

Session = Annotated[str, Arg("SESSION", "A handle, a session id or a unique prefix of one, or a journal path.")]
Json = Annotated[bool, Opt("--json", "Machine-readable output.")]


class Command(msgspec.Struct):
    body: ClassVar[str]
    """``module.function`` in tiny_agent.cli: what runs the command, given its Struct."""


class Run(Command):
    """Run one prompt to completion, journaling everything; print the answer (progress goes to stderr)."""

    body = "driving.run"
    prompt: Annotated[str, Arg("PROMPT", "What to ask (- reads it from stdin).")]
    session: Annotated[str | None, Opt("--session SESSION", "Continue this session (a handle, an id or a path).")] = None
    continue_: Annotated[bool, Opt("--continue -c", "Continue the newest session made in this directory.")] = False
    drive: Drive = Drive()
    stored: Stored = Stored()
    as_json: Annotated[bool, Opt("--json", "Print the outcome as JSON (session, handle, outcome, reason, usage).")] = False


class Demo(Command):
    """Run a real session against a server on 127.0.0.1 (no network, no key), then replay it."""

    body = "driving.demo"
    stored: Stored = Stored()


class Resume(Command):
    """Finish a session that crashed: repair its tail, then plan, act and commit until it is idle."""

    body = "driving.resume"
    session: Session
    abort: Annotated[bool, Opt("--abort", "Abort the open operation instead of finishing it.")] = False
    dry_run: Annotated[bool, Opt("--dry-run", "Print the next planned action; write nothing.")] = False
    current_config: Annotated[
        str | None,
        Opt("--current-config FILE", "With --dry-run: plan against this configuration (the planner fixtures' `current` JSON)."),
    ] = None
    drive: Drive = Drive()
    stored: Stored = Stored()
    as_json: Annotated[bool, Opt("--json", "Machine-readable output (with --dry-run: the plan's JSON).")] = False


class Compact(Command):
    """Summarise an idle session's history with the model (in pieces that fit its window), keeping the newest turns verbatim."""

    body = "driving.compact"
    session: Session
    instructions: Annotated[str | None, Arg("INSTRUCTIONS", "What the summary should attend to (optional).")] = None
    drive: Annotated[
        Drive,
        Omit(
            "system allow_bash allow_write no_project_instructions mcp allow_mcp max_tokens tool_choice max_steps compact_at "
            "no_auto_compact"
        ),
    ] = Drive()
    stored: Stored = Stored()


class Chat(Command):
    """Talk to the model line by line in one session (/help lists the slash commands: /model, /compact, /cost...)."""

    body = "chatting.chat"
    session: Annotated[str | None, Opt("--session SESSION", "Chat in this session (a handle, an id or a path).")] = None
    continue_: Annotated[bool, Opt("--continue -c", "Chat in the newest session made in this directory.")] = False
    drive: Drive = Drive()
    stored: Stored = Stored()


class Replay(Command):
    """Rebuild a session from its journal and show the transcript (or the state, or the next messages)."""

    body = "looking.replay"
    session: Session
    as_json: Annotated[bool, Opt("--json", "Print the reduced state in the conformance shape.")] = False
    messages: Annotated[bool, Opt("--messages", "Print the messages the model would be sent next.")] = False
    full: Annotated[bool, Opt("--full", "Show long tool results in full.")] = False
    stored: Stored = Stored()


class Normalize(Command):
    """Run a response through the seam (adapters and stream reassembly included) and show what the transcript keeps."""

    body = "looking.normalize"
    source: Annotated[str, Arg("FILE", "A file holding one provider response body (or an event stream), or - for stdin.")]
    provider: Annotated[str | None, Opt("--provider NAME", "Run this provider's quirk adapters first.")] = None
    api: Annotated[str | None, Opt("--api API", "The wire API of the body: chat (default), anthropic or responses.")] = None


class Audit(Command):
    """Show what each provider response was, what the seam kept, what it cost, and any drift (exit 3)."""

    body = "looking.audit"
    session: Session
    as_json: Annotated[bool, Opt("--json", "Print the whole audit as one JSON document.")] = False
    stored: Stored = Stored()


class Verify(Command):
    """Check the seal chain and every reducer rule of one, several or all sessions (exit 65 if any is corrupt)."""

    body = "looking.verify"
    sessions: Annotated[list[str] | None, Arg("SESSION", "Handles, session ids or journal paths.")] = None
    all_sessions: Annotated[bool, Opt("--all", "Verify every session in the store.")] = False
    as_json: Annotated[bool, Opt("--json", "Print one JSON verdict per session, as an array.")] = False
    stored: Stored = Stored()


class Sessions(Command):
    """List this directory's sessions, newest first: handle, created, model, status, runs, tokens, first prompt."""

    body = "looking.sessions"
    as_json: Json = False
    limit: Annotated[int | None, Opt("--limit N", "Show only the N newest sessions.", minimum=1)] = None
    all_sessions: Annotated[bool, Opt("--all", "List the sessions of every directory, not only this one's.")] = False
    stored: Stored = Stored()


class Providers(Command):
    """List the provider profiles: API, base URL, default model, key variable, and whether that key is set (never the key)."""

    body = "looking.providers"
    as_json: Json = False


class Upgrade(Command):
    """Continue a v2 journal in a new v3 session: its facts copied exactly (but for seq and seals), its origin in the header.

    The v2 file is only read.  Resume or run the new session; the v2 one cannot take a model call.
    """

    body = "lineage.upgrade"
    journal: Annotated[str, Arg("JOURNAL", "The v2 journal: a path, or a session's handle or id.")]
    durability: Durability = "fsync"
    stored: Stored = Stored()
    as_json: Json = False


class Fork(Command):
    """Branch a session: a new v3 session starting with its facts through a point, its parent and place in the header.

    A point inside an open run or compaction is refused, naming the points that would do.
    """

    body = "lineage.fork"
    session: Session
    at: Annotated[
        str,
        Opt("--at ENTRY|SEQ", "Where to branch: an entry id (or 4+ characters of it), or a seq (N or seq:N); that line is kept."),
    ]
    durability: Durability = "fsync"
    stored: Stored = Stored()
    as_json: Json = False


class Export(Command):
    """Write a session's journal out: its exact bytes, or (--v2) as a v2 journal, saying on stderr what v2 leaves out."""

    body = "lineage.export"
    session: Session
    v2: Annotated[bool, Opt("--v2", "Write a v2 journal the other ports read (same id; no raw or seal facts).")] = False
    output: Annotated[str | None, Opt("--output -o FILE", "Write to this new file (never overwritten), not stdout.")] = None
    stored: Stored = Stored()


class Import(Command):
    """Store a journal file as a session, byte for byte, once it verifies (a corrupt one is refused, exit 65).

    The way back from `export`: a backup restored, or a session moved between stores.
    """

    body = "lineage.import_"
    journal: Annotated[str, Arg("FILE", "A journal file to store (- reads it from stdin).")]
    durability: Durability = "fsync"
    stored: Stored = Stored()
    as_json: Json = False


class View(Command):
    """Write one self-contained HTML page of a session: timeline, raw-vs-canonical panels, usage and cost charts."""

    body = "looking.view"
    session: Session
    output: Annotated[
        str | None,
        Opt(
            "-o --output FILE",
            "Where to write the page ('-' for stdout; default: <data dir>/tiny-agent/views/<session id>.html).",
        ),
    ] = None
    open_page: Annotated[bool, Opt("--open", "Open the page in the default browser once written.")] = False
    stored: Stored = Stored()


class Report(Command):
    """Usage across sessions: tokens, cache hit rate, cost (where prices are known), runs by outcome."""

    body = "looking.report"
    all_sessions: Annotated[bool, Opt("--all", "Every directory's sessions, not only this one's.")] = False
    since: Annotated[str | None, Opt("--since YYYY-MM-DD", "Only usage from this UTC day on (YYYY-MM-DD).")] = None
    by: Annotated[str, Opt("--by day|model|session", "Rows per day, model or session.")] = "day"
    as_json: Annotated[bool, Opt("--json", "Print the figures as one JSON document.")] = False
    html: Annotated[str | None, Opt("--html FILE", "Write the figures with charts to this HTML file.")] = None
    stored: Stored = Stored()


COMMANDS: Final[Mapping[str, type[Command]]] = {command.__name__.lower(): command for command in Command.__subclasses__()}
"""Every command declared above, by name, in the order declared."""


# -- reading the declarations -----------------------------------------------------------------------------


class Param(msgspec.Struct, frozen=True):
    """One parameter of a command, as a parser sees it."""

    name: str
    kind: Kind
    annotation: Any
    default: Any
    spelt: Opt | Arg

    @property
    def required(self) -> bool:
        return self.default is msgspec.NODEFAULT

    @property
    def flags(self) -> list[str]:
        return self.spelt.names if isinstance(self.spelt, Opt) else []


def parameters(command: type[msgspec.Struct]) -> Iterator[Param]:
    """The command's parameters in order, each group's spliced in where the group stands."""
    for field in msgspec.structs.fields(command):
        plain, spelt = _split(field.type)
        if _is_group(plain):
            omitted = spelt.fields.split() if isinstance(spelt, Omit) else []
            yield from (parameter for parameter in parameters(plain) if parameter.name not in omitted)
        elif isinstance(spelt, Opt | Arg):
            yield Param(field.name, _kind(plain, spelt), plain, field.default, spelt)


def build(command: type[Command], values: Mapping[str, object]) -> Command:
    """The command's Struct from its parameters' values (a group's left-out options keep their defaults)."""
    fields: dict[str, object] = {}
    for field in msgspec.structs.fields(command):
        plain, _ = _split(field.type)
        if _is_group(plain):
            fields[field.name] = plain(**{name: values[name] for name in plain.__struct_fields__ if name in values})
        else:
            fields[field.name] = values[field.name]
    return command(**fields)


def body_of(command: type[Command]) -> Callable[[Command], object]:
    """The function that runs the command (looked up when called: a test may replace it)."""
    module, _, name = command.body.partition(".")
    function: Callable[[Command], object] = getattr(import_module(f"tiny_agent.cli.{module}"), name)
    return function


def _is_group(plain: Any) -> bool:
    return isinstance(plain, type) and issubclass(plain, msgspec.Struct)


def _split(annotation: Any) -> tuple[Any, object]:
    if get_origin(annotation) is Annotated:
        plain, spelt, *_ = get_args(annotation)
        return plain, spelt
    return annotation, None


def _kind(plain: Any, spelt: Opt | Arg) -> Kind:
    types = set(get_args(plain)) - {type(None)} or {plain}
    if isinstance(spelt, Arg):
        return "arguments" if list[str] in types else "argument"
    if types == {bool}:
        return "flag" if plain is bool else "switch"
    return "integer" if types == {int} else "number" if types == {float} else "texts" if types == {list[str]} else "text"
