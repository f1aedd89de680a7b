"""Quirk adapters: real provider bodies through their profile's adapters and the unchanged seam."""

from __future__ import annotations

import copy
import json

import msgspec
import pytest
from conftest import PROJECT_ROOT
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from tiny_agent.errors import ConfigError
from tiny_agent.providers.selection import profile_table
from tiny_agent.wire.chat import API as CHAT
from tiny_agent.wire.chat import adapters, normalize_chat
from tiny_agent.wire.chat.adapters import ADAPTER_NAMES, apply
from tiny_agent.wire.registry import AdapterIdentity, adapter_identity, parse_adapter_identity
from tiny_agent.wire.seam import Accepted, Change, Rejected

normalize_response = CHAT.normalize

WIRE = PROJECT_ROOT / "fixtures" / "wire"


def body_of(name: str) -> object:
    return json.loads((WIRE / f"{name}.json").read_text())


def expected_rejection(name: str) -> str:
    return str(json.loads((WIRE / f"{name}.expected.json").read_text())["stdout"]["rejected"])


def message_of(outcome: Accepted) -> dict[str, object]:
    return msgspec.to_builtins(outcome.message)  # type: ignore[no-any-return]


def call(call_id: str, arguments: str = '{"path":"README.md"}') -> dict[str, object]:
    return {"id": call_id, "type": "function", "function": {"name": "read", "arguments": arguments}}


# (fixture, profile, canonical message, stop reason, paths the adapters changed)
QUIRKS = [
    (
        "vllm-empty-tool-calls",
        "vllm",
        {"role": "assistant", "content": "Hello! How can I help you today?"},
        "stop",
        ["choices[0].message.tool_calls"],
    ),
    (
        "groq-no-content-key",
        "groq",
        {"role": "assistant", "content": None, "tool_calls": [call("call_x7yz")]},
        "toolUse",
        ["choices[0].message.content"],
    ),
    (
        "azure-no-content-key",
        "azure",
        {"role": "assistant", "content": None, "tool_calls": [call("call_azure_1")]},
        "toolUse",
        ["choices[0].message.content"],
    ),
    (
        "mistral-content-list",
        "mistral",
        {"role": "assistant", "content": "2 + 2 = 4."},
        "stop",
        ["choices[0].message.content"],
    ),
    (
        "mistral-tool-call-no-type",
        "mistral",
        {"role": "assistant", "content": None, "tool_calls": [call("Kx7bQ2mZp", '{"path": "README.md"}')]},
        "toolUse",
        ["choices[0].message.content", "choices[0].message.tool_calls[0].type"],
    ),
    (
        "llamacpp-object-arguments",
        "llamacpp",
        {"role": "assistant", "content": None, "tool_calls": [call("8Rd3kzvqQ1g2YCVnE0fX4uM6bH7pLs5T")]},
        "toolUse",
        ["choices[0].message.tool_calls[0].function.arguments"],
    ),
]


@pytest.mark.parametrize(("fixture", "profile", "message", "stop_reason", "changed"), QUIRKS)
def test_a_quirky_body_is_accepted_through_its_profiles_adapters(fixture, profile, message, stop_reason, changed):
    body = body_of(fixture)
    names = profile_table()[profile].adapters
    adapted, changes = apply(body, names)
    outcome = normalize_response(adapted)
    assert isinstance(outcome, Accepted), outcome
    assert message_of(outcome) == message
    assert outcome.stop_reason == stop_reason
    assert [change.path for change in changes] == changed
    assert body == body_of(fixture), "the decoded body was mutated"


@pytest.mark.parametrize(("fixture", "profile", "message", "stop_reason", "changed"), QUIRKS)
def test_without_adapters_the_seam_rejects_it_exactly_as_before(fixture, profile, message, stop_reason, changed):
    outcome = normalize_response(body_of(fixture))
    assert isinstance(outcome, Rejected)
    assert outcome.reason == expected_rejection(fixture)
    outcome_no_adapters, changes = normalize_chat((WIRE / f"{fixture}.json").read_bytes(), ())
    assert isinstance(outcome_no_adapters, Rejected)
    assert outcome_no_adapters.reason == expected_rejection(fixture)
    assert changes == []


