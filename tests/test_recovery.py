"""The recovery planner: every planner fixture, the spec's worked example, and the spec's fixes (P1-P5)."""

from __future__ import annotations

import json

import msgspec
import pytest
from builders import SNAPSHOT_DIGEST, RunWriter, new_writer
from conftest import PROJECT_ROOT, conformance_dir
from spec_example import example_bytes

from tiny_agent.agent import transactions
from tiny_agent.agent.recovery import CurrentConfiguration, explain, plan_recovery
from tiny_agent.fold.lines import reduce_bytes
from tiny_agent.journal.tools import ToolDeclaration
from tiny_agent.stores.journal import read_journal

ZERO = "sha256:" + "0" * 64


def _planner_cases() -> list[dict[str, str]]:
    return json.loads((conformance_dir() / "planner-fixtures" / "manifest.json").read_text())["fixtures"]


@pytest.mark.parametrize("case", _planner_cases(), ids=lambda case: case["name"])
def test_planner_fixture(case, conformance):
    directory = conformance / "planner-fixtures"
    given = json.loads((directory / case["input"]).read_text())
    expected = json.loads((directory / case["expected"]).read_text())
    state = reduce_bytes((conformance / "fixtures" / given["sessionFile"]).read_bytes())
    current = msgspec.convert(given["current"], CurrentConfiguration)
    plan = plan_recovery(state, current)
    assert msgspec.to_builtins(plan) == expected
    assert explain(plan, state)


# -- §20: the worked example's planner table ------------------------------------------

EXAMPLE_DIGEST = "sha256:2de65c43053f74475fdf4be3cc0f601c81f584073f001b52d25c75762d47e35e"
READ_SAFE = ToolDeclaration(name="read", definitionDigest="sha256:" + "3" * 64, replay="safe", replayKey="builtin:read:v1")


def example_current(**changes) -> CurrentConfiguration:
    values = {"configurationDigest": EXAMPLE_DIGEST, "environmentIdentity": "/home/dev/app", "tools": [READ_SAFE]}
    values.update(changes)
    return CurrentConfiguration(**values)


def plan_after(line: int, current: CurrentConfiguration | None = None) -> dict:
    state = reduce_bytes(example_bytes(line))
    return msgspec.to_builtins(plan_recovery(state, current or example_current()))


ID = "0190f5e2-7c00-7a00-8a00-0000000000"


def test_after_line_2_start_the_first_step():
    assert plan_after(2) == {"type": "startStep", "stepKind": "assistant", "attempt": 1, "contextThroughEntryId": ID + "10"}


def test_after_line_3_retry_or_block_on_a_changed_digest():
    assert plan_after(3) == {
        "type": "startStep", "stepKind": "assistant", "attempt": 2, "stepId": ID + "30", "contextThroughEntryId": ID + "10"
    }
    assert plan_after(3, example_current(configurationDigest="sha256:" + "f" * 64)) == {
        "type": "blocked", "reason": "configuration_changed"
    }


def test_after_line_4_start_the_untouched_call():
    assert plan_after(4) == {
        "type": "startTool", "mode": "start", "assistantEntryId": ID + "13", "toolIndex": 0,
        "toolName": "read", "arguments": {"path": "main.py"},
    }


def test_after_line_5_replay_or_block_or_interrupt():
    assert plan_after(5) == {
        "type": "startTool", "mode": "replay", "assistantEntryId": ID + "13", "toolIndex": 0,
        "toolStartedId": ID + "14", "toolName": "read", "arguments": {"path": "main.py"},
    }
    never = ToolDeclaration(name="read", definitionDigest=READ_SAFE.definitionDigest, replay="never", replayKey="builtin:read:v1")
    assert plan_after(5, example_current(tools=[never])) == {"type": "blocked", "reason": "replay_declaration_changed"}
    assert plan_after(5, example_current(environmentIdentity="/elsewhere")) == {"type": "blocked", "reason": "environment_changed"}
    changed = example_current(configurationDigest="sha256:" + "f" * 64)
    assert plan_after(5, changed)["mode"] == "replay"


