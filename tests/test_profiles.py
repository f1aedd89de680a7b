"""Provider profiles: the table, selection, key routing (no key ever reaches a host it was not issued for)."""

from __future__ import annotations

import pickle

import msgspec
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from tiny_agent.errors import ConfigError
from tiny_agent.providers.endpoint import Endpoint, RoutingTarget, parse_routing_identity, routing_identity
from tiny_agent.providers.keys import choose_key, is_loopback, safe_base_url
from tiny_agent.providers.profiles import BUILTIN_PROFILES, api_named
from tiny_agent.providers.selection import Requested, list_profiles, profile_table, select_endpoint
from tiny_agent.providers.userconfig import UserConfig, parse_user_config

SECRET = "sk-SECRET-0123456789abcdef"
"""Every key in these tests holds this, so one substring check finds any leak."""


def key(tag: str) -> str:
    return f"{SECRET}-{tag}"


def select(environ: dict[str, str], config: UserConfig | None = None, **flags: object) -> Endpoint:
    flags.setdefault("model", "m")
    return select_endpoint(Requested(**flags), environ, config)  # type: ignore[arg-type]


def refused(environ: dict[str, str], config: UserConfig | None = None, **flags: object) -> str:
    with pytest.raises(ConfigError) as caught:
        select(environ, config, **flags)
    message = str(caught.value)
    assert SECRET not in message
    assert "\n" not in message
    assert message.startswith("CONFIG: ")
    return message


def sent(endpoint: Endpoint) -> str | None:
    """The key in the auth header, without its scheme."""
    header = endpoint.auth_header()
    return None if header is None else header[1].removeprefix("Bearer ")


# -- the table --------------------------------------------------------------------------------


def test_the_builtin_table_has_every_named_provider_once():
    names = [profile.name for profile in BUILTIN_PROFILES]
    assert len(names) == len(set(names))
    assert set(names) >= {
        "openai", "openrouter", "groq", "mistral", "deepseek", "azure", "ollama", "vllm", "llamacpp", "lmstudio",
        "custom", "anthropic", "openai-responses",
    }


def test_anthropic_sends_its_key_as_x_api_key_with_a_version_header_and_a_max_tokens():
    endpoint = select({"ANTHROPIC_API_KEY": key("a")}, provider="anthropic")
    assert endpoint.api == "anthropic"
    assert endpoint.base_url == "https://api.anthropic.com/v1"
    assert endpoint.request_headers() == {"anthropic-version": "2023-06-01", "x-api-key": key("a")}
    assert endpoint.profile.max_tokens == 8192
    assert endpoint.adapter_identity == "anthropic-messages:v1"


def test_openai_responses_uses_the_openai_key_for_openai_only():
    endpoint = select({"OPENAI_API_KEY": key("o")}, provider="openai-responses")
    assert endpoint.api == "responses"
    assert endpoint.request_headers() == {"Authorization": f"Bearer {key('o')}"}
    assert endpoint.adapter_identity == "openai-responses:v1"
    message = refused({"OPENAI_API_KEY": key("o")}, provider="openai-responses", base_url="https://openrouter.ai/api/v1")
    assert "TINY_AGENT_API_KEY" in message


def test_azure_sends_its_key_in_the_api_key_header():
    endpoint = select(
        {"AZURE_OPENAI_API_KEY": key("z")}, provider="azure", base_url="https://my-res.openai.azure.com/openai/v1"
    )
    assert endpoint.request_headers() == {"api-key": key("z")}
    assert endpoint.profile.adapters == ("absent-content-is-null",)


def test_azure_needs_a_base_url_and_says_what_one_looks_like():
    message = refused({"AZURE_OPENAI_API_KEY": key("z")}, provider="azure")
    assert "needs a base URL" in message
    assert "RESOURCE.openai.azure.com" in message


def test_openrouter_sends_its_app_title():
    endpoint = select({"OPENROUTER_API_KEY": key("r")})
    assert dict(endpoint.profile.headers) == {"X-Title": "tiny-agent"}


