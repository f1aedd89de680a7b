"""The user's config file: where it is, what it may hold, and one precise line for anything wrong."""

from __future__ import annotations

import re
from pathlib import Path

import pytest
from conftest import PROJECT_ROOT

from tiny_agent.errors import ConfigError, PermissionDenied
from tiny_agent.providers.selection import Requested, select_endpoint
from tiny_agent.providers.userconfig import (
    EMPTY,
    ModelSettings,
    UserConfig,
    config_path,
    load_user_config,
    parse_user_config,
)

SOURCE = "/home/u/.config/tiny-agent/config.toml"


def parse(text: str) -> UserConfig:
    return parse_user_config(text.encode("utf-8"), SOURCE)


def problem(text: str | bytes) -> str:
    data = text if isinstance(text, bytes) else text.encode("utf-8")
    with pytest.raises(ConfigError) as caught:
        parse_user_config(data, SOURCE)
    message = str(caught.value)
    assert "\n" not in message
    assert message.startswith(f"CONFIG: config file {SOURCE}")
    return message.removeprefix(f"CONFIG: config file {SOURCE}")


# -- where it is -------------------------------------------------------------------------------


def test_tiny_agent_config_names_the_file():
    assert config_path({"TINY_AGENT_CONFIG": "/etc/ta.toml", "XDG_CONFIG_HOME": "/x"}) == (Path("/etc/ta.toml"), True)


def test_xdg_config_home_then_home():
    assert config_path({"XDG_CONFIG_HOME": "/x", "HOME": "/h"}) == (Path("/x/tiny-agent/config.toml"), False)
    assert config_path({"HOME": "/h"}) == (Path("/h/.config/tiny-agent/config.toml"), False)


def test_a_relative_xdg_config_home_is_ignored_as_the_spec_says():
    assert config_path({"XDG_CONFIG_HOME": "relative", "HOME": "/h"}) == (Path("/h/.config/tiny-agent/config.toml"), False)


# -- reading it -----------------------------------------------------------------------------------


def test_a_missing_file_is_an_empty_config(tmp_path):
    config = load_user_config({"XDG_CONFIG_HOME": str(tmp_path)})
    assert config == UserConfig(source=str(tmp_path / "tiny-agent" / "config.toml"))
    assert (config.provider, config.model, config.profiles, config.models) == (None, None, (), {})


def test_a_missing_file_named_explicitly_is_an_error(tmp_path):
    missing = tmp_path / "nope.toml"
    with pytest.raises(ConfigError, match=f"TINY_AGENT_CONFIG names {re.escape(str(missing))}, which does not exist"):
        load_user_config({"TINY_AGENT_CONFIG": str(missing)})


def test_a_directory_is_not_a_config_file(tmp_path):
    with pytest.raises(ConfigError, match="is a directory, not a file"):
        load_user_config({"TINY_AGENT_CONFIG": str(tmp_path)})


def test_an_unreadable_file_is_a_permission_error(tmp_path):
    path = tmp_path / "config.toml"
    path.write_text('provider = "openai"\n')
    path.chmod(0)
    try:
        if path.stat().st_mode and _readable(path):
            pytest.skip("running as a user who can read anything")
        with pytest.raises(PermissionDenied, match=re.escape(f"config file {path}")):
            load_user_config({"TINY_AGENT_CONFIG": str(path)})
    finally:
        path.chmod(0o600)


def _readable(path: Path) -> bool:
    try:
        path.read_bytes()
    except PermissionError:
        return False
    return True


def test_a_file_is_read_and_checked(tmp_path):
    path = tmp_path / "tiny-agent" / "config.toml"
    path.parent.mkdir()
    path.write_text('provider = "groq"\nmodel = "llama-3.3-70b-versatile"\n')
    config = load_user_config({"XDG_CONFIG_HOME": str(tmp_path)})
    assert (config.source, config.provider, config.model) == (str(path), "groq", "llama-3.3-70b-versatile")


def test_an_empty_file_is_an_empty_config():
    assert parse("") == UserConfig(source=SOURCE)
    assert EMPTY.profiles == ()


# -- what it holds ------------------------------------------------------------------------------------


def test_every_table_decodes_into_typed_settings():
    config = parse(
        """
provider = "work"
model = "qwen"

[providers.work]
base_url = "https://llm.corp.example/v1"
key_variable = "WORK_LLM_KEY"
adapters = ["empty-tool-calls-is-none", "absent-content-is-null@1"]

[providers.claude-proxy]
base_url = "http://10.1.2.3:4000/v1"
api = "anthropic"
key_variable = "PROXY_KEY"

[custom]
api = "chat"
adapters = ["content-parts-to-text"]

[models."openai/gpt-4o-mini"]
context_window = 128000
input = 0.15
output = 0.6
cache_read = 0.075

[models.qwen]
context_window = 32768
"""
    )
    assert (config.provider, config.model) == ("work", "qwen")
    work, proxy = config.profiles
    assert (work.name, work.api, work.key_variable, work.key_style) == ("work", "chat", "WORK_LLM_KEY", "bearer")
    assert work.key_destinations == ("https://llm.corp.example",)
    assert work.adapters == ("empty-tool-calls-is-none", "absent-content-is-null@1")
    assert work.origin == "config"
    assert (proxy.api, proxy.key_style, proxy.max_tokens) == ("anthropic", "x-api-key", 8192)
    assert proxy.headers == (("anthropic-version", "2023-06-01"),)
    assert proxy.key_destinations == ("http://10.1.2.3",)
    assert config.custom_adapters == ("content-parts-to-text",)
    assert config.model_settings("openai/gpt-4o-mini") == ModelSettings(
        context_window=128000, input=0.15, output=0.6, cache_read=0.075
    )
    assert config.model_settings("qwen") == ModelSettings(context_window=32768)
    assert config.model_settings("other") is None


