"""Provider profiles: which provider answers, at which URL, with which key, and how it is sent.

A :class:`Profile` names a provider and says everything tiny-agent needs to
talk to it: the wire API, the default base URL, the environment variable that
holds its key, how the key is sent, the only hosts that key may be sent to,
extra non-secret headers, the quirk adapters its bodies need, and whether it
streams.  :func:`select_endpoint` turns the command line, the environment and
the user's config file into one :class:`Endpoint`.

Keys go only where they belong (see docs/provider.md, "Keys"):

- a profile's own key variable is sent only to that profile's own hosts, and
  only over https;
- ``TINY_AGENT_API_KEY`` is the user's explicit key for whatever base URL is
  in use;
- a loopback URL needs no key and gets none unless ``TINY_AGENT_API_KEY`` is set;
- any other remote URL with no key that may go there is a ``ConfigError``
  that names the variable to set.

The key is held by the :class:`Endpoint` and appears in no repr, no str and
no error text; neither do credentials written into a base URL, nor
secret-looking query parameters.

Pure: the environment is a mapping passed in, the config file is read by
:mod:`tiny_agent.userconfig`.  No I/O.
"""

from __future__ import annotations

import ipaddress
import re
from collections.abc import Mapping
from typing import TYPE_CHECKING, Final, Literal
from urllib.parse import SplitResult, parse_qsl, quote, urlsplit

import msgspec

from tiny_agent.adapters import Api, adapter_identity
from tiny_agent.errors import ConfigError
from tiny_agent.redact import Secrets, collect_secrets

if TYPE_CHECKING:
    from tiny_agent.userconfig import UserConfig

KeyStyle = Literal["bearer", "x-api-key", "api-key"]
"""``Authorization: Bearer KEY``, ``x-api-key: KEY`` (Anthropic), ``api-key: KEY`` (Azure)."""

ProfileOrigin = Literal["built-in", "config"]

PROVIDER_ENV: Final = "TINY_AGENT_PROVIDER"
BASE_URL_ENV: Final = "TINY_AGENT_BASE_URL"
MODEL_ENV: Final = "TINY_AGENT_MODEL"
EXPLICIT_KEY_ENV: Final = "TINY_AGENT_API_KEY"
"""The user's explicit key: sent to whatever base URL is in use, loopback included."""

ANTHROPIC_VERSION: Final = "2023-06-01"
DEFAULT_MAX_TOKENS: Final[dict[Api, int]] = {"anthropic": 8192}
"""Anthropic requires ``max_tokens``; the others have a server-side default."""
API_HEADERS: Final[dict[Api, tuple[tuple[str, str], ...]]] = {"anthropic": (("anthropic-version", ANTHROPIC_VERSION),)}
"""Non-secret headers an API itself requires, whichever profile speaks it."""

PROFILE_NAME: Final = re.compile(r"[a-z0-9][a-z0-9._-]{0,63}")
"""Profile names are written into routing identities: no ``@``, ``#``, spaces or capitals."""


class Profile(msgspec.Struct, frozen=True, forbid_unknown_fields=True):
    """One provider: where it lives, which key it takes, how, and what its bodies need."""

    name: str
    api: Api
    base_url: str | None
    """None where the user must give one (azure, custom)."""
    key_variable: str | None
    """The environment variable holding this provider's own key; None for keyless local servers."""
    key_style: KeyStyle
    key_destinations: tuple[str, ...]
    """``scheme://host`` patterns this profile's own key may be sent to; ``*.`` matches any subdomain."""
    headers: tuple[tuple[str, str], ...] = ()
    """Extra non-secret headers, sent on every request."""
    adapters: tuple[str, ...] = ()
    """Quirk adapters run on every Chat Completions body, in order (see tiny_agent.adapters)."""
    streaming: bool = True
    stream_usage: bool = False
    """Send ``stream_options: {"include_usage": true}`` when streaming (the server accepts it)."""
    max_tokens: int | None = None
    """Sent as ``max_tokens`` when the API requires a value (Anthropic)."""
    base_url_hint: str | None = None
    """An example base URL, shown when the user must give one."""
    origin: ProfileOrigin = "built-in"