def test_after_lines_6_to_9():
    assert plan_after(6) == {"type": "startStep", "stepKind": "assistant", "attempt": 1, "contextThroughEntryId": ID + "15"}
    assert plan_after(7)["attempt"] == 2
    assert plan_after(8) == {"type": "finish", "outcome": "completed", "completion": "normal", "finalEntryId": ID + "18"}
    assert plan_after(9) == {"type": "finish", "outcome": "completed", "completion": "normal"}


# -- journals built with the real writer ----------------------------------------------

CURRENT = CurrentConfiguration(
    configurationDigest=SNAPSHOT_DIGEST,
    environmentIdentity="fixture",
    tools=[ToolDeclaration(name="read", definitionDigest=ZERO, replay="safe", replayKey="builtin:read:v1")],
)


@pytest.fixture()
def run(tmp_path) -> RunWriter:
    writer = new_writer(tmp_path / "s.jsonl")
    run = RunWriter(writer)
    run.start("look at two files")
    return run


def plan(run: RunWriter, current: CurrentConfiguration = CURRENT) -> dict:
    return msgspec.to_builtins(plan_recovery(run.writer.state, current))


def test_p1_a_final_answer_after_tools_finishes_the_run(run):
    run.attempt()
    asked = run.call_tools([("read", '{"path":"a"}')])
    run.run_tool(asked, 0, "a")
    run.attempt()
    answer = run.answer("done")
    assert plan(run) == {"type": "finish", "outcome": "completed", "completion": "normal", "finalEntryId": answer}


def test_p2_calls_answered_by_synthetic_results_are_skipped(run):
    run.attempt()
    asked = run.call_tools([("missing", "{}"), ("read", '{"path":"a"}')])
    first = plan(run)
    assert first["type"] == "appendSynthetic"
    assert [result["reason"] for result in first["results"]] == ["unknownTool"]
    state = run.writer.state
    run.writer.commit([transactions.pre_execution_result(state, assistant_entry_id=asked, tool_index=0, reason="unknownTool")])
    assert plan(run)["type"] == "startTool"
    assert plan(run)["toolIndex"] == 1


def test_p3_length_with_every_call_answered_finishes_truncated(run):
    run.attempt()
    asked = run._settle(
        msgspec.convert(
            {"content": None, "tool_calls": [{"id": "c1", "type": "function", "function": {"name": "read", "arguments": '{"pa'}}]},
            transactions.AssistantMessage,
        ),
        "length",
        None,
    )
    first = plan(run)
    assert first == {
        "type": "appendSynthetic",
        "results": [
            {
                "assistantEntryId": asked, "toolIndex": 0, "toolCallId": "c1", "toolName": "read", "reason": "truncated",
                "content": "Error: Tool call arguments were truncated by the model token limit; the tool was not executed.",
            }
        ],
    }
    run.writer.commit([transactions.pre_execution_result(run.writer.state, assistant_entry_id=asked, tool_index=0, reason="truncated")])
    assert plan(run) == {"type": "finish", "outcome": "completed", "completion": "truncated", "finalEntryId": asked}


def test_p4_no_call_pending_starts_a_step_at_the_context_boundary(run):
    run.attempt()
    asked = run.call_tools([("read", '{"path":"a"}'), ("read", '{"path":"b"}')])
    run.run_tool(asked, 1, "b")
    run.run_tool(asked, 0, "a")
    assert plan(run) == {
        "type": "startStep", "stepKind": "assistant", "attempt": 1, "contextThroughEntryId": run.writer.state.contextBoundary
    }


def test_p5_length_without_calls_is_planned_as_rule_7_says(run):
    run.attempt()
    truncated = run._settle(transactions.AssistantMessage(content="The first part of"), "length", None)
    assert plan(run) == {"type": "finish", "outcome": "completed", "completion": "normal", "finalEntryId": truncated}


def test_invalid_argument_text_is_answered_without_running(run):
    run.attempt()
    run.call_tools([("read", "not json")])
    assert [result["reason"] for result in plan(run)["results"]] == ["invalidArguments"]