@pytest.mark.parametrize(
    ("name", "url"),
    [
        ("ollama", "http://127.0.0.1:11434/v1"),
        ("vllm", "http://127.0.0.1:8000/v1"),
        ("llamacpp", "http://127.0.0.1:8080/v1"),
        ("lmstudio", "http://127.0.0.1:1234/v1"),
    ],
)
def test_local_servers_need_no_key(name, url):
    endpoint = select({}, provider=name)
    assert endpoint.base_url == url
    assert is_loopback(endpoint.host)
    assert endpoint.auth_header() is None
    assert endpoint.key_source is None


# -- keys go only where they belong ------------------------------------------------------------

# (profile, base URL or None for the profile's own, environment) -> the variable whose key is sent
SENT = [
    ("openai", None, {"OPENAI_API_KEY": key("o")}, "OPENAI_API_KEY"),
    ("openai", "https://api.openai.com:443/v1/", {"OPENAI_API_KEY": key("o")}, "OPENAI_API_KEY"),
    ("openai", "https://API.OpenAI.com/v1", {"OPENAI_API_KEY": key("o")}, "OPENAI_API_KEY"),
    ("openrouter", None, {"OPENROUTER_API_KEY": key("r"), "OPENAI_API_KEY": key("o")}, "OPENROUTER_API_KEY"),
    ("groq", None, {"GROQ_API_KEY": key("g")}, "GROQ_API_KEY"),
    ("mistral", None, {"MISTRAL_API_KEY": key("m")}, "MISTRAL_API_KEY"),
    ("deepseek", None, {"DEEPSEEK_API_KEY": key("d")}, "DEEPSEEK_API_KEY"),
    ("azure", "https://r.openai.azure.com/openai/v1", {"AZURE_OPENAI_API_KEY": key("z")}, "AZURE_OPENAI_API_KEY"),
    ("azure", "https://r.cognitiveservices.azure.com/openai/v1", {"AZURE_OPENAI_API_KEY": key("z")}, "AZURE_OPENAI_API_KEY"),
    ("azure", "https://r.services.ai.azure.com/openai/v1", {"AZURE_OPENAI_API_KEY": key("z")}, "AZURE_OPENAI_API_KEY"),
    # The explicit key goes wherever the user points it, loopback included.
    ("openai", None, {"OPENAI_API_KEY": key("o"), "TINY_AGENT_API_KEY": key("t")}, "TINY_AGENT_API_KEY"),
    ("custom", "https://llm.example.com/v1", {"TINY_AGENT_API_KEY": key("t")}, "TINY_AGENT_API_KEY"),
    ("custom", "http://10.0.0.5:8000/v1", {"TINY_AGENT_API_KEY": key("t")}, "TINY_AGENT_API_KEY"),
    ("openai", "https://proxy.example/v1", {"OPENAI_API_KEY": key("o"), "TINY_AGENT_API_KEY": key("t")}, "TINY_AGENT_API_KEY"),
    ("vllm", None, {"TINY_AGENT_API_KEY": key("t")}, "TINY_AGENT_API_KEY"),
    ("ollama", "https://gpu.example.net/v1", {"TINY_AGENT_API_KEY": key("t")}, "TINY_AGENT_API_KEY"),
    # Loopback: no key needed, and none of a provider's own keys is sent there.
    ("custom", "http://127.0.0.1:8000/v1", {"OPENAI_API_KEY": key("o")}, None),
    ("custom", "http://localhost:8000/v1", {"OPENROUTER_API_KEY": key("r")}, None),
    ("custom", "http://[::1]:8000/v1", {"OPENAI_API_KEY": key("o")}, None),
    ("custom", "http://127.8.9.10/v1", {"OPENAI_API_KEY": key("o")}, None),
    ("openai", "http://127.0.0.1:4000/v1", {"OPENAI_API_KEY": key("o")}, None),
    ("ollama", None, {"OPENAI_API_KEY": key("o"), "OPENROUTER_API_KEY": key("r")}, None),
]