@pytest.mark.parametrize(("fixture", "profile", "message", "stop_reason", "changed"), QUIRKS)
def test_normalize_chat_decodes_adapts_and_normalizes_a_stored_body(fixture, profile, message, stop_reason, changed):
    raw = (WIRE / f"{fixture}.json").read_text()
    outcome, changes = normalize_chat(raw, profile_table()[profile].adapters)
    assert isinstance(outcome, Accepted)
    assert message_of(outcome) == message
    assert [change.path for change in changes] == changed


def test_normalize_chat_leaves_a_body_that_is_not_json_to_the_seam():
    outcome, changes = normalize_chat(b"<html>502</html>", ADAPTER_NAMES)
    assert isinstance(outcome, Rejected)
    assert outcome.reason.startswith("response body is not JSON")
    assert changes == []
    empty, _ = normalize_chat("", ADAPTER_NAMES)
    assert isinstance(empty, Rejected)
    assert empty.reason == "response body is empty"


@pytest.mark.parametrize(
    "fixture",
    ["openai-stop", "openai-tool-call", "openrouter-reasoning-tool-call", "deepseek-reasoning-content", "openai-refusal"],
)
def test_every_adapter_leaves_a_well_formed_body_alone(fixture):
    body = body_of(fixture)
    adapted, changes = apply(body, [name for name in ADAPTER_NAMES if name != "reasoning-apart-from-output"])
    assert adapted is body
    assert changes == []


def test_reasoning_apart_from_output_adds_the_reasoning_to_completion_tokens():
    body = body_of("xai-reasoning")
    adapted, changes = apply(body, ["reasoning-apart-from-output"])
    assert adapted["usage"]["completion_tokens"] == 9 + 94 and body["usage"]["completion_tokens"] == 9
    assert [(change.path, change.detail) for change in changes] == [
        ("usage.completion_tokens", "9 + reasoning_tokens 94 = 103 (the provider counts reasoning apart from it)")
    ]
    assert apply(body_of("openai-stop"), ["reasoning-apart-from-output"])[1] == []  # reasoning_tokens 0: nothing to add


def test_which_profile_needs_which_adapters():
    table = profile_table()
    assert table["azure"].adapters == ("absent-content-is-null",)
    assert table["groq"].adapters == ("absent-content-is-null",)
    assert table["mistral"].adapters == (
        "absent-content-is-null",
        "missing-call-type-is-function",
        "content-parts-to-text",
        "missing-role-is-assistant",
    )
    assert table["vllm"].adapters == ("empty-tool-calls-is-none",)
    assert table["llamacpp"].adapters == ("object-arguments-to-json",)
    for name in ("openai", "openrouter", "deepseek", "ollama", "lmstudio", "custom", "anthropic", "openai-responses"):
        assert table[name].adapters == (), name


# -- each adapter on its own -------------------------------------------------------------


def chat(message: object, *more: object) -> dict[str, object]:
    choices = [{"index": index, "message": item, "finish_reason": "stop"} for index, item in enumerate((message, *more))]
    return {"id": "x", "choices": choices}


def run(name: str, body: object) -> tuple[object, list[Change]]:
    before = copy.deepcopy(body)
    adapted, changes = apply(body, [name])
    assert body == before, f"{name} mutated its input"
    if not changes:
        assert adapted is body, f"{name} copied a body it did not change"
    return adapted, changes


def test_absent_content_is_null_adds_null_only_where_content_is_missing():
    body = chat({"role": "assistant", "tool_calls": [call("c1")]}, {"role": "assistant", "content": "kept"})
    adapted, changes = run("absent-content-is-null", body)
    assert adapted["choices"][0]["message"] == {"role": "assistant", "tool_calls": [call("c1")], "content": None}
    assert adapted["choices"][1] is body["choices"][1]
    assert changes == [
        Change("absent-content-is-null@1", "choices[0].message.content", "added", "no content member; added content: null")
    ]


