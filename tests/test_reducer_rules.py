"""Reducer rules the conformance fixtures do not reach: framing edge cases, the spec's
choices where the references diverge (§18), and the v3 raw and seal facts."""

from __future__ import annotations

import json
import sys

import msgspec
import pytest
from builders import SNAPSHOT, SNAPSHOT_DIGEST, RunWriter, new_writer, write_tool_session
from lines import edit_line, join, reseal, split
from spec_example import example_bytes

from tiny_agent.agent import transactions
from tiny_agent.agent.compaction import Cut
from tiny_agent.errors import CorruptionError
from tiny_agent.fold.lines import reduce_bytes
from tiny_agent.journal.facts import RecordFact, StepAttempt
from tiny_agent.journal.ids import uuid7
from tiny_agent.journal.transcript import Usage
from tiny_agent.stores.journal import CommitRejected

V2 = example_bytes(9)  # the complete §20 example, without its torn tail


def error_of(data: bytes) -> tuple[str, int, int | None]:
    with pytest.raises(CorruptionError) as caught:
        reduce_bytes(data)
    return caught.value.code, caught.value.line, caught.value.seq


# -- framing and the JSON profile (§2, §3) -------------------------------------


@pytest.mark.parametrize("data", [b"", b"{}", b'{"kind":"header"'])
def test_no_complete_line_is_a_missing_header(data):
    assert error_of(data) == ("MISSING_HEADER", 1, None)


def test_empty_first_line_is_a_missing_header():
    assert error_of(b"\n" + V2) == ("MISSING_HEADER", 1, None)


def test_invalid_utf8_anywhere_outranks_an_earlier_blank_line():
    lines = split(V2)
    data = join([lines[0], b"", *lines[1:7], lines[7] + b"\xff"])
    assert error_of(data) == ("INVALID_UTF8", 1, None)


def test_encoded_surrogate_outranks_an_earlier_blank_line_and_names_its_line():
    lines = split(V2)
    bad = lines[6].replace(b"What", b"Wh\xed\xa0\x80at") if b"What" in lines[6] else lines[6][:-2] + b'\xed\xa0\x80"}'
    data = join([lines[0], b"", lines[1], lines[2], bad])
    assert error_of(data) == ("MALFORMED_JSON", 5, None)


def test_torn_tail_is_never_decoded():
    state = reduce_bytes(V2 + b"\xff\xfe not json at all")
    assert state.repairedLength == len(V2)


def test_byte_order_mark_is_malformed():  # §18 D4
    assert error_of(b"\xef\xbb\xbf" + V2) == ("MALFORMED_JSON", 1, None)


def test_line_of_spaces_is_malformed_not_blank():
    lines = split(V2)
    assert error_of(join([lines[0], b"   "])) == ("MALFORMED_JSON", 2, None)


def test_crlf_line():
    lines = split(V2)
    assert error_of(join([lines[0], lines[1] + b"\r"])) == ("CRLF_NOT_ALLOWED", 2, None)


def test_nested_duplicate_key_is_malformed():
    lines = split(V2)
    doubled = lines[1].replace(b'"content":"What does main.py print?"', b'"content":"a","content":"What does main.py print?"')
    assert error_of(join([lines[0], doubled])) == ("MALFORMED_JSON", 2, None)


def test_duplicate_key_spelled_with_an_escape_is_malformed():
    lines = split(V2)
    doubled = lines[1].replace(b'"content":"What', b'"\\u0063ontent":"x","content":"What')
    assert error_of(join([lines[0], doubled])) == ("MALFORMED_JSON", 2, None)


def test_duplicate_keys_in_tool_arguments_are_malformed():
    lines = split(V2)
    doubled = lines[4].replace(b'"arguments":{"path":"main.py"}', b'"arguments":{"path":"x","path":"main.py"}')
    assert error_of(join(lines[:4] + [doubled])) == ("MALFORMED_JSON", 5, None)


def test_escaped_lone_surrogate_is_malformed():
    lines = split(V2)
    bad = lines[1].replace(b"What", b"\\udc00What")
    assert error_of(join([lines[0], bad])) == ("MALFORMED_JSON", 2, None)


def test_huge_exponent_is_json_but_not_an_integer():
    lines = split(V2)
    bad = lines[2].replace(b'"seq":3', b'"seq":1e400')
    assert error_of(join(lines[:2] + [bad])) == ("INVALID_FACT", 3, None)


