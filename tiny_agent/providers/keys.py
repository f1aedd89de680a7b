"""Where a key may go, and what of a base URL may be shown (docs/provider.md, "Keys go only where they belong").  Pure."""

from __future__ import annotations

import ipaddress
import re
from collections.abc import Mapping
from typing import TYPE_CHECKING, Final
from urllib.parse import parse_qsl, quote, urlsplit

from tiny_agent.journal.secrets import Secrets, is_secret_parameter, key_secrets

if TYPE_CHECKING:
    from tiny_agent.providers.profiles import Profile

EXPLICIT_KEY_ENV: Final = "TINY_AGENT_API_KEY"
PROFILE_NAME: Final = re.compile(r"[a-z0-9][a-z0-9._-]{0,63}")
"""A profile's name: what routing identities and the config file may hold."""
KEY_VARIABLE_SUFFIX: Final = "_API_KEY"
REDACTED: Final = "redacted"
_ECHOED_SCHEMES: Final = frozenset(("ftp", "ws", "wss", "file", "unix", "ssh", "git", "socks5", "grpc"))
"""Schemes a message may show: none of them can be a misplaced secret."""


def base_url_problem(url: str) -> str | None:
    """What is wrong with a base URL (``has no host``), without echoing it; None when nothing is."""
    if any(character.isspace() or ord(character) < 0x20 or ord(character) == 0x7F for character in url):
        return "contains whitespace or control characters"
    try:
        parts = urlsplit(url)
    except ValueError:
        return "is not a well-formed URL (an unclosed [ in an IPv6 host?)"
    if parts.scheme in _ECHOED_SCHEMES:
        return f"has scheme {parts.scheme!r} (expected http or https)"
    if parts.scheme not in ("http", "https"):
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
    """The base URL as shown and journaled: no credentials, secret query values redacted, scheme and host lower-cased."""
    parts = urlsplit(url)
    pairs = parse_qsl(parts.query, keep_blank_values=True)
    shown = ((name, REDACTED if is_secret_parameter(name, value) else value) for name, value in pairs)
    query = "&".join(f"{quote(name, safe='')}={quote(value, safe='')}" for name, value in shown)
    netloc = parts.netloc.rpartition("@")[2].lower()
    return f"{parts.scheme.lower()}://{netloc}{parts.path.rstrip('/')}" + (f"?{query}" if query else "")


def is_loopback(host: str) -> bool:
    """``localhost``, 127.0.0.0/8 and ``::1``: this machine, where no key is needed."""
    try:
        return host == "localhost" or ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


def may_receive_key(profile: Profile, scheme: str, host: str) -> bool:
    """Whether ``profile``'s own key may be sent to ``scheme://host`` (``*.`` in a destination: any subdomain)."""
    for pattern in profile.key_destinations:
        wanted_scheme, _, wanted_host = pattern.partition("://")
        if wanted_host.startswith("*."):
            matches = host.endswith(wanted_host[1:]) and host != wanted_host[1:]
        else:
            matches = host == wanted_host
        if scheme == wanted_scheme and matches:
            return True
    return False


class KeyChoice:
    """Which key goes to the endpoint: the value, its variable, or why there is none (a plain class: no repr of the key)."""

    __slots__ = ("value", "source", "problem")

    def __init__(self, value: str | None = None, source: str | None = None, problem: str | None = None) -> None:
        self.value = value
        self.source = source
        self.problem = problem

    def __repr__(self) -> str:
        return f"KeyChoice(source={self.source!r}, problem={self.problem!r})"


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
    own = _environment_key(environ, profile.key_variable)
    if profile.key_variable and may_receive_key(profile, scheme, host):
        return own or KeyChoice(problem=f"no API key for {host}: set {profile.key_variable} (or {EXPLICIT_KEY_ENV})")
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
    value = environ.get(variable, "").strip() if variable is not None else ""
    if not value:
        return None
    if not all(0x20 <= ord(character) < 0x7F for character in value):
        return KeyChoice(problem=f"{variable} holds a character an HTTP header cannot carry")
    return KeyChoice(value=value, source=variable)


def environment_secrets(environ: Mapping[str, str]) -> Secrets:
    """The keys the environment holds (``TINY_AGENT_API_KEY``, every ``*_API_KEY``), with their bearer headers."""
    keys = (value.strip() for name, value in environ.items() if name == EXPLICIT_KEY_ENV or name.endswith(KEY_VARIABLE_SUFFIX))
    return Secrets(form for key in keys for form in key_secrets(key))


def key_is_set(environ: Mapping[str, str], variable: str | None) -> bool:
    return variable is not None and bool(environ.get(variable, "").strip())