@pytest.mark.parametrize("content", [None, "", "text", [{"type": "text", "text": "x"}], 7])
def test_absent_content_is_null_leaves_any_present_content_alone(content):
    _, changes = run("absent-content-is-null", chat({"role": "assistant", "content": content}))
    assert changes == []


def test_empty_tool_calls_is_none_removes_only_an_empty_array():
    body = chat({"role": "assistant", "content": "hi", "tool_calls": []})
    adapted, changes = run("empty-tool-calls-is-none", body)
    assert adapted["choices"][0]["message"] == {"role": "assistant", "content": "hi"}
    assert [(c.adapter, c.path, c.kind) for c in changes] == [
        ("empty-tool-calls-is-none@1", "choices[0].message.tool_calls", "removed")
    ]


@pytest.mark.parametrize("calls", [None, [call("c1")], {}, "[]", 0])
def test_empty_tool_calls_is_none_leaves_anything_else_alone(calls):
    _, changes = run("empty-tool-calls-is-none", chat({"role": "assistant", "content": "hi", "tool_calls": calls}))
    assert changes == []


def test_missing_call_type_is_function_adds_type_only_where_it_is_missing():
    untyped = {"id": "c1", "function": {"name": "read", "arguments": "{}"}}
    typed = call("c2")
    odd = {"id": "c3", "type": None, "function": {"name": "read", "arguments": "{}"}}
    body = chat({"role": "assistant", "content": None, "tool_calls": [untyped, typed, odd, "not a call"]})
    adapted, changes = run("missing-call-type-is-function", body)
    calls = adapted["choices"][0]["message"]["tool_calls"]
    assert calls[0] == {**untyped, "type": "function"}
    assert calls[1] is typed
    assert calls[2] is odd, "a type that is present (even null) is the seam's business"
    assert calls[3] == "not a call"
    assert [c.path for c in changes] == ["choices[0].message.tool_calls[0].type"]


def test_content_parts_to_text_concatenates_text_parts_without_a_separator():
    parts = [
        {"type": "text", "text": "Hello, "},
        {"type": "thinking", "thinking": [{"type": "text", "text": "hidden"}]},
        {"type": "image_url", "image_url": {"url": "https://x"}},
        {"type": "text", "text": "world."},
    ]
    adapted, changes = run("content-parts-to-text", chat({"role": "assistant", "content": parts}))
    assert adapted["choices"][0]["message"]["content"] == "Hello, world."
    assert [(c.path, c.kind) for c in changes] == [("choices[0].message.content", "replaced")]
    assert "2 other part(s) dropped" in changes[0].detail


@pytest.mark.parametrize("parts", [[], [{"type": "thinking", "thinking": []}]])
def test_content_parts_to_text_with_no_text_part_gives_null(parts):
    adapted, changes = run("content-parts-to-text", chat({"role": "assistant", "content": parts}))
    assert adapted["choices"][0]["message"]["content"] is None
    assert len(changes) == 1


@pytest.mark.parametrize(
    "parts",
    [
        [{"type": "text", "text": "a"}, "b"],
        [{"type": "text", "text": 3}],
        [{"type": "text"}],
        [{"text": "no type"}],
        [{"type": 1, "text": "x"}],
    ],
)
def test_content_parts_to_text_leaves_parts_it_does_not_recognise_to_the_seam(parts):
    body = chat({"role": "assistant", "content": parts})
    adapted, changes = run("content-parts-to-text", body)
    assert changes == []
    outcome = normalize_response(adapted)
    assert isinstance(outcome, Rejected)
    assert outcome.reason == "choices[0].message.content is a list (expected a string or null)"


