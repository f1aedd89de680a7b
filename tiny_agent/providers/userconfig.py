"""The user's config file: a default provider and model, the user's own providers, MCP servers, per-model facts.

Where it is, what it holds and how a bad one is reported: docs/provider.md, "The config file" ([mcp.NAME]:
docs/tools.md).  Unknown keys are errors, so a typo is never silently ignored.  Reading the file
(:func:`load_user_config`) is the only I/O here; parsing (:func:`parse_user_config`) is pure.
"""

from __future__ import annotations

import os
import re
import tomllib
from collections.abc import Mapping
from pathlib import Path
from typing import Annotated, Any, Final, TypeVar
from urllib.parse import SplitResult, urlsplit

import msgspec

from tiny_agent.errors import ConfigError, os_error
from tiny_agent.providers.keys import PROFILE_NAME, base_url_problem
from tiny_agent.providers.profiles import BUILTIN_NAMES, KeyStyle, Profile, speaking
from tiny_agent.wire.chat.adapters import is_known_adapter
from tiny_agent.wire.registry import Api

CONFIG_ENV: Final = "TINY_AGENT_CONFIG"

PositiveInt = Annotated[int, msgspec.Meta(ge=1)]
Price = Annotated[float, msgspec.Meta(ge=0, le=1_000_000)]
"""USD per million tokens; the bound keeps out ``inf`` and ``nan``."""
VariableName = Annotated[str, msgspec.Meta(pattern=r"^[A-Za-z_][A-Za-z0-9_]*$")]
NonEmpty = Annotated[str, msgspec.Meta(min_length=1)]


class ModelSettings(msgspec.Struct, frozen=True, forbid_unknown_fields=True):
    """``[models."NAME"]``: what the user knows about one model; every member optional."""

    context_window: PositiveInt | None = None
    input: Price | None = None
    output: Price | None = None
    cache_read: Price | None = None
    cache_write: Price | None = None


class _ProfileTable(msgspec.Struct, frozen=True, forbid_unknown_fields=True):
    """``[providers.NAME]`` as written."""

    base_url: NonEmpty
    api: Api = "chat"
    key_variable: VariableName | None = None
    key_style: KeyStyle | None = None
    """Default: ``x-api-key`` for the anthropic API, else ``bearer``."""
    adapters: tuple[str, ...] = ()
    streaming: bool = True
    stream_usage: bool = False
    max_tokens: PositiveInt | None = None
    model: NonEmpty | None = None


class _BuiltinTable(msgspec.Struct, frozen=True, forbid_unknown_fields=True):
    """``[providers.NAME]`` for a built-in NAME: its default model, nothing else."""

    model: NonEmpty


class _CustomTable(msgspec.Struct, frozen=True, forbid_unknown_fields=True):
    """``[custom]`` as written."""

    api: Api = "chat"
    adapters: tuple[str, ...] = ()


Seconds = Annotated[float, msgspec.Meta(gt=0, le=86400)]
REFERENCE: Final = re.compile(r"\$\{([A-Za-z_][A-Za-z0-9_]*)\}")
"""``${NAME}`` in an MCP server's ``env`` or ``headers`` value: the variable's value, read at start-up."""
SECRET_HEADER: Final = re.compile(r"auth|key|token|secret|cookie|password", re.IGNORECASE)


class McpServer(msgspec.Struct, frozen=True, forbid_unknown_fields=True):
    """``[mcp.NAME]``: an MCP server, Streamable HTTP (``url``) or stdio (``command``, ``args``, ``env``)."""

    name: str = ""
    url: NonEmpty | None = None
    command: NonEmpty | None = None
    args: tuple[str, ...] = ()
    env: dict[str, str] = msgspec.field(default_factory=dict)
    headers: dict[str, str] = msgspec.field(default_factory=dict)
    allowed_tools: tuple[str, ...] = ()
    """Tools that run without asking (the server's own names); ``["*"]``: all of them."""
    startup_timeout: Seconds = 30.0
    call_timeout: Seconds = 120.0


class _ConfigFile(msgspec.Struct, frozen=True, forbid_unknown_fields=True):
    """The file as written; tables under user-chosen names are converted one by one, so an error names the key."""

    provider: NonEmpty | None = None
    model: NonEmpty | None = None
    base_url: NonEmpty | None = None
    custom: _CustomTable = _CustomTable()
    providers: dict[str, Any] = msgspec.field(default_factory=dict)
    models: dict[str, Any] = msgspec.field(default_factory=dict)
    mcp: dict[str, Any] = msgspec.field(default_factory=dict)