def _hosted(
    name: str, base_url: str, key_variable: str, destination: str, *, adapters: tuple[str, ...] = (), stream_usage: bool = True
) -> Profile:
    """A hosted OpenAI-compatible Chat Completions service with a Bearer key for one host."""
    return Profile(
        name=name,
        api="chat",
        base_url=base_url,
        key_variable=key_variable,
        key_style="bearer",
        key_destinations=(destination,),
        adapters=adapters,
        stream_usage=stream_usage,
    )


def _local(name: str, base_url: str, *, adapters: tuple[str, ...] = (), stream_usage: bool) -> Profile:
    """A server on this machine: no key of its own (TINY_AGENT_API_KEY if it wants one)."""
    return Profile(
        name=name,
        api="chat",
        base_url=base_url,
        key_variable=None,
        key_style="bearer",
        key_destinations=(),
        adapters=adapters,
        stream_usage=stream_usage,
    )


BUILTIN_PROFILES: Final[tuple[Profile, ...]] = (
    _hosted("openai", "https://api.openai.com/v1", "OPENAI_API_KEY", "https://api.openai.com"),
    Profile(
        name="openrouter",
        api="chat",
        base_url="https://openrouter.ai/api/v1",
        key_variable="OPENROUTER_API_KEY",
        key_style="bearer",
        key_destinations=("https://openrouter.ai",),
        # OpenRouter's app attribution header: names the app, carries nothing secret.
        headers=(("X-Title", "tiny-agent"),),
        stream_usage=True,
    ),
    Profile(
        name="anthropic",
        api="anthropic",
        base_url="https://api.anthropic.com/v1",
        key_variable="ANTHROPIC_API_KEY",
        key_style="x-api-key",
        key_destinations=("https://api.anthropic.com",),
        headers=API_HEADERS["anthropic"],
        # Usage arrives in message_start and message_delta whether asked or not.
        stream_usage=False,
        max_tokens=DEFAULT_MAX_TOKENS["anthropic"],
    ),
    Profile(
        name="openai-responses",
        api="responses",
        base_url="https://api.openai.com/v1",
        key_variable="OPENAI_API_KEY",
        key_style="bearer",
        key_destinations=("https://api.openai.com",),
        # response.completed carries the whole response, usage included.
        stream_usage=False,
    ),
    _hosted(
        "groq",
        "https://api.groq.com/openai/v1",
        "GROQ_API_KEY",
        "https://api.groq.com",
        adapters=("absent-content-is-null",),
    ),
    _hosted(
        "mistral",
        "https://api.mistral.ai/v1",
        "MISTRAL_API_KEY",
        "https://api.mistral.ai",
        adapters=("absent-content-is-null", "missing-call-type-is-function", "content-parts-to-text"),
        # Mistral refuses unknown request members and sends usage in the last chunk unasked.
        stream_usage=False,
    ),
    _hosted("deepseek", "https://api.deepseek.com/v1", "DEEPSEEK_API_KEY", "https://api.deepseek.com"),
    Profile(
        name="azure",
        api="chat",
        base_url=None,
        key_variable="AZURE_OPENAI_API_KEY",
        key_style="api-key",
        key_destinations=(
            "https://*.openai.azure.com",
            "https://*.cognitiveservices.azure.com",
            "https://*.services.ai.azure.com",
        ),
        adapters=("absent-content-is-null",),
        stream_usage=True,
        base_url_hint="https://RESOURCE.openai.azure.com/openai/v1",
    ),
    _local("ollama", "http://127.0.0.1:11434/v1", stream_usage=True),
    _local("vllm", "http://127.0.0.1:8000/v1", adapters=("empty-tool-calls-is-none",), stream_usage=True),
    # llama.cpp's server puts usage in its last chunk unasked and ignores stream_options.
    _local("llamacpp", "http://127.0.0.1:8080/v1", adapters=("object-arguments-to-json",), stream_usage=False),
    _local("lmstudio", "http://127.0.0.1:1234/v1", stream_usage=False),
    Profile(
        name="custom",
        api="chat",
        base_url=None,
        key_variable=None,
        key_style="bearer",
        key_destinations=(),
        # Unknown server: do not send a request member it may refuse.
        stream_usage=False,
        base_url_hint="http://127.0.0.1:8000/v1",
    ),
)