def test_integer_written_with_a_fraction_is_not_an_integer():  # §18 D3
    lines = split(V2)
    bad = lines[2].replace(b'"seq":3', b'"seq":3.0')
    assert error_of(join(lines[:2] + [bad])) == ("INVALID_FACT", 3, None)


def test_header_version_written_as_a_float_is_unsupported():  # §18 D3
    lines = split(V2)
    assert error_of(join([lines[0].replace(b'"version":2', b'"version":2.0')])) == ("UNSUPPORTED_VERSION", 1, None)


def test_empty_transaction_and_nested_array():
    lines = split(V2)
    assert error_of(join([lines[0], b"[]"])) == ("EMPTY_TRANSACTION", 2, None)
    assert error_of(join([lines[0], b"[[1]]"])) == ("INVALID_FACT", 2, None)
    assert error_of(join([lines[0], b"[]"])) == ("EMPTY_TRANSACTION", 2, None)


def test_seq_mismatch_reports_the_value_found():
    lines = split(V2)
    bad = lines[2].replace(b'"seq":3', b'"seq":9')
    assert error_of(join(lines[:2] + [bad])) == ("SEQ_MISMATCH", 3, 9)


def test_boolean_is_not_an_integer():
    lines = split(V2)
    bad = lines[2].replace(b'"timestamp":1720000001010', b'"timestamp":true')
    assert error_of(join(lines[:2] + [bad])) == ("INVALID_FACT", 3, 3)


# -- §18: where the references diverge, the spec's choice -------------------------


def test_assistant_message_without_content_is_invalid():  # D8
    lines = split(V2)
    bad = lines[3].replace(b'"content":null,', b"")
    assert error_of(join(lines[:3] + [bad])) == ("INVALID_FACT", 4, 4)


def test_aborted_with_final_entry_is_an_invalid_transition():  # D2
    lines = split(V2)[:9]
    abort = (
        b'{"kind":"record","seq":10,"id":"0190f5e2-7c00-7a00-8a00-0000000000a0","timestamp":1,'
        b'"record":{"type":"abortRequested","operationId":"0190f5e2-7c00-7a00-8a00-000000000020",'
        b'"operationKind":"run","phase":"model","reason":"escape"}}'
    )
    finish = (
        b'{"kind":"record","seq":11,"id":"0190f5e2-7c00-7a00-8a00-0000000000a1","timestamp":1,'
        b'"record":{"type":"operationFinished","operationId":"0190f5e2-7c00-7a00-8a00-000000000020",'
        b'"operationKind":"run","outcome":"aborted","finalEntryId":"0190f5e2-7c00-7a00-8a00-000000000018"}}'
    )
    assert error_of(join(lines[:8] + [abort, finish])) == ("INVALID_TRANSITION", 10, 11)


def test_transcript_breach_is_reported_with_the_last_fact_of_its_transaction():
    lines = split(V2)[:4]
    user = {"kind": "entry", "seq": 5, "id": "0190f5e2-7c00-7a00-8a00-0000000000b0", "timestamp": 1,
            "entry": {"type": "message", "message": {"role": "user", "content": "hello?"}}}
    usage = {"kind": "usage", "seq": 6, "id": "0190f5e2-7c00-7a00-8a00-0000000000b1", "timestamp": 1,
             "operationId": "0190f5e2-7c00-7a00-8a00-000000000020", "attemptId": "0190f5e2-7c00-7a00-8a00-000000000031",
             "usage": {"input": 1, "output": 1, "cacheRead": 0, "cacheWrite": 0}}
    data = join(lines + [json.dumps([user, usage], separators=(",", ":")).encode()])
    assert error_of(data) == ("INVALID_TRANSCRIPT", 5, 6)


def test_errors_carry_a_reason_naming_the_key():
    lines = split(V2)
    bad = lines[3].replace(b'"content":null,', b'"content":null,"reasoning":"hmm",')
    with pytest.raises(CorruptionError) as caught:
        reduce_bytes(join(lines[:3] + [bad]))
    assert str(caught.value) == 'INVALID_FACT at line 4 (seq 4): assistant message has unknown key "reasoning"'


# -- v3: seals and raw facts ------------------------------------------------------


@pytest.fixture()
def sealed(tmp_path) -> bytes:
    path = tmp_path / "s.jsonl"
    write_tool_session(path, runs=2)
    return path.read_bytes()