@pytest.mark.parametrize(("profile", "url", "environ", "variable"), SENT)
def test_the_key_sent_comes_from_the_one_variable_allowed_there(profile, url, environ, variable):
    endpoint = select(environ, provider=profile, base_url=url)
    assert endpoint.key_source == variable
    assert sent(endpoint) == (environ[variable] if variable else None)
    assert SECRET not in repr(endpoint) and SECRET not in str(endpoint)
    assert SECRET not in endpoint.routing_identity


# (profile, base URL or None, environment) -> the variable the error must name
REFUSED = [
    # The old leak: OPENAI_API_KEY sent to openrouter.ai, or to a custom base URL.
    ("openrouter", None, {"OPENAI_API_KEY": key("o")}, "OPENROUTER_API_KEY"),
    ("custom", "https://llm.example.com/v1", {"OPENAI_API_KEY": key("o")}, "TINY_AGENT_API_KEY"),
    ("custom", "https://api.openai.com/v1", {"OPENAI_API_KEY": key("o")}, "TINY_AGENT_API_KEY"),
    ("custom", "https://openrouter.ai/api/v1", {"OPENROUTER_API_KEY": key("r")}, "TINY_AGENT_API_KEY"),
    ("openai", "https://openrouter.ai/api/v1", {"OPENAI_API_KEY": key("o")}, "TINY_AGENT_API_KEY"),
    ("openrouter", "https://api.openai.com/v1", {"OPENROUTER_API_KEY": key("r")}, "TINY_AGENT_API_KEY"),
    # Hosts that only look like the right one.
    ("openai", "https://api.openai.com.evil.example/v1", {"OPENAI_API_KEY": key("o")}, "TINY_AGENT_API_KEY"),
    ("openai", "https://evilapi.openai.com/v1", {"OPENAI_API_KEY": key("o")}, "TINY_AGENT_API_KEY"),
    ("openai", "https://api.openai.com@evil.example/v1", {"OPENAI_API_KEY": key("o")}, "TINY_AGENT_API_KEY"),
    ("openai", "https://evil.example/api.openai.com/v1", {"OPENAI_API_KEY": key("o")}, "TINY_AGENT_API_KEY"),
    ("openai", "https://evil.example/v1?host=api.openai.com", {"OPENAI_API_KEY": key("o")}, "TINY_AGENT_API_KEY"),
    ("azure", "https://openai.azure.com/openai/v1", {"AZURE_OPENAI_API_KEY": key("z")}, "TINY_AGENT_API_KEY"),
    ("azure", "https://r.openai.azure.com.evil.example/v1", {"AZURE_OPENAI_API_KEY": key("z")}, "TINY_AGENT_API_KEY"),
    ("azure", "https://r-openai.azure.com/v1", {"AZURE_OPENAI_API_KEY": key("z")}, "TINY_AGENT_API_KEY"),
    # A provider's own key never travels in clear text.
    ("openai", "http://api.openai.com/v1", {"OPENAI_API_KEY": key("o")}, "TINY_AGENT_API_KEY"),
    # Another provider's key is never a substitute.
    ("groq", None, {"OPENAI_API_KEY": key("o"), "OPENROUTER_API_KEY": key("r")}, "GROQ_API_KEY"),
    ("anthropic", None, {"OPENAI_API_KEY": key("o")}, "ANTHROPIC_API_KEY"),
    ("openai", None, {"OPENAI_API_KEY": "   "}, "OPENAI_API_KEY"),
    # A remote server with no key of its own must be given one explicitly.
    ("vllm", "https://gpu.example.net/v1", {"OPENAI_API_KEY": key("o")}, "TINY_AGENT_API_KEY"),
    ("custom", "http://10.0.0.5:8000/v1", {}, "TINY_AGENT_API_KEY"),
]


@pytest.mark.parametrize(("profile", "url", "environ", "variable"), REFUSED)
def test_a_remote_url_with_no_key_that_may_go_there_is_refused_naming_the_variable(profile, url, environ, variable):
    message = refused(environ, provider=profile, base_url=url)
    assert variable in message