BUILTIN_NAMES: Final[frozenset[str]] = frozenset(profile.name for profile in BUILTIN_PROFILES)
CUSTOM: Final = "custom"


APIS: Final[tuple[Api, ...]] = ("chat", "anthropic", "responses")


def api_named(text: str, origin: str = "--api") -> Api:
    """The API a flag names, or a ``ConfigError`` listing the three."""
    for api in APIS:
        if text == api:
            return api
    raise ConfigError(f"{origin} must be one of {', '.join(APIS)}, not {text!r}")


def default_key_style(api: Api) -> KeyStyle:
    return "x-api-key" if api == "anthropic" else "bearer"


# -- URLs ------------------------------------------------------------------------------

_SECRET_PARAMETER: Final = re.compile(r"key|token|secret|sig|pass|pwd|auth|credential|code|session", re.IGNORECASE)
_REDACTED: Final = "redacted"
_ECHOED_SCHEMES: Final = frozenset(("ftp", "ws", "wss", "file", "unix", "ssh", "git", "socks5", "grpc"))


def check_base_url(url: str, origin: str) -> SplitResult:
    """An http(s) URL with a host, no fragment, no whitespace; the error never echoes the URL."""
    problem = base_url_problem(url)
    if problem is not None:
        raise ConfigError(f"the base URL from {origin} {problem}")
    return urlsplit(url)


def base_url_problem(url: str) -> str | None:
    """What is wrong with a base URL (``has no host``), without echoing it; None when nothing is."""
    if any(character.isspace() or ord(character) < 0x20 or ord(character) == 0x7F for character in url):
        return "contains whitespace or control characters"
    try:
        parts = urlsplit(url)
    except ValueError:
        return "is not a well-formed URL (an unclosed [ in an IPv6 host?)"
    if parts.scheme not in ("http", "https"):
        # Echo only schemes that cannot be a misplaced secret.
        if parts.scheme in _ECHOED_SCHEMES:
            return f"has scheme {parts.scheme!r} (expected http or https)"
        return "is not an http(s) URL"
    if not parts.hostname:
        return "has no host"
    try:
        _ = parts.port  # urlsplit checks the port only when asked for it
    except ValueError:
        return "has a bad port"
    if parts.fragment or url.endswith("#"):
        return "has a #fragment, which a base URL cannot use"
    return None


def safe_base_url(url: str) -> str:
    """The base URL without credentials or secret-looking query values: what may be shown and journaled.

    Scheme and host are lower-cased and a trailing ``/`` dropped, so that the
    same endpoint always reads the same.
    """
    parts = urlsplit(url)
    netloc = parts.netloc.rpartition("@")[2].lower()
    path = parts.path.rstrip("/")
    query = _safe_query(parts.query)
    return f"{parts.scheme.lower()}://{netloc}{path}" + (f"?{query}" if query else "")


def _safe_query(query: str) -> str:
    if not query:
        return ""
    pairs = parse_qsl(query, keep_blank_values=True)
    shown = [(name, _REDACTED if _secret_looking(name, value) else value) for name, value in pairs]
    return "&".join(f"{quote(name, safe='')}={quote(value, safe='')}" for name, value in shown)


def _secret_looking(name: str, value: str) -> bool:
    if _SECRET_PARAMETER.search(name):
        return True
    # A long mix of letters and digits under an innocent name (?x=sk-abc123…) is treated as a key too.
    return len(value) >= 16 and any(c.isalpha() for c in value) and any(c.isdigit() for c in value)


def is_loopback(host: str) -> bool:
    """``localhost``, 127.0.0.0/8 and ``::1``: this machine, where no key is needed."""
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


def may_receive_key(profile: Profile, scheme: str, host: str) -> bool:
    """Whether ``profile``'s own key may be sent to ``scheme://host``."""
    return any(_destination_matches(pattern, scheme, host) for pattern in profile.key_destinations)


def _destination_matches(pattern: str, scheme: str, host: str) -> bool:
    wanted_scheme, _, wanted_host = pattern.partition("://")
    if scheme != wanted_scheme:
        return False
    if wanted_host.startswith("*."):
        suffix = wanted_host[1:]
        return host.endswith(suffix) and len(host) > len(suffix)
    return host == wanted_host


# -- keys ------------------------------------------------------------------------------