def test_object_arguments_to_json_is_compact_and_keeps_key_order_and_non_ascii():
    arguments = {"z": 1, "path": "naïve/日本.txt", "a": [1.5, True, None, {"k": "v"}]}
    body = chat({"role": "assistant", "content": None, "tool_calls": [{"id": "c", "type": "function",
                                                                        "function": {"name": "f", "arguments": arguments}}]})
    adapted, changes = run("object-arguments-to-json", body)
    text = adapted["choices"][0]["message"]["tool_calls"][0]["function"]["arguments"]
    assert text == '{"z":1,"path":"naïve/日本.txt","a":[1.5,true,null,{"k":"v"}]}'
    assert json.loads(text) == arguments
    assert [c.path for c in changes] == ["choices[0].message.tool_calls[0].function.arguments"]


@pytest.mark.parametrize("arguments", ['{"a":1}', ["list"], 3, None, "", {"bad": "\ud800"}])
def test_object_arguments_to_json_leaves_anything_but_an_encodable_object_alone(arguments):
    body = chat({"role": "assistant", "content": None,
                 "tool_calls": [{"id": "c", "type": "function", "function": {"name": "f", "arguments": arguments}}]})
    _, changes = run("object-arguments-to-json", body)
    assert changes == []


def test_adapters_rewrite_every_choice_not_only_the_first():
    body = chat({"role": "assistant", "tool_calls": []}, {"role": "assistant", "tool_calls": []})
    adapted, changes = apply(body, ["empty-tool-calls-is-none", "absent-content-is-null"])
    assert [c.path for c in changes] == [
        "choices[0].message.tool_calls",
        "choices[1].message.tool_calls",
        "choices[0].message.content",
        "choices[1].message.content",
    ]
    assert all(choice["message"] == {"role": "assistant", "content": None} for choice in adapted["choices"])


@pytest.mark.parametrize(
    "body",
    [None, 1, "text", [], {}, {"choices": None}, {"choices": {}}, {"choices": [1, None, []]}, {"choices": [{"message": "x"}]}],
)
def test_shapes_without_messages_pass_through_untouched(body):
    adapted, changes = apply(body, ADAPTER_NAMES)
    assert adapted is body
    assert changes == []


def test_an_adapter_is_named_by_its_name_or_its_exact_version():
    body = chat({"role": "assistant", "content": "x", "tool_calls": []})
    by_name, _ = apply(body, ["empty-tool-calls-is-none"])
    by_version, _ = apply(body, ["empty-tool-calls-is-none@1"])
    assert by_name == by_version
    for unknown in ("no-such-adapter", "empty-tool-calls-is-none@2", "empty-tool-calls-is-none@"):
        with pytest.raises(ConfigError, match="unknown adapter"):
            apply(body, [unknown])


# -- identities ------------------------------------------------------------------------------


def test_no_adapters_is_exactly_the_identity_journals_hold_today():
    assert adapter_identity("chat", ()) == "chat-completions:v1"
    assert adapter_identity("anthropic", ()) == "anthropic-messages:v1"
    assert adapter_identity("responses", ()) == "openai-responses:v1"


def test_an_identity_names_the_adapters_with_their_versions_in_order():
    names = profile_table()["mistral"].adapters
    identity = adapter_identity("chat", names)
    assert identity == (
        "chat-completions:v1+absent-content-is-null@1,missing-call-type-is-function@1,content-parts-to-text@1"
        ",missing-role-is-assistant@1"
    )
    assert parse_adapter_identity(identity) == AdapterIdentity(
        api="chat",
        adapters=(
            "absent-content-is-null@1",
            "missing-call-type-is-function@1",
            "content-parts-to-text@1",
            "missing-role-is-assistant@1",
        ),
        recognised=True,
    )


@pytest.mark.parametrize("api", ["chat", "anthropic", "responses"])
def test_identities_round_trip_for_every_api(api):
    assert parse_adapter_identity(adapter_identity(api, ())) == AdapterIdentity(api=api, adapters=(), recognised=True)