class UserConfig(msgspec.Struct, frozen=True):
    """The config file, checked: what :func:`tiny_agent.providers.selection.select_endpoint` and the rest read."""

    source: str = "(no config file)"
    """The file's path, for messages."""
    provider: str | None = None
    model: str | None = None
    base_url: str | None = None
    custom_api: Api = "chat"
    custom_adapters: tuple[str, ...] = ()
    profiles: tuple[Profile, ...] = ()
    """The user's own providers, in file order."""
    provider_models: dict[str, str] = msgspec.field(default_factory=dict)
    """``[providers.NAME] model``, built-in NAMEs included: each provider's default model."""
    models: dict[str, ModelSettings] = msgspec.field(default_factory=dict)
    mcp: dict[str, McpServer] = msgspec.field(default_factory=dict)

    def model_settings(self, model: str) -> ModelSettings | None:
        return self.models.get(model)


EMPTY: Final = UserConfig()


# -- where the file is, and reading it (the only I/O) -------------------------------------


def config_path(environ: Mapping[str, str]) -> tuple[Path, bool]:
    """The config file's path, and whether the user named it explicitly (``TINY_AGENT_CONFIG``)."""
    explicit = environ.get(CONFIG_ENV, "").strip()
    if explicit:
        return Path(explicit), True
    xdg = environ.get("XDG_CONFIG_HOME", "").strip()
    # The XDG spec says a relative XDG_CONFIG_HOME is invalid and must be ignored.
    base = Path(xdg) if xdg and os.path.isabs(xdg) else Path(environ.get("HOME") or os.path.expanduser("~")) / ".config"
    return base / "tiny-agent" / "config.toml", False


def load_user_config(environ: Mapping[str, str]) -> UserConfig:
    """Read and check the config file; a missing file (not named explicitly) is an empty config."""
    path, explicit = config_path(environ)
    try:
        data = path.read_bytes()
    except (FileNotFoundError, NotADirectoryError):
        if explicit:
            raise ConfigError(f"{CONFIG_ENV} names {path}, which does not exist") from None
        return UserConfig(source=str(path))
    except IsADirectoryError:
        raise ConfigError(f"config file {path} is a directory, not a file") from None
    except OSError as error:
        raise os_error(error, f"config file {path}") from None
    return parse_user_config(data, str(path))


# -- parsing (pure) ------------------------------------------------------------------------


def parse_user_config(data: bytes, source: str) -> UserConfig:
    """TOML bytes to a checked :class:`UserConfig`; every problem is one ``ConfigError`` line."""
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as error:
        raise ConfigError(f"config file {source} is not UTF-8 text (byte {error.start})") from None
    try:
        document = tomllib.loads(text)
    except tomllib.TOMLDecodeError as error:
        raise ConfigError(f"config file {source} is not valid TOML: {error}") from None
    written = _convert(document, _ConfigFile, source, ())
    builtins = {name: _builtin_model(name, table, source) for name, table in written.providers.items() if name in BUILTIN_NAMES}
    profiles = tuple(_profile(name, table, source) for name, table in written.providers.items() if name not in BUILTIN_NAMES)
    models = {name: _convert(table, ModelSettings, source, ("models", name)) for name, table in written.models.items()}
    _check_adapters(written.custom.adapters, written.custom.api, source, ("custom", "adapters"))
    known = BUILTIN_NAMES | {profile.name for profile in profiles}
    if written.provider is not None and written.provider not in known:
        choices = ", ".join(sorted(known))
        raise _bad(source, ("provider",), f"unknown provider {written.provider!r} (choices: {choices})")
    if written.base_url is not None:
        _check_base_url(written.base_url, source, ("base_url",))
    mcp = {name: _mcp_server(name, table, source) for name, table in written.mcp.items()}
    return UserConfig(
        source=source,
        mcp=mcp,
        provider=written.provider,
        model=written.model,
        base_url=written.base_url,
        custom_api=written.custom.api,
        custom_adapters=written.custom.adapters,
        profiles=profiles,
        provider_models=builtins | {profile.name: profile.model for profile in profiles if profile.model},
        models=models,
    )


def _builtin_model(name: str, table: Any, source: str) -> str:
    if isinstance(table, dict) and set(table) - {"model"}:
        problem = f"{name!r} is a built-in provider, whose table takes only model; choose another name for a provider of your own"
        raise _bad(source, ("providers", name), problem)
    return _convert(table, _BuiltinTable, source, ("providers", name)).model