@pytest.mark.parametrize(("profile", "url", "environ", "variable"), REFUSED)
def test_with_the_key_check_deferred_the_endpoint_still_sends_nothing(profile, url, environ, variable):
    endpoint = select_endpoint(Requested(provider=profile, base_url=url, model="m"), environ, require_key=False)
    assert endpoint.key_source is None
    with pytest.raises(ConfigError, match=variable):
        endpoint.auth_header()
    with pytest.raises(ConfigError, match=variable):
        endpoint.request_headers()


def test_only_openai_api_key_set_selects_openai_and_never_openrouter():
    endpoint = select({"OPENAI_API_KEY": key("o")})
    assert endpoint.name == "openai"
    assert endpoint.host == "api.openai.com"
    assert endpoint.chosen_by == "OPENAI_API_KEY"


def test_only_openai_api_key_set_with_a_base_url_is_custom_and_gets_no_key():
    message = refused({"OPENAI_API_KEY": key("o")}, base_url="https://openrouter.ai/api/v1")
    assert "TINY_AGENT_API_KEY" in message
    assert "openrouter.ai" in message


def test_the_profiles_own_key_refusal_says_where_that_key_may_go():
    message = refused({"OPENAI_API_KEY": key("o")}, provider="openai", base_url="https://proxy.example/v1")
    assert message == (
        "CONFIG: OPENAI_API_KEY is only ever sent to https://api.openai.com, not to https://proxy.example: "
        "set TINY_AGENT_API_KEY to send a key there"
    )


def test_a_key_no_header_can_carry_is_refused_without_echoing_it():
    message = refused({"OPENAI_API_KEY": SECRET + "\n" + "x"}, provider="openai")
    assert "OPENAI_API_KEY holds a character an HTTP header cannot carry" in message
    message = refused({"TINY_AGENT_API_KEY": SECRET + "é"}, provider="openai")
    assert "TINY_AGENT_API_KEY" in message


def test_surrounding_whitespace_is_trimmed_from_a_key():
    endpoint = select({"OPENAI_API_KEY": f"  {key('o')}\n"}, provider="openai")
    assert sent(endpoint) == key("o")


hosts = st.sampled_from(
    [
        "api.openai.com", "openrouter.ai", "api.anthropic.com", "api.groq.com", "api.mistral.ai", "api.deepseek.com",
        "r.openai.azure.com", "openai.azure.com", "evil.example", "api.openai.com.evil.example", "127.0.0.1",
        "localhost", "[::1]", "10.0.0.5", "example.com",
    ]
)
variables = st.sampled_from(
    ["OPENAI_API_KEY", "OPENROUTER_API_KEY", "ANTHROPIC_API_KEY", "GROQ_API_KEY", "MISTRAL_API_KEY",
     "DEEPSEEK_API_KEY", "AZURE_OPENAI_API_KEY", "TINY_AGENT_API_KEY"]
)


@settings(max_examples=500)
@given(
    profile=st.sampled_from(BUILTIN_PROFILES),
    scheme=st.sampled_from(["http", "https"]),
    host=hosts,
    present=st.sets(variables),
)
def test_a_providers_own_key_reaches_only_its_own_https_hosts(profile, scheme, host, present):
    environ = {variable: key(variable) for variable in present}
    choice = choose_key(profile, f"{scheme}://{host}/v1", environ)
    assert SECRET not in repr(choice)
    if choice.source is None:
        assert choice.value is None
        return
    assert choice.value == environ[choice.source]
    if choice.source == "TINY_AGENT_API_KEY":
        return
    assert choice.source == profile.key_variable
    assert scheme == "https"
    bare = host.strip("[]")
    assert any(
        bare == pattern.partition("://")[2] or bare.endswith(pattern.partition("://")[2].removeprefix("*"))
        for pattern in profile.key_destinations
    )
    assert bare not in ("127.0.0.1", "localhost", "::1")


# -- routing identity --------------------------------------------------------------------------


