"""Session-v2 §20: the worked example reduces as the spec says, and its single-fault variants fail as stated."""

from __future__ import annotations

import pytest
from spec_example import example_bytes, example_lines

from tiny_agent.errors import CorruptionError
from tiny_agent.fold.lines import reduce_bytes


def test_example_reduces_to_the_stated_state():
    state = reduce_bytes(example_bytes())
    assert state.repairedLength == 5183
    assert len(example_bytes()) - state.repairedLength == 26
    assert state.to_json()["usage"] == {"input": 1760, "output": 52, "cacheRead": 800, "cacheWrite": 0}
    assert state.to_json()["operation"] == {"kind": "idle"}
    contents = [message.content for message in state.transcript]
    assert contents == ["What does main.py print?", None, "print('hi')\n", "It prints hi."]
    assert state.activeContext == state.transcript


def _variant(line_number: int, old: str, new: str, *, keep_lines: int | None = None) -> bytes:
    lines = example_lines()[:-1]
    assert old in lines[line_number - 1]
    lines[line_number - 1] = lines[line_number - 1].replace(old, new)
    if keep_lines is not None:
        lines = lines[:keep_lines]
    return "".join(line + "\n" for line in lines).encode()


def _error(data: bytes) -> tuple[str, int, int | None]:
    with pytest.raises(CorruptionError) as caught:
        reduce_bytes(data)
    return caught.value.code, caught.value.line, caught.value.seq


def test_wrong_configuration_digest():
    data = _variant(3, "d47e35e\"}}", "d47e35f\"}}")
    assert _error(data) == ("INVALID_FACT", 3, 3)


def test_second_step_must_see_the_current_boundary():
    data = _variant(7, '"contextThroughEntryId":"0190f5e2-7c00-7a00-8a00-000000000015"', '"contextThroughEntryId":"0190f5e2-7c00-7a00-8a00-000000000013"')
    assert _error(data) == ("INVALID_TRANSITION", 7, 8)


def test_missing_usage_fact_shifts_seq():
    lines = example_lines()[:-1]
    result_line = lines[5]
    lines[5] = result_line[1 : result_line.index(',{"kind":"usage"')]
    data = "".join(line + "\n" for line in lines).encode()
    assert _error(data) == ("SEQ_MISMATCH", 7, 8)


def test_tool_result_with_an_unreserved_id():
    data = _variant(6, '"id":"0190f5e2-7c00-7a00-8a00-000000000015"', '"id":"0190f5e2-7c00-7a00-8a00-00000000001f"')
    assert _error(data) == ("INVALID_REFERENCE", 6, 6)


def test_user_message_while_a_call_is_outstanding():
    lines = example_lines()[:4]
    lines.append(
        '{"kind":"entry","seq":5,"id":"0190f5e2-7c00-7a00-8a00-000000000014","timestamp":1720000002010,'
        '"entry":{"type":"message","message":{"role":"user","content":"never mind"}}}'
    )
    data = "".join(line + "\n" for line in lines).encode()
    assert _error(data) == ("INVALID_TRANSCRIPT", 5, 5)


@pytest.mark.parametrize("through_line", range(1, 10))
def test_every_line_boundary_prefix_reduces(through_line):
    reduce_bytes(example_bytes(through_line))