@pytest.mark.parametrize("name", sorted(profile.name for profile in profile_table().values()))
def test_every_profiles_identity_round_trips(name):
    profile = profile_table()[name]
    parsed = parse_adapter_identity(adapter_identity(profile.api, profile.adapters))
    assert parsed.recognised
    assert parsed.api == profile.api
    assert [reference.partition("@")[0] for reference in parsed.adapters] == list(profile.adapters)


@pytest.mark.parametrize(
    "identity",
    [
        "openrouter:chat-completions:v1",
        "",
        "chat-completions:v2",
        "chat-completions:v1+",
        "chat-completions:v1+no-such-adapter@1",
        "chat-completions:v1+absent-content-is-null@9",
        "chat-completions:v1+absent-content-is-null",
        "chat-completions:v1+absent-content-is-null@1,",
        "anthropic-messages:v1+absent-content-is-null@1",
    ],
)
def test_identities_this_code_did_not_write_read_as_plain_chat(identity):
    assert parse_adapter_identity(identity) == AdapterIdentity(api="chat", adapters=(), recognised=False)


def test_the_recorded_adapters_re_derive_the_stored_response():
    raw = (WIRE / "mistral-tool-call-no-type.json").read_text()
    identity = adapter_identity("chat", profile_table()["mistral"].adapters)
    recorded = parse_adapter_identity(identity)
    outcome, _ = normalize_chat(raw, recorded.adapters)
    assert isinstance(outcome, Accepted)
    legacy, _ = normalize_chat(raw, parse_adapter_identity("openrouter:chat-completions:v1").adapters)
    assert isinstance(legacy, Rejected)


def test_only_the_chat_api_takes_adapters():
    with pytest.raises(ConfigError, match="chat API only"):
        adapter_identity("anthropic", ["absent-content-is-null"])


def test_every_adapter_has_a_distinct_name_and_a_version():
    assert len(set(ADAPTER_NAMES)) == len(adapters.ADAPTERS)
    assert all(adapter.version >= 1 for adapter in adapters.ADAPTERS)


# -- properties --------------------------------------------------------------------------------

json_scalars = st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False, allow_infinity=False) | st.text()
json_values = st.recursive(
    json_scalars,
    lambda children: st.lists(children, max_size=4) | st.dictionaries(st.text(max_size=8), children, max_size=4),
    max_leaves=30,
)
member_names = st.sampled_from(["role", "content", "tool_calls", "type", "text", "function", "arguments", "id", "name"])
messages = st.dictionaries(
    member_names,
    json_values
    | st.lists(
        st.dictionaries(member_names, json_values | st.dictionaries(member_names, json_values, max_size=3), max_size=4),
        max_size=3,
    ),
    max_size=5,
)
chat_bodies = st.lists(st.fixed_dictionaries({"message": messages}) | json_values, max_size=3).map(
    lambda choices: {"choices": choices}
)
adapter_lists = st.lists(st.sampled_from(ADAPTER_NAMES), max_size=6)


@settings(max_examples=400, suppress_health_check=[HealthCheck.too_slow])
@given(body=json_values | chat_bodies, names=adapter_lists)
def test_apply_never_raises_and_never_mutates_its_input(body, names):
    before = copy.deepcopy(body)
    adapted, changes = apply(body, ADAPTER_NAMES)
    assert body == before
    if not changes:
        assert adapted is body
    some, some_changes = apply(body, names)
    assert body == before
    if not some_changes:
        assert some is body
    normalize_response(adapted)  # the seam takes whatever the adapters give it, and never raises


@settings(max_examples=200, suppress_health_check=[HealthCheck.too_slow])
@given(body=chat_bodies)
def test_applying_all_adapters_twice_changes_nothing_more(body):
    once, _ = apply(body, ADAPTER_NAMES)
    twice, changes = apply(once, ADAPTER_NAMES)
    assert twice == once
    assert changes == []