def test_the_routing_identity_names_profile_base_url_and_model():
    endpoint = select({"OPENROUTER_API_KEY": key("r")}, model="openai/gpt-4o-mini")
    assert endpoint.routing_identity == "openrouter@https://openrouter.ai/api/v1#openai/gpt-4o-mini"
    assert parse_routing_identity(endpoint.routing_identity) == RoutingTarget(
        profile="openrouter", base_url="https://openrouter.ai/api/v1", model="openai/gpt-4o-mini"
    )


def test_credentials_in_a_base_url_never_reach_the_routing_identity_or_the_repr():
    url = f"http://user:{SECRET}@127.0.0.1:8000/v1/?api_key={SECRET}&token={SECRET}&x={SECRET}&api-version=2024-10-21"
    endpoint = select({}, base_url=url)
    identity = endpoint.routing_identity
    assert SECRET not in identity
    assert "user" not in identity
    assert identity == (
        "custom@http://127.0.0.1:8000/v1?api_key=redacted&token=redacted&x=redacted&api-version=2024-10-21#m"
    )
    assert SECRET not in repr(endpoint)
    assert SECRET not in endpoint.base_url
    # The request itself still carries what the user wrote.
    assert endpoint.url("chat/completions") == (
        f"http://user:{SECRET}@127.0.0.1:8000/v1/chat/completions"
        f"?api_key={SECRET}&token={SECRET}&x={SECRET}&api-version=2024-10-21"
    )


@pytest.mark.parametrize(
    ("given", "safe"),
    [
        ("https://Openrouter.AI/api/v1/", "https://openrouter.ai/api/v1"),
        ("https://a:b@h.example:8443/v1", "https://h.example:8443/v1"),
        ("https://h.example/v1?api-version=2024-10-21", "https://h.example/v1?api-version=2024-10-21"),
        ("https://h.example/v1?code=abc&sig=1&Subscription-Key=2", "https://h.example/v1?code=redacted&sig=redacted&Subscription-Key=redacted"),
        ("http://[::1]:8000/v1", "http://[::1]:8000/v1"),
    ],
)
def test_safe_base_urls(given, safe):
    assert safe_base_url(given) == safe
    assert safe_base_url(safe) == safe


def test_a_model_may_hold_any_character():
    identity = routing_identity("custom", "http://127.0.0.1/v1", "org/model#7@x y")
    assert parse_routing_identity(identity) == RoutingTarget("custom", "http://127.0.0.1/v1", "org/model#7@x y")


@pytest.mark.parametrize(
    "identity",
    [
        "https://openrouter.ai/api/v1#openai/gpt-4o-mini",
        "http://user:secret@127.0.0.1:8000/v1#m",
        "http://127.0.0.1:8000#m@x",
        "openrouter:chat-completions:v1",
        "openrouter@https://openrouter.ai/api/v1",
        "openrouter@https://openrouter.ai/api/v1#",
        "Open Router@https://openrouter.ai/api/v1#m",
        "custom@ftp://h/v1#m",
        "custom@https:///v1#m",
        "",
    ],
)
def test_identities_not_written_by_this_code_parse_to_none(identity):
    assert parse_routing_identity(identity) is None


@pytest.mark.parametrize(
    ("url", "problem"),
    [
        (f"ftp://u:{SECRET}@h.example/v1", "has scheme 'ftp' (expected http or https)"),
        (f"{SECRET}://h.example/v1", "is not an http(s) URL"),
        (f"h.example/v1?key={SECRET}", "is not an http(s) URL"),
        (f"https://u:{SECRET}@/v1", "has no host"),
        (f"https://h.example/v1#{SECRET}", "has a #fragment, which a base URL cannot use"),
        (f"https://h.example/v1?key={SECRET} x", "contains whitespace or control characters"),
        (f"https://u:{SECRET}@h.example:99999/v1", "has a bad port"),
    ],
)
def test_a_bad_base_url_is_refused_without_echoing_it(url, problem):
    message = refused({"TINY_AGENT_API_KEY": key("t")}, base_url=url)
    assert message == f"CONFIG: the base URL from --base-url {problem}"