class KeyChoice:
    """Which key goes to the endpoint: the value, its variable, or why there is none.

    A plain class, not a Struct: it holds a key, so it must not be encodable
    and its repr must not show the value.
    """

    __slots__ = ("value", "source", "problem")

    def __init__(self, value: str | None = None, source: str | None = None, problem: str | None = None) -> None:
        self.value = value
        self.source = source
        self.problem = problem
        """Set when the endpoint needs a key that may not, or cannot, be sent."""

    def __repr__(self) -> str:
        return f"KeyChoice(source={self.source!r}, problem={self.problem!r})"

    __str__ = __repr__


def choose_key(profile: Profile, base_url: str, environ: Mapping[str, str]) -> KeyChoice:
    """Apply the key rules to one (profile, base URL, environment); never reads anything else."""
    parts = urlsplit(base_url)
    scheme = parts.scheme.lower()
    host = parts.hostname or ""
    explicit = _environment_key(environ, EXPLICIT_KEY_ENV)
    if explicit is not None:
        return explicit
    if is_loopback(host):
        return KeyChoice()
    own = _environment_key(environ, profile.key_variable) if profile.key_variable else None
    if profile.key_variable and may_receive_key(profile, scheme, host):
        if own is None:
            return KeyChoice(problem=f"no API key for {host}: set {profile.key_variable} (or {EXPLICIT_KEY_ENV})")
        return own
    if own is not None and own.problem is None:
        where = ", ".join(profile.key_destinations)
        return KeyChoice(
            problem=(
                f"{profile.key_variable} is only ever sent to {where}, not to {scheme}://{host}: "
                f"set {EXPLICIT_KEY_ENV} to send a key there"
            )
        )
    return KeyChoice(problem=f"no API key may be sent to {host}: set {EXPLICIT_KEY_ENV} (any value if the server needs none)")


def _environment_key(environ: Mapping[str, str], variable: str | None) -> KeyChoice | None:
    """The key in ``variable``, trimmed; None when unset or blank; a problem when no header can carry it."""
    if variable is None:
        return None
    value = environ.get(variable, "").strip()
    if not value:
        return None
    if not all(0x20 <= ord(character) < 0x7F for character in value):
        return KeyChoice(problem=f"{variable} holds a character an HTTP header cannot carry")
    return KeyChoice(value=value, source=variable)


def key_is_set(environ: Mapping[str, str], variable: str | None) -> bool:
    return variable is not None and bool(environ.get(variable, "").strip())


# -- the endpoint --------------------------------------------------------------------