def _profile(name: str, table: Any, source: str) -> Profile:
    where = ("providers", name)
    if not PROFILE_NAME.fullmatch(name):
        raise _bad(source, where, "a provider name is lower-case letters, digits, '.', '_' and '-'")
    written = _convert(table, _ProfileTable, source, where)
    parts = _check_base_url(written.base_url, source, (*where, "base_url"))
    _check_adapters(written.adapters, written.api, source, (*where, "adapters"))
    # The user paired this key with this base URL: the key goes to that host and scheme, nowhere else.
    destinations = (f"{parts.scheme}://{parts.hostname}",) if written.key_variable else ()
    return Profile(
        name=name,
        base_url=written.base_url,
        key_variable=written.key_variable,
        key_destinations=destinations,
        adapters=written.adapters,
        streaming=written.streaming,
        stream_usage=written.stream_usage,
        **speaking(written.api, written.key_style, written.max_tokens),
        origin="config",
        model=written.model,
    )


def _mcp_server(name: str, table: Any, source: str) -> McpServer:
    where = ("mcp", name)

    def bad(key: str, problem: str) -> ConfigError:
        return _bad(source, (*where, *key.split(".", 1)) if key else where, problem)

    if not PROFILE_NAME.fullmatch(name):
        raise bad("", "a server name is lower-case letters, digits, '.', '_' and '-'")
    server = _convert(table, McpServer, source, where)
    if (server.url is None) == (server.command is None):
        raise bad("", "give exactly one of url (Streamable HTTP) and command (stdio)")
    if server.url is not None and urlsplit(server.url).scheme not in ("http", "https"):
        raise bad("url", "an MCP server URL starts with http:// or https://")
    if server.url is not None and (server.env or server.args):
        raise bad("env" if server.env else "args", "applies to a stdio server (command) only")
    if server.command is not None and server.headers:
        raise bad("headers", "applies to a Streamable HTTP server (url) only")
    for header, value in server.headers.items():
        if SECRET_HEADER.search(header) and not REFERENCE.search(value):
            raise bad(f"headers.{header}", "a secret is referenced as ${VARIABLE}, never written in the file")
    return msgspec.structs.replace(server, name=name)


def expand_references(value: str, environ: Mapping[str, str], what: str) -> tuple[str, list[str]]:
    """``value`` with each ``${NAME}`` replaced by the variable's value, and those values (secrets to redact)."""
    used: list[str] = []

    def one(match: re.Match[str]) -> str:
        found = environ.get(match[1])
        if found is None:
            raise ConfigError(f"{what} refers to ${{{match[1]}}}, which is not set")
        used.append(found)
        return found

    return REFERENCE.sub(one, value), used


def _check_base_url(url: str, source: str, where: tuple[str, ...]) -> SplitResult:
    problem = base_url_problem(url)
    if problem is not None:
        raise _bad(source, where, f"the base URL {problem}")
    return urlsplit(url)


def _check_adapters(names: tuple[str, ...], api: Api, source: str, where: tuple[str, ...]) -> None:
    for index, name in enumerate(names):
        if not is_known_adapter(name):
            raise _bad(source, where, f"unknown adapter {name!r}", f"[{index}]")
    if names and api != "chat":
        raise _bad(source, where, f"adapters apply to the chat API only, not to {api}")


T = TypeVar("T")

_LOCATED: Final = re.compile(r"(?P<problem>.*?)(?: - at `\$(?P<path>[^`]*)`)?")
_UNKNOWN_FIELD: Final = re.compile(r"Object contains unknown field `(?P<field>.*)`")


def _convert(value: Any, kind: type[T], source: str, where: tuple[str, ...]) -> T:
    """``msgspec.convert`` with strict types; an error names the file and the key, in TOML's dotted form."""
    try:
        return msgspec.convert(value, kind, strict=True)
    except msgspec.ValidationError as error:
        key, problem = _located(str(error), where)
        raise ConfigError(f"config file {source}: {key}: {problem}") from None


def _located(message: str, where: tuple[str, ...]) -> tuple[str, str]:
    """msgspec's ``Expected `int`, got `str` - at `$.a.b``` as (``a.b``, ``expected `int`, got `str```)."""
    match = _LOCATED.fullmatch(message)
    problem = match["problem"] if match else message
    inner = (match["path"] or "") if match else ""
    key = _key(where) + inner if where else inner.lstrip(".")
    unknown = _UNKNOWN_FIELD.fullmatch(problem)
    if unknown:
        key = f"{key}.{_key((unknown['field'],))}" if key else _key((unknown["field"],))
        problem = "unknown key"
    return key or "(top level)", problem[:1].lower() + problem[1:]


def _bad(source: str, where: tuple[str, ...], problem: str, index: str = "") -> ConfigError:
    return ConfigError(f"config file {source}: {_key(where)}{index}: {problem}")


def _key(parts: tuple[str, ...]) -> str:
    """TOML's dotted key: bare where it can be, quoted where it must (``models."openai/gpt-4o"``)."""
    return ".".join(part if re.fullmatch(r"[A-Za-z0-9_-]+", part) else msgspec.json.encode(part).decode() for part in parts)