def test_request_urls_keep_the_base_urls_query_after_the_path():
    endpoint = select(
        {"AZURE_OPENAI_API_KEY": key("z")},
        provider="azure",
        base_url="https://r.openai.azure.com/openai/deployments/gpt4o/?api-version=2024-10-21",
    )
    expected = "https://r.openai.azure.com/openai/deployments/gpt4o/chat/completions?api-version=2024-10-21"
    assert endpoint.url("/chat/completions") == expected
    assert endpoint.url("chat/completions") == expected
    assert select({}, provider="vllm").url("/chat/completions") == "http://127.0.0.1:8000/v1/chat/completions"


def test_the_headers_are_a_fresh_copy_each_time():
    endpoint = select({"ANTHROPIC_API_KEY": key("a")}, provider="anthropic")
    endpoint.request_headers()["anthropic-version"] = "tampered"
    assert endpoint.request_headers()["anthropic-version"] == "2023-06-01"


def test_api_named_accepts_the_three_apis_only():
    assert [api_named(name) for name in ("chat", "anthropic", "responses")] == ["chat", "anthropic", "responses"]
    with pytest.raises(ConfigError, match="--api must be one of chat, anthropic, responses, not 'messages'"):
        api_named("messages")


def test_an_endpoint_is_not_picklable():
    endpoint = select({"OPENAI_API_KEY": key("o")})
    with pytest.raises(TypeError):
        pickle.dumps(endpoint)


# -- selection -----------------------------------------------------------------------------------


def test_provider_flag_beats_the_environment_and_the_config_file():
    config = parse_user_config(b'provider = "groq"\n', "/c.toml")
    environ = {
        "TINY_AGENT_PROVIDER": "mistral",
        "OPENAI_API_KEY": key("o"),
        "MISTRAL_API_KEY": key("m"),
        "GROQ_API_KEY": key("g"),
    }
    assert select(environ, config, provider="openai").name == "openai"
    assert select(environ, config).name == "mistral"
    del environ["TINY_AGENT_PROVIDER"]
    assert select(environ, config).name == "groq"
    assert select(environ, config).chosen_by == "config file /c.toml"


def test_a_base_url_with_no_provider_named_means_custom():
    endpoint = select({"OPENROUTER_API_KEY": key("r")}, base_url="http://127.0.0.1:8000/v1")
    assert endpoint.name == "custom"
    assert endpoint.chosen_by == "--base-url"
    assert select({"TINY_AGENT_BASE_URL": "http://127.0.0.1:9/v1"}).name == "custom"


def test_a_base_url_beats_the_config_files_provider():
    config = parse_user_config(b'provider = "openrouter"\n', "/c.toml")
    assert select({}, config, base_url="http://127.0.0.1:8000/v1").name == "custom"


def test_with_nothing_named_the_one_provider_with_a_key_is_chosen():
    assert select({"GROQ_API_KEY": key("g")}).name == "groq"
    assert select({"ANTHROPIC_API_KEY": key("a")}).name == "anthropic"


def test_with_no_key_set_the_error_lists_every_choice_and_how_to_pick():
    message = refused({})
    assert message.startswith("CONFIG: no provider chosen and no provider key set; pick one with --provider NAME")
    for profile in BUILTIN_PROFILES:
        assert profile.name in message


def test_with_several_keys_set_the_error_lists_those_providers():
    message = refused({"OPENAI_API_KEY": key("o"), "ANTHROPIC_API_KEY": key("a")})
    assert "several provider keys are set: OPENAI_API_KEY (openai), ANTHROPIC_API_KEY (anthropic)" in message
    assert message.endswith("(choices: openai, anthropic)")
    assert "--provider NAME" in message


def test_the_explicit_key_alone_names_no_provider():
    message = refused({"TINY_AGENT_API_KEY": key("t")})
    assert "TINY_AGENT_API_KEY is set but names no provider" in message


def test_an_unknown_provider_is_refused_with_the_choices():
    message = refused({}, provider="open-ai")
    assert message.startswith("CONFIG: unknown provider 'open-ai' (from --provider); choices: openai, openrouter,")
    message = refused({"TINY_AGENT_PROVIDER": "nope"})
    assert "(from TINY_AGENT_PROVIDER)" in message


