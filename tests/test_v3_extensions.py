"""The v3 contract extensions: raw ``contentEncoding`` / ``redactions`` / ``incomplete``, transport retries, ``rawStatus``.

Every accept and reject case is checked on both fold paths (fast and
reference), which must agree.  Invalid candidates are built as lines after a
valid prefix written by the real writer, resealed as a writer would seal them.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import msgspec
import pytest
from builders import SNAPSHOT, SNAPSHOT_DIGEST, RunWriter, new_writer

from tiny_agent.agent.compaction import Cut
from tiny_agent.agent.transactions import begin_compaction, message_ids
from tiny_agent.errors import CorruptionError
from tiny_agent.fold import Fold, reduce_chunks
from tiny_agent.journal.canonical import canonical_digest
from tiny_agent.journal.facts import RawFact, RawResponse, RecordFact, StepAttempt
from tiny_agent.journal.ids import uuid7
from tiny_agent.journal.json_profile import MAX_SAFE_INTEGER
from tiny_agent.journal.state import ConfigurationSnapshot, RunOperation


def outcome(data: bytes, *, fast_path: bool) -> tuple[str, Any]:
    try:
        state = reduce_chunks((data,), Fold(fast_path=fast_path))
    except CorruptionError as error:
        return "error", (error.code, error.line, error.seq)
    return "ok", state.to_json()


def agreed(data: bytes) -> tuple[str, Any]:
    """The outcome both fold paths give (they must give the same)."""
    reference = outcome(data, fast_path=False)
    assert outcome(data, fast_path=True) == reference
    return reference


def with_line(path: Path, facts: list[dict[str, Any]]) -> bytes:
    """The journal at ``path`` plus one candidate line: facts stamped with seqs and IDs, then sealed."""
    data = path.read_bytes()
    fold = Fold()
    reduce_chunks((data,), fold)
    seq = fold.next_seq
    stamped = []
    for fact in facts:
        stamped.append({**fact, "seq": seq, "id": fact.get("id") or uuid7(), "timestamp": 1})
        seq += 1
    stamped.append({"kind": "seal", "seq": seq, "id": uuid7(), "timestamp": 1, "chain": fold.chain})
    return data + json.dumps(stamped, separators=(",", ":")).encode() + b"\n"


def next_line(path: Path) -> int:
    """The line number a candidate appended to the journal at ``path`` gets."""
    return path.read_bytes().count(b"\n") + 1


def error_of(path: Path, facts: list[dict[str, Any]]) -> tuple[str, int, int | None]:
    kind, result = agreed(with_line(path, facts))
    assert kind == "error", result
    return result


def builtins(fact: msgspec.Struct) -> dict[str, Any]:
    value = msgspec.to_builtins(fact)
    assert isinstance(value, dict)
    return value


def open_run(path: Path, version: int = 3) -> RunWriter:
    run = RunWriter(new_writer(path, version))
    run.start("hi")
    run.attempt()
    return run


def retry(run: RunWriter, number: int, **changes: Any) -> RecordFact:
    """Attempt ``number`` of the run's current step, repeating the latest attempt unless ``changes`` say otherwise."""
    step = run.writer.state.operation.step  # type: ignore[union-attr]
    record = StepAttempt(
        operationId=run.operation_id,
        stepId=run.step_id,
        attemptId=uuid7(),
        stepKind="assistant",
        attempt=number,
        contextThroughEntryId=step.contextThroughEntryId,
        configurationSnapshot=SNAPSHOT,
        configurationDigest=SNAPSHOT_DIGEST,
    )
    return RecordFact(id="", record=msgspec.structs.replace(record, **changes))


def commit_retry(run: RunWriter, number: int) -> None:
    fact = retry(run, number)
    run.writer.commit([fact])
    run.attempt_id = fact.record.attemptId  # type: ignore[union-attr]


def latest_step(path: Path) -> dict[str, Any]:
    kind, state = agreed(path.read_bytes())
    assert kind == "ok", state
    step = state["operation"]["step"]
    assert isinstance(step, dict)
    return step