def test_sealed_session_reduces_with_raw_links(sealed):
    state = reduce_bytes(sealed)
    assert state.version == 3
    assert state.sealed
    assert len(state.transcript) == 8
    assert state.to_json()["operation"] == {"kind": "idle"}


def test_open_attempt_shows_its_raw_fact(tmp_path):
    writer = new_writer(tmp_path / "s.jsonl")
    run = RunWriter(writer)
    run.start("hi")
    run.attempt()
    run.raw('{"choices":[]}')
    step = reduce_bytes((tmp_path / "s.jsonl").read_bytes()).to_json()["operation"]["step"]
    assert step["status"] == "attempting"
    assert "rawId" in step


def test_any_changed_byte_is_caught_by_the_next_seal(sealed):
    lines = split(sealed)
    changed = lines[1].replace(b"file 0", b"file 9")
    assert error_of(join([lines[0], changed, *lines[2:]])) == ("SEAL_MISMATCH", 3, json.loads(lines[2])[-1]["seq"])


def test_deleted_or_swapped_lines_are_caught(sealed):
    lines = split(sealed)
    assert error_of(join([lines[0], lines[1], *lines[3:]]))[0] in {"SEAL_MISMATCH", "SEQ_MISMATCH"}
    assert error_of(join([lines[0], lines[2], lines[1], *lines[3:]]))[0] in {"SEAL_MISMATCH", "SEQ_MISMATCH"}


def test_v3_line_without_a_seal(sealed):
    data = edit_line(sealed, 2, lambda facts: facts[:-1])
    code, line, _ = error_of(data)
    assert (code, line) == ("INVALID_FACT", 2)


def test_v3_seal_must_be_last(sealed):
    def seal_in_the_middle(facts):
        user, run, seal = facts
        return [user, dict(seal, seq=run["seq"]), dict(run, seq=seal["seq"])]

    data = reseal(edit_line(sealed, 2, seal_in_the_middle))
    assert error_of(data)[0:2] == ("INVALID_FACT", 2)


def test_raw_fact_rules(tmp_path):
    path = tmp_path / "s.jsonl"
    writer = new_writer(path)
    run = RunWriter(writer)
    run.start("hi")
    run.attempt()
    run.raw('{"choices":[]}')
    writer.close(seal=False)
    data = path.read_bytes()
    raw_line = split(data)[-1]
    raw = json.loads(raw_line)[0]
    seal = json.loads(raw_line)[1]

    def with_line(facts: list) -> bytes:
        lines = split(data)
        return reseal(join(lines[:-1] + [json.dumps(facts, separators=(",", ":")).encode()]))

    second = dict(raw, id="0190f5e2-7c00-7a00-8a00-0000000000c0", seq=seal["seq"] + 1)
    second_seal = dict(seal, id="0190f5e2-7c00-7a00-8a00-0000000000c2", seq=seal["seq"] + 2)
    doubled = reseal(join(split(data) + [json.dumps([second, second_seal]).encode()]))
    assert error_of(doubled)[0] == "INVALID_TRANSITION"
    unknown = dict(raw, attemptId="0190f5e2-7c00-7a00-8a00-0000000000c1")
    assert error_of(with_line([unknown, seal]))[0] == "INVALID_REFERENCE"
    both = dict(raw, raw=dict(raw["raw"], bodyBase64="AAAA"))
    assert error_of(with_line([both, seal]))[0] == "INVALID_FACT"
    bad64 = dict(raw, raw={"status": 200, "contentType": None, "bodyBase64": "not base64!"})
    assert error_of(with_line([bad64, seal]))[0] == "INVALID_FACT"
    binary = dict(raw, raw={"status": 502, "contentType": None, "bodyBase64": "//79"})
    reduce_bytes(with_line([binary, seal]))


def test_raw_and_seal_are_unknown_kinds_in_v2():
    lines = split(V2)[:3]
    seal = (
        b'[{"kind":"seal","seq":4,"id":"0190f5e2-7c00-7a00-8a00-0000000000d0","timestamp":1,"chain":"sha256:'
        + b"0" * 64
        + b'"}]'
    )
    assert error_of(join(lines + [seal])) == ("INVALID_FACT", 4, 4)


def test_v3_header_accepted_and_v4_refused(sealed):
    lines = split(sealed)
    assert error_of(join([lines[0].replace(b'"version":3', b'"version":4')])) == ("UNSUPPORTED_VERSION", 1, None)