class Endpoint:
    """Where requests go and with which key: the resolved profile, base URL, model and headers.

    The key is held privately: it is in no repr or str, and only
    :meth:`auth_header` hands it out, as the one header that carries it.
    ``base_url`` is the safe form (no credentials, no secret query values);
    :meth:`url` builds the URL to request, credentials and query included.
    """

    __slots__ = ("profile", "model", "key_source", "chosen_by", "_request_base", "_key", "_key_problem")

    def __init__(
        self,
        profile: Profile,
        base_url: str,
        model: str,
        *,
        key: str | None = None,
        key_source: str | None = None,
        key_problem: str | None = None,
        chosen_by: str = "",
    ) -> None:
        self.profile = profile
        self.model = model
        self.key_source = key_source
        """The environment variable the key came from, or None when no key is sent."""
        self.chosen_by = chosen_by
        """How the profile was chosen: ``--provider``, ``OPENROUTER_API_KEY``, the config file, ..."""
        self._request_base = base_url.rstrip("/")
        self._key = key
        self._key_problem = key_problem

    # -- what the snapshot and the session header hold (no secrets) --

    @property
    def name(self) -> str:
        return self.profile.name

    @property
    def api(self) -> Api:
        return self.profile.api

    @property
    def adapters(self) -> tuple[str, ...]:
        return self.profile.adapters

    @property
    def base_url(self) -> str:
        return safe_base_url(self._request_base)

    @property
    def host(self) -> str:
        return urlsplit(self._request_base).hostname or ""

    @property
    def is_local(self) -> bool:
        return is_loopback(self.host)

    @property
    def routing_identity(self) -> str:
        """``openrouter@https://openrouter.ai/api/v1#openai/gpt-4o-mini``: profile, safe base URL, model."""
        return routing_identity(self.profile.name, self._request_base, self.model)

    @property
    def adapter_identity(self) -> str:
        """``chat-completions:v1``, ``chat-completions:v1+empty-tool-calls-is-none@1``, ``anthropic-messages:v1``..."""
        return adapter_identity(self.profile.api, self.profile.adapters)

    @property
    def headers(self) -> dict[str, str]:
        """Extra non-secret headers for every request (``anthropic-version``, ``X-Title``)."""
        return dict(self.profile.headers)

    # -- what the HTTP client needs --

    def url(self, path: str) -> str:
        """``{base URL}/{path}``, keeping the base URL's query (Azure's ``api-version``) after the path."""
        parts = urlsplit(self._request_base)
        joined = parts.path.rstrip("/") + "/" + path.lstrip("/")
        return parts._replace(path=joined).geturl()

    @property
    def has_key(self) -> bool:
        return self._key is not None

    def require_key(self) -> None:
        """Raise the ``ConfigError`` that says which variable to set, if this endpoint cannot get a key."""
        if self._key_problem is not None:
            raise ConfigError(self._key_problem)

    def auth_header(self) -> tuple[str, str] | None:
        """The one header that carries the key (``Authorization``, ``x-api-key`` or ``api-key``), or None."""
        self.require_key()
        if self._key is None:
            return None
        style = self.profile.key_style
        if style == "bearer":
            return ("Authorization", f"Bearer {self._key}")
        return (style, self._key)

    def secrets(self) -> Secrets:
        """What must never be journaled or printed: the key, its header value, the base URL's credentials."""
        return collect_secrets(api_key=self._key, base_url=self._request_base)

    def request_headers(self) -> dict[str, str]:
        """The extra headers plus the key's header: everything profile-specific a request carries."""
        headers = self.headers
        auth = self.auth_header()
        if auth is not None:
            headers[auth[0]] = auth[1]
        return headers

    def __repr__(self) -> str:
        key = f"from {self.key_source}" if self._key is not None else "none"
        return f"Endpoint(profile={self.profile.name!r}, base_url={self.base_url!r}, model={self.model!r}, key=<{key}>)"

    __str__ = __repr__

    def __reduce__(self) -> tuple[object, ...]:
        # Pickling would write the key wherever the pickle goes.
        raise TypeError("an Endpoint holds an API key and cannot be serialised")


# -- routing identity ------------------------------------------------------------------


class RoutingTarget(msgspec.Struct, frozen=True, forbid_unknown_fields=True):
    """What a routing identity written by this code says: profile, safe base URL, model."""

    profile: str
    base_url: str
    model: str


def routing_identity(profile_name: str, base_url: str, model: str) -> str:
    """``NAME@SAFE_BASE_URL#MODEL``; the safe base URL has no ``#``, so the model may hold anything."""
    return f"{profile_name}@{safe_base_url(base_url)}#{model}"


def parse_routing_identity(identity: str) -> RoutingTarget | None:
    """Profile, base URL and model back from an identity this code wrote; None for anything else.

    Identities written by older versions (``https://host/v1#model``) have no
    profile and give None.
    """
    name, at, rest = identity.partition("@")
    if not at or not PROFILE_NAME.fullmatch(name):
        return None
    base_url, hash_sign, model = rest.partition("#")
    if not hash_sign or not model:
        return None
    if base_url_problem(base_url) is not None:
        return None
    parts = urlsplit(base_url)
    if "@" in parts.netloc:
        return None
    return RoutingTarget(profile=name, base_url=base_url, model=model)


# -- selection -------------------------------------------------------------------------


class Requested(msgspec.Struct, frozen=True, forbid_unknown_fields=True):
    """What this invocation's flags ask for; None when a flag was not given."""

    provider: str | None = None
    base_url: str | None = None
    model: str | None = None
    api: Api | None = None
    """Only for ``custom`` (whose API the user chooses); any other profile fixes its own."""


def profile_table(config: UserConfig | None = None) -> dict[str, Profile]:
    """Every profile by name: the built-ins, then the config file's (which may not reuse a built-in name)."""
    table = {profile.name: profile for profile in BUILTIN_PROFILES}
    if config is None:
        return table
    for profile in config.profiles:
        if profile.name in table:
            raise ConfigError(f"config file {config.source}: providers.{profile.name}: {profile.name!r} is a built-in provider")
        table[profile.name] = profile
    return table


