"""Choosing the endpoint of an invocation from flags, environment, the user's config and the session's record.

The order and where keys may go: docs/provider.md ("Choosing a provider", "Keys go only where they belong").
Pure: the environment is a mapping passed in, the config file is read by :mod:`.userconfig`.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING, NamedTuple

import msgspec

from tiny_agent.errors import ConfigError
from tiny_agent.providers.endpoint import Endpoint, RoutingTarget
from tiny_agent.providers.keys import (
    EXPLICIT_KEY_ENV,
    REDACTED,
    base_url_problem,
    choose_key,
    key_is_set,
    safe_base_url,
)
from tiny_agent.providers.profiles import (
    BASE_URL_ENV,
    BUILTIN_PROFILES,
    CUSTOM,
    MODEL_ENV,
    PROVIDER_ENV,
    KeyStyle,
    Profile,
    ProfileOrigin,
    speaking,
)
from tiny_agent.wire.registry import Api

if TYPE_CHECKING:
    from tiny_agent.providers.userconfig import UserConfig

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
    for name in table.keys() & config.provider_models.keys():
        table[name] = msgspec.structs.replace(table[name], model=config.provider_models[name])
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
    """Choose the profile, base URL, model and key, in the order docs/provider.md gives; pure over its arguments.

    ``recorded``: the session's routing identity (``resume``).  ``require_key=False`` defers the key check to
    :meth:`Endpoint.require_key` (``resume --dry-run`` asks no model).
    """
    table = profile_table(config)
    sources = _Sources(requested, environ, config, recorded)
    name, chosen_by = sources.profile_name(table)
    profile = sources.resolved(table[name])
    base_url, url_origin = sources.base_url(profile)
    problem = base_url_problem(base_url)
    if problem is not None:
        raise ConfigError(f"the base URL from {url_origin} {problem}")
    model = sources.model(profile)
    key = choose_key(profile, base_url, environ)
    endpoint = Endpoint(
        profile, base_url, model, key=key.value, key_source=key.source, key_problem=key.problem, chosen_by=chosen_by
    )
    if require_key:
        endpoint.require_key()
    return endpoint


class _Sources(NamedTuple):
    """What the choice is made from, each in the order it counts."""

    requested: Requested
    environ: Mapping[str, str]
    config: UserConfig | None
    recorded: RoutingTarget | None

    def given(self, value: str | None, flag: str, variable: str) -> tuple[str, str] | None:
        """The flag's value, else the environment variable's, with which said it; None when neither is set and not blank."""
        for text, origin in ((value, flag), (self.environ.get(variable), variable)):
            if text is not None and text.strip():
                return text.strip(), origin
        return None

    def profile_name(self, table: Mapping[str, Profile]) -> tuple[str, str]:
        requested, environ, config, recorded = self
        named = self.given(requested.provider, "--provider", PROVIDER_ENV)
        if named is not None:
            return _known(named[0], named[1], table), named[1]
        url_given = self.given(requested.base_url, "--base-url", BASE_URL_ENV)
        if url_given is not None:
            return CUSTOM, url_given[1]
        if recorded is not None:
            return _known(recorded.profile, "the session's routing identity", table), "the session"
        if config is not None and config.provider is not None:
            return _known(config.provider, f"config file {config.source}", table), f"config file {config.source}"
        if config is not None and config.base_url is not None:
            return CUSTOM, f"config file {config.source}"
        return _profile_by_key(environ, table)

    def resolved(self, profile: Profile) -> Profile:
        """The profile as used: ``custom`` speaks the flag's API, else the session's, else the config file's (its adapters)."""
        requested, _, config, recorded = self
        if profile.name != CUSTOM:
            if requested.api is not None and requested.api != profile.api:
                raise ConfigError(f"provider {profile.name} speaks the {profile.api} API; --api applies to custom only")
            return profile
        api = requested.api or (recorded.api if recorded is not None and recorded.profile == CUSTOM else None)
        api = api or (config.custom_api if config is not None else "chat")
        if config is not None and config.custom_adapters and api != "chat":
            raise ConfigError(f"config file {config.source}: custom.adapters apply to the chat API only, not to {api}")
        adapters = config.custom_adapters if config is not None else ()
        return msgspec.structs.replace(profile, adapters=adapters, **speaking(api))

    def base_url(self, profile: Profile) -> tuple[str, str]:
        requested, _, config, recorded = self
        given = self.given(requested.base_url, "--base-url", BASE_URL_ENV)
        if given is not None:
            return given
        if recorded is not None and recorded.profile == profile.name:
            if f"={REDACTED}" in recorded.base_url:
                # The journal kept the URL without its secret; it cannot be requested as recorded.
                raise ConfigError(
                    f"the session's base URL had a secret that was not recorded: pass --base-url or set {BASE_URL_ENV}"
                )
            return recorded.base_url, "the session's routing identity"
        # The config file's base_url goes with its own provider, or with custom when it names none.
        if config is not None and config.base_url is not None and (config.provider or CUSTOM) == profile.name:
            return config.base_url, f"config file {config.source}"
        if profile.base_url is not None:
            return profile.base_url, f"provider {profile.name}"
        example = f" (for example {profile.base_url_hint})" if profile.base_url_hint else ""
        raise ConfigError(f"provider {profile.name} needs a base URL: pass --base-url or set {BASE_URL_ENV}{example}")

    def model(self, profile: Profile) -> str:
        requested, _, config, recorded = self
        given = self.given(requested.model, "--model", MODEL_ENV)
        if given is not None:
            return given[0]
        if recorded is not None:
            return recorded.model
        if config is not None and profile.name in config.provider_models:
            return config.provider_models[profile.name]
        # The config file's model goes with its own provider, or with any when it names none.
        if config is not None and config.model is not None and config.provider in (None, profile.name):
            return config.model
        if profile.model is not None:
            return profile.model
        where = config.source if config is not None else "the config file"
        how = f'pass -m MODEL, set {MODEL_ENV}, or add model = "MODEL" under [providers.{profile.name}] in {where}'
        raise ConfigError(f"no model for {profile.name}: {how}")


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
    model: str | None
    """The default model: the config file's ``[providers.NAME] model``, else the profile's own."""


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
            model=profile.model,
        )
        for profile in profile_table(config).values()
    ]