# -- raw: contentEncoding, redactions and incomplete -------------------------------------------------


def raw_fact(run: RunWriter, raw: dict[str, Any]) -> dict[str, Any]:
    return {"kind": "raw", "operationId": run.operation_id, "attemptId": run.attempt_id, "raw": raw}


BODY = {"status": 200, "contentType": "application/json", "body": '{"choices":[]}'}


@pytest.mark.parametrize(
    "members",
    [
        {"redactions": 1},
        {"redactions": MAX_SAFE_INTEGER},
        {"incomplete": "stream cut off after 3 chunks"},
        {"redactions": 2, "incomplete": "read timeout"},
        {"contentEncoding": "gzip"},
        {"contentEncoding": "br", "incomplete": "not decoded"},
    ],
)
def test_raw_redactions_and_incomplete_are_accepted_and_written_only_when_set(tmp_path, members):
    run = open_run(tmp_path / "s.jsonl")
    raw = RawResponse(status=200, contentType="application/json", body='{"choices":[]}', **members)
    written = run.writer.commit([RawFact(id="", operationId=run.operation_id, attemptId=run.attempt_id, raw=raw)])
    line = (tmp_path / "s.jsonl").read_bytes().splitlines()[-1]
    assert json.loads(line)[0]["raw"] == {**BODY, **members}
    assert latest_step(tmp_path / "s.jsonl")["rawId"] == written[0].id


def test_an_unset_raw_member_is_not_written(tmp_path):
    run = open_run(tmp_path / "s.jsonl")
    run.raw('{"choices":[]}')
    line = (tmp_path / "s.jsonl").read_bytes().splitlines()[-1]
    assert set(json.loads(line)[0]["raw"]) == {"status", "contentType", "body"}


def test_redactions_go_with_a_base64_body_too(tmp_path):
    run = open_run(tmp_path / "s.jsonl")
    binary = {"status": 502, "contentType": None, "bodyBase64": "//79", "redactions": 1}
    data = with_line(tmp_path / "s.jsonl", [raw_fact(run, binary)])
    assert agreed(data)[0] == "ok"


class _CountingFold(Fold):
    reference_lines = 0

    def _transaction(self, value: Any, start: int = 0) -> None:
        self.reference_lines += 1
        super()._transaction(value, start)


def test_the_fast_path_takes_raw_facts_with_the_new_members(tmp_path):
    """A raw fact with ``redactions`` and ``incomplete`` fits the fast path's shape: no line is read twice."""
    run = open_run(tmp_path / "s.jsonl")
    data = with_line(tmp_path / "s.jsonl", [raw_fact(run, {**BODY, "contentEncoding": "gzip", "redactions": 4, "incomplete": "interrupted"})])
    fold = _CountingFold()
    reduce_chunks((data,), fold)
    prefix = _CountingFold()
    reduce_chunks(((tmp_path / "s.jsonl").read_bytes(),), prefix)
    assert fold.reference_lines == prefix.reference_lines == 0


@pytest.mark.parametrize(
    "members",
    [
        {"redactions": 0},
        {"redactions": -1},
        {"redactions": "2"},
        {"redactions": 1.5},
        {"redactions": 1.0},
        {"redactions": True},
        {"redactions": None},
        {"redactions": MAX_SAFE_INTEGER + 1},
        {"incomplete": ""},
        {"incomplete": 1},
        {"incomplete": None},
        {"incomplete": ["timeout"]},
        {"contentEncoding": ""},
        {"contentEncoding": None},
        {"contentEncoding": 1},
        {"truncated": True},
    ],
)
def test_bad_raw_members_are_invalid_facts(tmp_path, members):
    run = open_run(tmp_path / "s.jsonl")
    path = tmp_path / "s.jsonl"
    expected = ("INVALID_FACT", next_line(path), run.writer.fold.next_seq)
    assert error_of(path, [raw_fact(run, {**BODY, **members})]) == expected


# -- retries beyond attempt 2 (v3) ------------------------------------------------------