def select_endpoint(
    requested: Requested,
    environ: Mapping[str, str],
    config: UserConfig | None = None,
    *,
    recorded: RoutingTarget | None = None,
    require_key: bool = True,
) -> Endpoint:
    """Choose the profile, base URL, model and key; pure over its arguments.

    The provider: ``--provider`` / ``TINY_AGENT_PROVIDER``; else ``custom`` when
    a base URL is given (``--base-url`` / ``TINY_AGENT_BASE_URL``); else the
    session's own (``recorded``, from its routing identity, for ``resume``);
    else the config file's ``provider``; else the one provider whose own key
    variable is set.  ``require_key=False`` defers the key check to
    :meth:`Endpoint.require_key` (``resume --dry-run`` asks no model).
    """
    table = profile_table(config)
    name, chosen_by = _choose_profile_name(requested, environ, config, recorded, table)
    profile = _resolve_profile(table[name], requested, config)
    base_url, url_origin = _choose_base_url(profile, requested, environ, config, recorded)
    check_base_url(base_url, url_origin)
    model = _choose_model(profile, requested, environ, config, recorded)
    key = choose_key(profile, base_url, environ)
    endpoint = Endpoint(
        profile, base_url, model, key=key.value, key_source=key.source, key_problem=key.problem, chosen_by=chosen_by
    )
    if require_key:
        endpoint.require_key()
    return endpoint


def _choose_profile_name(
    requested: Requested,
    environ: Mapping[str, str],
    config: UserConfig | None,
    recorded: RoutingTarget | None,
    table: Mapping[str, Profile],
) -> tuple[str, str]:
    named = _first_given((requested.provider, "--provider"), (environ.get(PROVIDER_ENV), PROVIDER_ENV))
    if named is not None:
        return _known(named[0], named[1], table), named[1]
    url_given = _first_given((requested.base_url, "--base-url"), (environ.get(BASE_URL_ENV), BASE_URL_ENV))
    if url_given is not None:
        return CUSTOM, url_given[1]
    if recorded is not None:
        return _known(recorded.profile, "the session's routing identity", table), "the session"
    if config is not None and config.provider is not None:
        return _known(config.provider, f"config file {config.source}", table), f"config file {config.source}"
    if config is not None and config.base_url is not None:
        return CUSTOM, f"config file {config.source}"
    return _profile_by_key(environ, table)


def _first_given(*candidates: tuple[str | None, str]) -> tuple[str, str] | None:
    """The first (value, origin) whose value is set and not blank."""
    for value, origin in candidates:
        if value is not None and value.strip():
            return value.strip(), origin
    return None


def _known(name: str, origin: str, table: Mapping[str, Profile]) -> str:
    if name not in table:
        raise ConfigError(f"unknown provider {name!r} (from {origin}); choices: {', '.join(table)}")
    return name


def _profile_by_key(environ: Mapping[str, str], table: Mapping[str, Profile]) -> tuple[str, str]:
    """The one profile whose own key variable is set (the first profile per variable counts)."""
    by_variable: dict[str, str] = {}
    for profile in table.values():
        if profile.key_variable is not None and profile.key_variable not in by_variable:
            by_variable[profile.key_variable] = profile.name
    present = [(variable, name) for variable, name in by_variable.items() if key_is_set(environ, variable)]
    how = f'pick one with --provider NAME, {PROVIDER_ENV}=NAME or provider = "NAME" in the config file'
    if len(present) == 1:
        variable, name = present[0]
        return name, variable
    if present:
        found = ", ".join(f"{variable} ({name})" for variable, name in present)
        raise ConfigError(f"several provider keys are set: {found}; {how} (choices: {', '.join(name for _, name in present)})")
    explicit = f" ({EXPLICIT_KEY_ENV} is set but names no provider; add --provider or --base-url)"
    hint = explicit if key_is_set(environ, EXPLICIT_KEY_ENV) else ""
    raise ConfigError(f"no provider chosen and no provider key set{hint}; {how} (choices: {', '.join(table)})")