def test_a_user_profile_with_a_key_sends_it_over_its_own_scheme_and_host_only():
    config = parse('[providers.lan]\nbase_url = "http://10.1.2.3:4000/v1"\nkey_variable = "LAN_KEY"\n')
    endpoint = select_endpoint(Requested(provider="lan", model="m"), {"LAN_KEY": "k"}, config)
    assert endpoint.auth_header() == ("Authorization", "Bearer k")
    with pytest.raises(ConfigError, match="LAN_KEY is only ever sent to http://10.1.2.3"):
        select_endpoint(Requested(provider="lan", model="m", base_url="http://10.1.2.4:4000/v1"), {"LAN_KEY": "k"}, config)


def test_the_example_in_the_docs_is_a_valid_config():
    docs = (PROJECT_ROOT / "docs" / "provider.md").read_text()
    blocks = re.findall(r"```toml\n(.*?)```", docs, re.DOTALL)
    assert blocks, "docs/provider.md has no toml example"
    for block in blocks:
        parse(block)


# -- one line for anything wrong ----------------------------------------------------------------------


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ('provder = "openai"\n', ": provder: unknown key"),
        ('model = 3\n', ": model: expected `str | null`, got `int`"),
        ('model = ""\n', ": model: expected `str` of length >= 1"),
        ('[custom]\napi = "soap"\n', ": custom.api: invalid enum value 'soap'"),
        ('[custom]\nadapter = []\n', ": custom.adapter: unknown key"),
        ('[custom]\nadapters = ["no-such"]\n', ": custom.adapters[0]: unknown adapter 'no-such'"),
        ('[custom]\napi = "responses"\nadapters = ["absent-content-is-null"]\n',
         ": custom.adapters: adapters apply to the chat API only, not to responses"),
        ('[models."gpt-4o"]\ncontext_window = "128k"\n', ': models.gpt-4o.context_window: expected `int | null`, got `str`'),
        ('[models."openai/gpt-4o"]\ncontext_window = 0\n', ': models."openai/gpt-4o".context_window: expected `int` >= 1'),
        ('[models."openai/gpt-4o"]\ninput = -1\n', ': models."openai/gpt-4o".input: expected `float` >= 0.0'),
        ('[models."openai/gpt-4o"]\noutput = inf\n', ': models."openai/gpt-4o".output: expected `float` <= 1000000.0'),
        ('[models."openai/gpt-4o"]\ninput = nan\n', ': models."openai/gpt-4o".input: expected `float` >= 0.0'),
        ('[models."openai/gpt-4o"]\ncontext_window = true\n',
         ': models."openai/gpt-4o".context_window: expected `int | null`, got `bool`'),
        ('[models."openai/gpt-4o"]\nprice = 1\n', ': models."openai/gpt-4o".price: unknown key'),
        ('[models]\nx = 1\n', ": models.x: expected `object`, got `int`"),
        ('[providers.openai]\nbase_url = "https://evil.example/v1"\n',
         ": providers.openai: 'openai' is a built-in provider, whose table takes only model; choose another name"),
        ('[providers.custom]\nbase_url = "https://evil.example/v1"\n', ": providers.custom: 'custom' is a built-in provider"),
        ('[providers.Work]\nbase_url = "https://h/v1"\n', ": providers.Work: a provider name is lower-case letters"),
        ('[providers."a@b"]\nbase_url = "https://h/v1"\n', ': providers."a@b": a provider name is lower-case letters'),
        ('[providers.work]\nkey_variable = "K"\n', ": providers.work: object missing required field `base_url`"),
        ('[providers.work]\nbase_url = "https://h/v1"\nkey_variable = "MY-KEY"\n',
         ': providers.work.key_variable: expected `str` matching regex'),
        ('[providers.work]\nbase_url = "https://h/v1"\nkey = "sk-123"\n', ": providers.work.key: unknown key"),
        ('[providers.work]\nbase_url = "ftp://h/v1"\n',
         ": providers.work.base_url: the base URL has scheme 'ftp' (expected http or https)"),
        ('[providers.work]\nbase_url = "https://h/v1"\nadapters = ["nope"]\n',
         ": providers.work.adapters[0]: unknown adapter 'nope'"),
        ('[providers.work]\nbase_url = "https://h/v1"\napi = "anthropic"\nadapters = ["absent-content-is-null"]\n',
         ": providers.work.adapters: adapters apply to the chat API only, not to anthropic"),
        ('[providers.work]\nbase_url = "https://h/v1"\nkey_style = "basic"\n',
         ": providers.work.key_style: invalid enum value 'basic'"),
        ('provider = "nope"\n', ": provider: unknown provider 'nope' (choices: anthropic, azure,"),
        ('base_url = "https://h/v1#x"\n', ": base_url: the base URL has a #fragment"),
        ("[custom\n", " is not valid TOML: Expected ']' at the end of a table declaration (at line 1, column 8)"),
        ('model = "a"\nmodel = "b"\n', " is not valid TOML: Cannot overwrite a value (at line 2, column 12)"),
        (b'model = "\xff"\n', " is not UTF-8 text (byte 9)"),
    ],
)
def test_a_bad_file_is_one_line_naming_the_file_and_the_key(text, expected):
    assert problem(text).startswith(expected)


def test_a_user_provider_named_in_the_file_is_a_valid_default():
    config = parse('provider = "lan"\n[providers.lan]\nbase_url = "http://127.0.0.1:9000/v1"\n')
    assert config.provider == "lan"
    assert select_endpoint(Requested(model="m"), {}, config).name == "lan"