def test_v3_steps_may_retry_up_to_attempt_16_each_closing_the_one_before(tmp_path):
    run = open_run(tmp_path / "s.jsonl")
    for number in range(2, 17):
        commit_retry(run, number)
        assert run.writer.state.operation.step.attempt == number  # type: ignore[union-attr]
    answer = run.answer("done")
    run.finish(answer)
    kind, state = agreed((tmp_path / "s.jsonl").read_bytes())
    assert kind == "ok"
    assert state["operation"] == {"kind": "idle"}


def test_attempt_17_is_an_invalid_fact_in_v3(tmp_path):
    run = open_run(tmp_path / "s.jsonl")
    for number in range(2, 17):
        commit_retry(run, number)
    path = tmp_path / "s.jsonl"
    expected = ("INVALID_FACT", next_line(path), run.writer.fold.next_seq)
    assert error_of(path, [builtins(retry(run, 17))]) == expected


def test_v2_keeps_two_attempts(tmp_path):
    run = open_run(tmp_path / "s.jsonl", version=2)
    commit_retry(run, 2)
    path = tmp_path / "s.jsonl"
    seq = run.writer.fold.next_seq
    candidate = builtins(retry(run, 3)) | {"seq": seq, "id": uuid7(), "timestamp": 1}
    data = path.read_bytes() + msgspec.json.encode(candidate) + b"\n"
    assert agreed(data) == ("error", ("INVALID_FACT", next_line(path), seq))


def test_a_retry_cannot_skip_an_attempt(tmp_path):
    run = open_run(tmp_path / "s.jsonl")
    assert error_of(tmp_path / "s.jsonl", [builtins(retry(run, 3))])[0] == "INVALID_TRANSITION"


@pytest.mark.parametrize("ending", ["settled", "failed"])
def test_a_retry_needs_the_previous_attempt_open(tmp_path, ending):
    run = open_run(tmp_path / "s.jsonl")
    commit_retry(run, 2)
    if ending == "settled":
        run.call_tools([("read", "{}")])
    else:
        run.fail_step()
    assert error_of(tmp_path / "s.jsonl", [builtins(retry(run, 3))])[0] == "INVALID_TRANSITION"


def test_a_retry_repeats_the_context_and_the_configuration(tmp_path):
    run = open_run(tmp_path / "s.jsonl")
    asked = run.call_tools([("read", "{}")])
    run.run_tool(asked, 0, "contents")
    run.attempt()
    commit_retry(run, 2)
    assert error_of(tmp_path / "s.jsonl", [builtins(retry(run, 3, contextThroughEntryId=asked))])[0] == "INVALID_TRANSITION"
    other = msgspec.structs.replace(SNAPSHOT, model="other/model")
    assert isinstance(other, ConfigurationSnapshot)
    changed = retry(run, 3, configurationSnapshot=other, configurationDigest=canonical_digest(other))
    assert error_of(tmp_path / "s.jsonl", [builtins(changed)])[0] == "INVALID_TRANSITION"
    assert agreed(with_line(tmp_path / "s.jsonl", [builtins(retry(run, 3))]))[0] == "ok"


def test_a_raw_fact_belongs_to_the_open_attempt_only(tmp_path):
    run = open_run(tmp_path / "s.jsonl")
    first = run.attempt_id
    commit_retry(run, 2)
    commit_retry(run, 3)
    stale = raw_fact(run, BODY) | {"attemptId": first}
    assert error_of(tmp_path / "s.jsonl", [stale])[0] == "INVALID_TRANSITION"
    run.raw('{"choices":[]}', status=503)
    step = latest_step(tmp_path / "s.jsonl")
    assert (step["attempt"], step["rawStatus"]) == (3, 503)


# -- rawStatus ------------------------------------------------------------------------