def _resolve_profile(profile: Profile, requested: Requested, config: UserConfig | None) -> Profile:
    """The profile as used: ``custom`` takes its API and adapters from the flags and the config file."""
    if profile.name != CUSTOM:
        if requested.api is not None and requested.api != profile.api:
            raise ConfigError(f"provider {profile.name} speaks the {profile.api} API; --api applies to custom only")
        return profile
    if config is None:
        return _custom_speaking(profile, requested.api or "chat", ())
    api = requested.api or config.custom_api
    if config.custom_adapters and api != "chat":
        raise ConfigError(f"config file {config.source}: custom.adapters apply to the chat API only, not to {api}")
    return _custom_speaking(profile, api, config.custom_adapters)


def _custom_speaking(profile: Profile, api: Api, adapters: tuple[str, ...]) -> Profile:
    """``custom`` with the API the user chose: that API's key header, required headers and defaults."""
    return msgspec.structs.replace(
        profile,
        api=api,
        adapters=adapters,
        key_style=default_key_style(api),
        headers=API_HEADERS.get(api, ()),
        max_tokens=DEFAULT_MAX_TOKENS.get(api),
    )


def _config_base_url_applies(config: UserConfig, profile: Profile) -> bool:
    """The config file's base_url goes with its own provider, or with custom when it names none."""
    return config.provider == profile.name or (config.provider is None and profile.name == CUSTOM)


def _config_model_applies(config: UserConfig, profile: Profile) -> bool:
    """The config file's model goes with its own provider, or with any when it names none."""
    return config.provider is None or config.provider == profile.name


def _choose_base_url(
    profile: Profile,
    requested: Requested,
    environ: Mapping[str, str],
    config: UserConfig | None,
    recorded: RoutingTarget | None,
) -> tuple[str, str]:
    given = _first_given((requested.base_url, "--base-url"), (environ.get(BASE_URL_ENV), BASE_URL_ENV))
    if given is not None:
        return given
    if recorded is not None and recorded.profile == profile.name:
        if f"={_REDACTED}" in recorded.base_url:
            # The journal kept the URL without its secret; it cannot be requested as recorded.
            raise ConfigError(f"the session's base URL had a secret that was not recorded: pass --base-url or set {BASE_URL_ENV}")
        return recorded.base_url, "the session's routing identity"
    if config is not None and config.base_url is not None and _config_base_url_applies(config, profile):
        return config.base_url, f"config file {config.source}"
    if profile.base_url is not None:
        return profile.base_url, f"provider {profile.name}"
    example = f" (for example {profile.base_url_hint})" if profile.base_url_hint else ""
    raise ConfigError(f"provider {profile.name} needs a base URL: pass --base-url or set {BASE_URL_ENV}{example}")


def _choose_model(
    profile: Profile,
    requested: Requested,
    environ: Mapping[str, str],
    config: UserConfig | None,
    recorded: RoutingTarget | None,
) -> str:
    given = _first_given((requested.model, "--model"), (environ.get(MODEL_ENV), MODEL_ENV))
    if given is not None:
        return given[0]
    if recorded is not None:
        return recorded.model
    if config is not None and config.model is not None and _config_model_applies(config, profile):
        return config.model
    raise ConfigError(f"no model for {profile.name}: pass --model or set {MODEL_ENV}")


# -- tiny-agent providers ------------------------------------------------------------------


class ProfileListing(msgspec.Struct, frozen=True, forbid_unknown_fields=True):
    """One row of ``tiny-agent providers``: never the key, only whether it is set."""

    name: str
    api: Api
    base_url: str | None
    key_variable: str | None
    key_present: bool
    key_style: KeyStyle
    adapters: tuple[str, ...]
    streaming: bool
    origin: ProfileOrigin


def list_profiles(environ: Mapping[str, str], config: UserConfig | None = None) -> list[ProfileListing]:
    """Every profile, built-ins first, with whether its own key variable is set."""
    return [
        ProfileListing(
            name=profile.name,
            api=profile.api,
            base_url=safe_base_url(profile.base_url) if profile.base_url else None,
            key_variable=profile.key_variable,
            key_present=key_is_set(environ, profile.key_variable),
            key_style=profile.key_style,
            adapters=profile.adapters,
            streaming=profile.streaming,
            origin=profile.origin,
        )
        for profile in profile_table(config).values()
    ]