def test_never_tool_pending_is_interrupted(run):
    run.attempt()
    asked = run.call_tools([("read", '{"path":"a"}')])
    started = run.run_tool(asked, 0, "", finish=False)
    never = CurrentConfiguration(
        configurationDigest=SNAPSHOT_DIGEST,
        environmentIdentity="fixture",
        tools=[ToolDeclaration(name="read", definitionDigest=ZERO, replay="safe", replayKey="builtin:read:v2")],
    )
    assert plan(run, never) == {"type": "blocked", "reason": "replay_declaration_changed"}
    assert plan(run)["mode"] == "replay"
    assert plan(run)["toolStartedId"] == started


def test_abort_closes_the_attempt_then_answers_calls_then_finishes(run):
    run.attempt()
    run.writer.commit(transactions.request_abort(run.writer.state, "model"))
    assert plan(run) == {"type": "closeAttempt", "error": {"code": "aborted", "message": "Operation aborted"}}


def test_abort_with_pending_and_untouched_calls(run):
    run.attempt()
    asked = run.call_tools([("read", '{"path":"a"}'), ("read", '{"path":"b"}'), ("read", '{"path":"c"}')])
    run.run_tool(asked, 1, "b")
    started = run.run_tool(asked, 0, "", finish=False)
    run.writer.commit(transactions.request_abort(run.writer.state, "tool", "call"))
    first = plan(run)
    assert [(result["toolIndex"], result["reason"]) for result in first["results"]] == [(0, "interrupted"), (2, "aborted")]
    assert first["results"][0]["toolStartedId"] == started
    state = run.writer.state
    facts = [transactions.interrupted_result(state.operation.toolCalls[1])]
    facts.append(transactions.pre_execution_result(state, assistant_entry_id=asked, tool_index=2, reason="aborted"))
    run.writer.commit(facts)
    assert plan(run) == {"type": "finish", "outcome": "aborted"}


def test_settle_from_raw_takes_precedence_over_retry_and_blocks(run):
    run.attempt()
    run.raw('{"choices":[{"message":{"role":"assistant","content":"hi"},"finish_reason":"stop"}]}')
    step = run.writer.state.operation.step
    expected = {"type": "settleFromRaw", "attemptId": step.attemptId, "rawId": step.rawId}
    assert plan(run) == expected
    changed = CurrentConfiguration(configurationDigest="sha256:" + "f" * 64, environmentIdentity="x", tools=[])
    assert plan(run, changed) == expected


def test_settle_from_raw_on_attempt_2(run):
    run.attempt()
    run.attempt(2)
    assert plan(run) == {"type": "blocked", "reason": "attempts_exhausted"}
    run.raw("{}")
    assert plan(run)["type"] == "settleFromRaw"


def test_abort_outranks_settle_from_raw(run):
    run.attempt()
    run.raw("{}")
    run.writer.commit(transactions.request_abort(run.writer.state, "model"))
    assert plan(run)["type"] == "closeAttempt"


def test_failed_step_finishes_failed(run):
    run.attempt()
    run.fail_step()
    assert plan(run) == {"type": "finish", "outcome": "failed", "error": {"code": "model_error", "message": "provider request failed"}}


def test_current_configuration_is_strict():
    with pytest.raises(msgspec.ValidationError):
        msgspec.json.decode(b'{"configurationDigest":"x","environmentIdentity":"y","tools":[],"extra":1}', type=CurrentConfiguration)


def test_compaction_fixture_is_idle_and_explained(conformance):
    state = reduce_bytes((conformance / "fixtures" / "completed-compaction.jsonl").read_bytes())
    plan = plan_recovery(state, CURRENT)
    assert explain(plan, state) == "nothing to do: the session is idle"


def test_the_crashed_example_replays_its_safe_tool():
    state = read_journal(PROJECT_ROOT / "sessions" / "examples" / "crashed-mid-tool.jsonl")
    assert msgspec.to_builtins(plan_recovery(state, CURRENT))["mode"] == "replay"