def test_the_model_is_the_flags_then_the_config_files_then_the_profiles_default():
    environ = {"OPENAI_API_KEY": key("o")}
    assert select_endpoint(Requested(), environ).model == "gpt-4.1-mini"
    assert select_endpoint(Requested(), {**environ, "TINY_AGENT_MODEL": "gpt"}).model == "gpt"
    config = parse_user_config(b'model = "any"\n[providers.openai]\nmodel = "mine"\n', "/c.toml")
    assert select_endpoint(Requested(), environ, config).model == "mine"
    assert select_endpoint(Requested(model="flag"), environ, config).model == "flag"
    assert select_endpoint(Requested(provider="groq"), {"GROQ_API_KEY": key("g")}, config).model == "any"
    assert {row.name: row.model for row in list_profiles(environ, config)}["openai"] == "mine"
    with pytest.raises(ConfigError) as refusal:
        select_endpoint(Requested(provider="ollama"), {}, parse_user_config(b"", "/c.toml"))
    assert str(refusal.value) == (
        'CONFIG: no model for ollama: pass -m MODEL, set TINY_AGENT_MODEL, or add model = "MODEL" under [providers.ollama] in /c.toml'
    )
    ollama = parse_user_config(b'[providers.ollama]\nmodel = "qwen3:8b"\n', "/c.toml")
    assert select_endpoint(Requested(provider="ollama"), {}, ollama).model == "qwen3:8b"


def test_the_config_files_model_and_base_url_go_with_its_provider_only():
    config = parse_user_config(
        b'provider = "azure"\nmodel = "gpt-4o"\nbase_url = "https://r.openai.azure.com/openai/v1"\n', "/c.toml"
    )
    environ = {"AZURE_OPENAI_API_KEY": key("z"), "OPENAI_API_KEY": key("o")}
    endpoint = select_endpoint(Requested(), environ, config)
    assert (endpoint.name, endpoint.model, endpoint.base_url) == ("azure", "gpt-4o", "https://r.openai.azure.com/openai/v1")
    assert select_endpoint(Requested(provider="openai"), environ, config).model == "gpt-4.1-mini"
    assert select_endpoint(Requested(provider="openai", model="x"), environ, config).base_url == "https://api.openai.com/v1"


def test_a_config_model_with_no_provider_goes_with_whichever_is_chosen():
    config = parse_user_config(b'model = "shared-model"\n', "/c.toml")
    assert select_endpoint(Requested(), {"GROQ_API_KEY": key("g")}, config).model == "shared-model"


def test_the_session_recorded_routing_is_used_when_nothing_is_named():
    recorded = parse_routing_identity("vllm@http://127.0.0.1:8001/v1#qwen")
    endpoint = select_endpoint(Requested(), {"OPENAI_API_KEY": key("o")}, recorded=recorded)
    assert (endpoint.name, endpoint.base_url, endpoint.model) == ("vllm", "http://127.0.0.1:8001/v1", "qwen")
    assert endpoint.routing_identity == "vllm@http://127.0.0.1:8001/v1#qwen"
    switched = select_endpoint(Requested(provider="openai"), {"OPENAI_API_KEY": key("o")}, recorded=recorded)
    assert (switched.name, switched.base_url, switched.model) == ("openai", "https://api.openai.com/v1", "qwen")


def test_a_recorded_base_url_whose_secret_was_redacted_must_be_given_again():
    recorded = RoutingTarget("custom", "https://h.example/v1?key=redacted", "m")
    with pytest.raises(ConfigError, match="pass --base-url"):
        select_endpoint(Requested(), {"TINY_AGENT_API_KEY": key("t")}, recorded=recorded)