@pytest.mark.parametrize("status", [200, 429, 500])
def test_the_latest_attempt_carries_its_raw_status(tmp_path, status):
    path = tmp_path / "s.jsonl"
    run = open_run(path)
    before = run.writer.state.operation.step  # type: ignore[union-attr]
    assert before.rawStatus is msgspec.UNSET  # type: ignore[union-attr]
    run.raw('{"choices":[]}', status=status)
    for fast_path in (True, False):
        state = reduce_chunks((path.read_bytes(),), Fold(fast_path=fast_path))
        operation = state.operation
        assert isinstance(operation, RunOperation)
        step = operation.step
        assert step is not msgspec.UNSET
        assert step.rawStatus == status
        assert step.rawId is not msgspec.UNSET


# -- compactionStarted's piece -------------------------------------------------------------------


@pytest.mark.parametrize(
    ("version", "piece", "code"), [(3, 2, None), (3, 0, "INVALID_FACT"), (3, True, "INVALID_FACT"), (2, 1, "INVALID_FACT")]
)
def test_a_compactions_piece_number_is_a_v3_member(tmp_path, version, piece, code):
    run = open_run(tmp_path / "s.jsonl", version)
    run.finish(run.answer("hello"))
    state = run.writer.state
    started = builtins(begin_compaction(state, Cut.at(message_ids(state), 1), 1)[0])
    started["record"]["piece"] = piece
    path = tmp_path / "s.jsonl"
    if version == 3:
        data = with_line(path, [started])
    else:
        data = path.read_bytes() + json.dumps(started | {"seq": run.writer.fold.next_seq, "id": uuid7(), "timestamp": 1}).encode() + b"\n"
    kind, result = agreed(data)
    assert (kind, result[0] if kind == "error" else None) == (("error", code) if code else ("ok", None))


# -- the refusal stop reason (issue 27) ----------------------------------------------------------------


def assistant(run: RunWriter, stop_reason: str, content: str | None = "No.", calls: bool = False) -> dict[str, Any]:
    message: dict[str, Any] = {"role": "assistant", "content": content}
    if calls:
        message["tool_calls"] = [{"id": "c1", "type": "function", "function": {"name": "read", "arguments": "{}"}}]
    entry = {"type": "message", "stepId": run.step_id, "attemptId": run.attempt_id, "stopReason": stop_reason, "message": message}
    return {"kind": "entry", "entry": entry}


@pytest.mark.parametrize("content", ["I can't help with that.", ""])
def test_a_refusal_settles_its_step_and_completes_the_run_even_without_text(tmp_path, content):
    run = open_run(tmp_path / "s.jsonl")
    entry = assistant(run, "refusal", content)
    entry["id"] = uuid7()
    data = with_line(tmp_path / "s.jsonl", [entry])
    finished = {
        "kind": "record",
        "record": {"type": "operationFinished", "operationId": run.operation_id, "operationKind": "run",
                   "outcome": "completed", "completion": "normal", "finalEntryId": entry["id"]},
    }
    (tmp_path / "t.jsonl").write_bytes(data)
    kind, state = agreed(with_line(tmp_path / "t.jsonl", [finished]))
    assert kind == "ok", state
    assert state["transcript"][-1] == {"role": "assistant", "content": content}
    assert state["operation"] == {"kind": "idle"}


def test_a_refusal_asks_for_no_tools_and_is_not_a_v2_stop_reason(tmp_path):
    run = open_run(tmp_path / "s.jsonl")
    assert error_of(tmp_path / "s.jsonl", [assistant(run, "refusal", None, calls=True)])[0] == "INVALID_TRANSCRIPT"
    v2 = open_run(tmp_path / "v2.jsonl", version=2)
    seq = v2.writer.fold.next_seq
    candidate = assistant(v2, "refusal") | {"seq": seq, "id": uuid7(), "timestamp": 1}
    data = (tmp_path / "v2.jsonl").read_bytes() + msgspec.json.encode(candidate) + b"\n"
    assert agreed(data) == ("error", ("INVALID_FACT", next_line(tmp_path / "v2.jsonl"), seq))
    with pytest.raises(CorruptionError, match="stopReason is not stop, toolUse or length: \"refusal\""):
        reduce_chunks((data,), Fold())
