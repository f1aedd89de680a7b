"""The normalization seam: provider wire → canonical assistant message, stop reason and usage."""

from __future__ import annotations

import json

import msgspec
import pytest
from builders import RunWriter, new_writer
from conftest import PROJECT_ROOT
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from test_replay_cli import call
from wire_apis import file_record, fixture_files

from tiny_agent.agent import transactions
from tiny_agent.fold.transcript_rules import parse_message
from tiny_agent.journal.transcript import AssistantMessage, Usage
from tiny_agent.stores.journal import raw_facts, read_journal
from tiny_agent.wire.chat import API as CHAT
from tiny_agent.wire.chat.seam import ChatUsageDerivation as UsageDerivation
from tiny_agent.wire.seam import Accepted, Rejected

normalize_body = CHAT.normalize_body
normalize_response = CHAT.normalize

WIRE = PROJECT_ROOT / "fixtures" / "wire"
CASES = sorted(path.name[: -len(".expected.json")] for path in WIRE.glob("*.expected.json"))


@pytest.mark.parametrize("name", CASES)
def test_wire_fixture_gives_its_expected_outcome(capsys, name):
    expected = json.loads((WIRE / f"{name}.expected.json").read_text())
    code, out, err = call(capsys, "normalize", *expected.get("args", []), str(WIRE / f"{name}.json"))
    assert code == expected["exit"]
    if "stdout" in expected:
        assert json.loads(out) == expected["stdout"]
    else:
        assert err.startswith(expected["stderr_label"] + ":")
        assert len(err.strip().splitlines()) == 1


def test_every_body_has_an_expectation():
    bodies = {path.name[:-5] for path in WIRE.glob("*.json") if not path.name.endswith(".expected.json")}
    assert bodies == set(CASES)


# -- issue 27: refusals and hosted tools, recorded in each API's shapes, whole and streamed ----------

HELD_BACK = fixture_files(WIRE / "refusals") + fixture_files(WIRE / "hosted-tools")


@pytest.mark.parametrize("path", HELD_BACK, ids=lambda path: path.name)
def test_refusal_and_hosted_tool_fixtures_give_their_expected_outcome(path):
    expected = json.loads(path.with_name(path.name + ".expected.json").read_text())
    assert file_record(path) == expected
    if path.parent.name == "refusals":
        assert expected["stdout"]["stopReason"] == "refusal" and expected["stdout"]["message"]["content"]
    elif "unknown" in path.name or "approval" in path.name:
        assert expected["exit"] == 65
    else:
        # Hosted calls are activity, never client calls: only the read in the *-then-* cases is ours to run.
        assert expected["stdout"]["hosted"]
        calls = expected["stdout"]["message"].get("tool_calls", [])
        assert [call["function"]["name"] for call in calls] == (["read"] if "-then-" in path.name else [])


def test_the_normalize_command_shows_hosted_activity(capsys):
    path = WIRE / "hosted-tools" / "anthropic-web-search.json"
    code, out, _ = call(capsys, "normalize", str(path), "--api", "anthropic")
    assert code == 0
    assert json.loads(out)["hosted"][-1] == "billed by the provider: web_search_requests 1"


# -- the seed chapter's two regression tests ----------------------------------


def test_normalizes_provider_only_fields_so_the_session_keeps_only_canonical_messages(tmp_path):
    body = (WIRE / "openrouter-reasoning-tool-call.json").read_text()
    outcome = normalize_body(body)
    assert isinstance(outcome, Accepted)
    assert "choices[0].message.reasoning" in outcome.dropped
    assert "choices[0].message.reasoning_details" in outcome.dropped
    assert "choices[0].message.tool_calls[0].index" in outcome.dropped
    path = tmp_path / "s.jsonl"
    writer = new_writer(path)
    run = RunWriter(writer)
    run.start("What does this project do?")
    run.attempt()
    run.raw(body)
    writer.commit(transactions.settle_assistant(writer.state, outcome.message, outcome.stop_reason, outcome.usage))
    writer.close()
    state = read_journal(path)
    assistant = msgspec.to_builtins(state.transcript[-1])
    assert set(assistant) == {"role", "content", "tool_calls"}
    assert set(assistant["tool_calls"][0]) == {"id", "type", "function"}
    lines = [json.loads(line) for line in path.read_text().splitlines()[1:]]
    entries = [json.dumps(fact) for line in lines for fact in line if fact["kind"] == "entry" and "stopReason" in fact["entry"]]
    assert entries and all("reasoning" not in entry and "refusal" not in entry for entry in entries)
    (raw,) = [fact for _, fact in raw_facts(path)]
    assert raw.raw.body == body
    assert state.usage == Usage(input=100, output=64, cacheRead=800, cacheWrite=300, reasoning=18)


MALFORMED = [
    "mistral-content-list",
    "llamacpp-object-arguments",
    "groq-no-content-key",
    "vllm-empty-tool-calls",
    "duplicate-call-ids",
    "not-an-assistant",
    "openrouter-in-band-error",
]