# -- integers past Python's digit limit (hardening D11) ---------------------------

HUGE = b"1" * 5000
"""5,000 digits: past CPython's 4,300-digit limit on converting a decimal literal to int."""


def test_a_huge_seq_is_not_an_integer_not_malformed_json():
    lines = split(V2)
    bad = lines[2].replace(b'"seq":3', b'"seq":' + HUGE)
    assert error_of(join(lines[:2] + [bad])) == ("INVALID_FACT", 3, None)


@pytest.mark.parametrize("member", [b'"input":0', b'"cacheWrite":0'])
def test_a_huge_usage_counter_is_an_invalid_fact(member):
    lines = split(V2)
    bad = lines[5].replace(member, member[:-1] + HUGE, 1)
    assert bad != lines[5]
    assert error_of(join(lines[:5] + [bad])) == ("INVALID_FACT", 6, 7)


def test_a_huge_tool_index_is_an_invalid_fact():
    lines = split(V2)
    bad = lines[4].replace(b'"toolIndex":0', b'"toolIndex":' + HUGE)
    assert error_of(join(lines[:4] + [bad])) == ("INVALID_FACT", 5, 5)


@pytest.mark.parametrize("spelling", [HUGE, b"-" + HUGE])
def test_a_huge_timestamp_or_created_at_fails_its_own_rule(spelling):
    lines = split(V2)
    assert error_of(join([lines[0].replace(b'"createdAt":1720000000000', b'"createdAt":' + spelling)])) == (
        "INVALID_HEADER",
        1,
        None,
    )
    bad = lines[2].replace(b'"timestamp":1720000001010', b'"timestamp":' + spelling)
    assert error_of(join(lines[:2] + [bad])) == ("INVALID_FACT", 3, 3)


def test_a_huge_integer_in_tool_arguments_is_kept_verbatim():
    """Any JSON value is allowed there; it is kept and written back byte for byte."""
    lines = split(V2)
    bad = lines[4].replace(b'"arguments":{"path":"main.py"}', b'"arguments":{"path":"main.py","n":' + HUGE + b"}")
    state = reduce_bytes(join(lines[:4] + [bad]))
    encoded = state.to_json_bytes()
    assert b'"n":' + HUGE + b"}" in encoded
    assert encoded == msgspec.json.encode(state.to_json())


def test_the_process_wide_digit_limit_is_left_alone():
    before = sys.get_int_max_str_digits()
    lines = split(V2)
    error_of(join(lines[:2] + [lines[2].replace(b'"seq":3', b'"seq":' + HUGE)]))
    assert sys.get_int_max_str_digits() == before
    with pytest.raises(ValueError):
        int(HUGE)


# -- a compaction keeps a transcript a provider takes (§8.4) ---------------------------------


@pytest.mark.parametrize(("compacted", "refused"), [(3, False), (2, True)])
def test_a_compaction_may_not_keep_a_tool_result_without_its_call(tmp_path, compacted, refused):
    """Cutting after the result keeps [answer]; cutting between the call and its result would keep [result, answer]."""
    writer = new_writer(tmp_path / "s.jsonl")
    run = RunWriter(writer)
    run.start("read it")
    run.attempt()
    run.run_tool(run.call_tools([("read", '{"path":"README.md"}')]), 0, "# Example")
    run.attempt()
    run.finish(run.answer("It is an example."))
    messages = transactions.message_ids(writer.state)
    writer.commit(transactions.begin_compaction(writer.state, Cut(compacted=messages[:compacted], retained=messages[compacted:])))
    operation = writer.state.operation
    writer.commit([RecordFact(id="", record=StepAttempt(
        operationId=operation.operationId, stepId=uuid7(), attemptId=uuid7(), stepKind="compaction", attempt=1,
        contextThroughEntryId=operation.inputThroughEntryId, configurationSnapshot=SNAPSHOT, configurationDigest=SNAPSHOT_DIGEST,
    ))])
    settle = transactions.settle_compaction(writer.state, "A summary.", Usage(1, 1, 0, 0))
    if not refused:
        writer.commit(settle)
        return
    with pytest.raises(CommitRejected) as caught:
        writer.commit(settle)
    assert caught.value.error.code == "INVALID_TRANSCRIPT"
    assert 'retained tail breaks the role rule: message 0: tool result for "call_0_' in caught.value.error.reason