def test_custom_speaks_the_api_the_user_chooses():
    endpoint = select({"TINY_AGENT_API_KEY": key("t")}, base_url="https://gw.example/v1", api="anthropic")
    assert endpoint.api == "anthropic"
    assert endpoint.request_headers() == {"anthropic-version": "2023-06-01", "x-api-key": key("t")}
    assert endpoint.profile.max_tokens == 8192
    assert select({}, base_url="http://127.0.0.1/v1").api == "chat"


def test_custom_takes_its_api_and_adapters_from_the_config_file():
    config = parse_user_config(b'[custom]\nadapters = ["empty-tool-calls-is-none"]\n', "/c.toml")
    endpoint = select({}, config, base_url="http://127.0.0.1:8000/v1")
    assert endpoint.adapter_identity == "chat-completions:v1+empty-tool-calls-is-none@1"
    assert select({}, base_url="http://127.0.0.1:8000/v1").adapter_identity == "chat-completions:v1"
    with pytest.raises(ConfigError, match="custom.adapters apply to the chat API only"):
        select({}, config, base_url="http://127.0.0.1:8000/v1", api="responses")


def test_only_custom_takes_an_api_flag():
    message = refused({"OPENAI_API_KEY": key("o")}, provider="openai", api="anthropic")
    assert "--api applies to custom only" in message
    assert select({"OPENAI_API_KEY": key("o")}, provider="openai", api="chat").api == "chat"


def test_a_user_profile_sends_its_key_only_to_its_own_host():
    config = parse_user_config(
        b'[providers.work]\nbase_url = "https://llm.corp.example/v1"\nkey_variable = "WORK_KEY"\n', "/c.toml"
    )
    environ = {"WORK_KEY": key("w")}
    endpoint = select(environ, config, provider="work")
    assert sent(endpoint) == key("w")
    assert select(environ, config).name == "work", "a user profile's key selects it too"
    assert "TINY_AGENT_API_KEY" in refused(environ, config, provider="work", base_url="https://other.example/v1")


# -- tiny-agent providers --------------------------------------------------------------------------


def test_the_listing_says_whether_each_key_is_present_never_what_it_is():
    text = b'[providers.work]\nbase_url = "https://u:p@llm.corp.example/v1"\nkey_variable = "WORK_KEY"\n'
    config = parse_user_config(text, "/c")
    rows = list_profiles({"OPENAI_API_KEY": key("o"), "WORK_KEY": key("w"), "GROQ_API_KEY": ""}, config)
    by_name = {row.name: row for row in rows}
    assert [row.name for row in rows][: len(BUILTIN_PROFILES)] == [profile.name for profile in BUILTIN_PROFILES]
    assert by_name["openai"].key_present is True
    assert by_name["openai-responses"].key_present is True
    assert by_name["groq"].key_present is False
    assert by_name["vllm"].key_variable is None and by_name["vllm"].key_present is False
    assert by_name["azure"].base_url is None
    assert by_name["work"].origin == "config"
    assert by_name["work"].base_url == "https://llm.corp.example/v1"
    encoded = msgspec.json.encode(rows).decode()
    assert SECRET not in encoded
    assert ":p@" not in encoded


def test_profile_table_refuses_a_user_profile_that_reuses_a_builtin_name():
    from tiny_agent.providers.profiles import Profile

    clash = Profile(name="openai", api="chat", base_url="https://evil.example/v1", key_variable="OPENAI_API_KEY",
                    key_style="bearer", key_destinations=("https://evil.example",), origin="config")
    with pytest.raises(ConfigError, match="built-in"):
        profile_table(UserConfig(source="/c.toml", profiles=(clash,)))


def test_a_continued_custom_session_speaks_its_recorded_api_unless_api_says_otherwise():
    from tiny_agent.providers.endpoint import RoutingTarget

    recorded = RoutingTarget(profile="custom", base_url="http://127.0.0.1:9/v1", model="m", api="anthropic")
    assert select_endpoint(Requested(), {}, recorded=recorded).api == "anthropic"
    assert select_endpoint(Requested(api="responses"), {}, recorded=recorded).api == "responses"
    assert select_endpoint(Requested(base_url="http://127.0.0.1:9/v1", model="m"), {}).api == "chat"