@pytest.mark.parametrize("name", MALFORMED)
def test_rejects_malformed_provider_assistant_without_uncaught_exception(tmp_path, name):
    body = (WIRE / f"{name}.json").read_bytes()
    outcome = normalize_body(body)
    assert isinstance(outcome, Rejected)
    assert outcome.reason
    path = tmp_path / "s.jsonl"
    writer = new_writer(path)
    run = RunWriter(writer)
    run.start("hello")
    run.attempt()
    run.raw(body.decode())
    writer.commit(transactions.fail_step(writer.state, "rejected_response", outcome.reason, outcome.usage))
    writer.close()
    state = read_journal(path)
    assert state.operation.step.status == "failed"  # type: ignore[union-attr]
    assert state.usage == (outcome.usage or Usage())  # not reported: no usage fact, the totals unchanged
    assert [message["role"] for message in msgspec.to_builtins(state.transcript)] == ["user"]


# -- usage ----------------------------------------------------------------------


def test_usage_derivation_is_explained_step_by_step():
    derivation = UsageDerivation(prompt_tokens=1200, completion_tokens=40, cache_read=800, cache_write=300, cost=0.004)
    assert derivation.explain() == "prompt_tokens 1200 − cached 800 − write 300 = input 100; completion_tokens 40 = output 40"
    assert derivation.usage == Usage(input=100, output=40, cacheRead=800, cacheWrite=300)


def test_input_never_goes_negative():
    outcome = normalize_response(
        {"choices": [{"message": {"role": "assistant", "content": "x"}}], "usage": {"prompt_tokens": 5, "prompt_tokens_details": {"cached_tokens": 9}}}
    )
    assert outcome.usage == Usage(input=0, output=0, cacheRead=9, cacheWrite=0)
    assert "(clamped at 0)" in outcome.derivation.explain()


def test_cache_hit_rate():
    assert Usage(input=100, output=1, cacheRead=800, cacheWrite=100).cache_hit_rate == 0.8
    assert Usage().cache_hit_rate is None


def test_cost_is_kept_for_audit_not_in_the_ledger():
    outcome = normalize_body((WIRE / "openrouter-reasoning-tool-call.json").read_bytes())
    assert outcome.derivation.cost == pytest.approx(0.004566)
    assert "usage.cost" in outcome.dropped  # type: ignore[union-attr]


# -- the seam never raises --------------------------------------------------------

JSON_VALUES = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False, allow_infinity=False) | st.text(max_size=8),
    lambda children: st.lists(children, max_size=4) | st.dictionaries(st.text(max_size=6), children, max_size=4),
    max_leaves=20,
)


def _valid_response(draw: st.DrawFn) -> dict:
    calls = draw(st.integers(0, 2))
    message: dict = {"role": "assistant", "content": draw(st.none() | st.text(max_size=10))}
    if calls:
        message["tool_calls"] = [
            {"id": f"call_{index}", "type": "function", "function": {"name": "read", "arguments": draw(st.text(max_size=10))}}
            for index in range(calls)
        ]
    finish = draw(st.sampled_from([None, "stop", "length", "tool_calls", "function_call", "content_filter", "eos"]))
    body = {"id": "gen-1", "choices": [{"index": 0, "message": message, "finish_reason": finish}]}
    if draw(st.booleans()):
        body["usage"] = {"prompt_tokens": draw(st.integers(0, 5000)), "completion_tokens": draw(st.integers(0, 500))}
    return body


@st.composite
def near_valid_responses(draw: st.DrawFn) -> dict:
    body = _valid_response(draw)
    message = body["choices"][0]["message"]
    calls = message.get("tool_calls") or [{"function": {}}]
    containers = [body, body["choices"][0], message, calls[0], calls[0]["function"], body.setdefault("usage", {})]
    for _ in range(draw(st.integers(0, 3))):
        container = draw(st.sampled_from(containers))
        key = draw(st.sampled_from(["reasoning", "refusal", "index", "content", "arguments", "role", "id", "name", "type", "tool_calls", "prompt_tokens", "error"]))
        container[key] = draw(JSON_VALUES)
    return body


def _check(outcome: object) -> None:
    assert isinstance(outcome, (Accepted, Rejected))
    if isinstance(outcome, Accepted):
        as_journal = msgspec.to_builtins(outcome.message)
        assert parse_message(as_journal) == outcome.message
        assert msgspec.json.decode(msgspec.json.encode(outcome.message), type=AssistantMessage) == outcome.message
        assert outcome.stop_reason in ("stop", "toolUse", "length")
    else:
        assert outcome.reason and "\n" not in outcome.reason


@settings(max_examples=400, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(JSON_VALUES)
def test_any_json_value_is_accepted_canonically_or_rejected(value):
    _check(normalize_response(value))


@settings(max_examples=400, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(near_valid_responses())
def test_near_valid_responses_are_accepted_canonically_or_rejected(body):
    _check(normalize_response(body))
    _check(normalize_body(json.dumps(body)))


@settings(max_examples=200, deadline=None)
@given(st.binary(max_size=200))
def test_any_bytes_are_rejected_or_accepted(data):
    _check(normalize_body(data))


# -- the command --------------------------------------------------------------------


def test_command_errors_are_one_line(capsys, tmp_path):
    text = tmp_path / "notes.txt"
    text.write_text("this is not json")
    empty = tmp_path / "empty.json"
    empty.write_text("")
    for path, expected in ((text, 65), (empty, 65), (tmp_path / "missing.json", 66)):
        code, out, err = call(capsys, "normalize", str(path))
        assert (code, out) == (expected, "")
        assert len(err.strip().splitlines()) == 1
        assert "Traceback" not in err
