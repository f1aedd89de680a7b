"""SSE framing: the whole-body parser and the incremental decoder agree on every split."""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from tiny_agent.wire.sse import SseDecoder, SseEvent, looks_like_sse, parse_events


def test_data_lines_join_comments_and_other_fields_are_ignored() -> None:
    body = ": OPENROUTER PROCESSING\n\nid: 7\nretry: 100\nevent: delta\ndata: {\"a\":\ndata:1}\n\ndata: [DONE]\n\n"
    assert parse_events(body) == [SseEvent(data='{"a":\n1}', event="delta"), SseEvent(data="[DONE]")]


def test_one_space_after_the_colon_is_dropped_and_only_one() -> None:
    assert parse_events("data:x\n\ndata:  y\n\n") == [SseEvent(data="x"), SseEvent(data=" y")]


def test_crlf_and_cr_line_ends() -> None:
    assert parse_events("data: a\r\n\r\ndata: b\r\rdata: c\n\n") == [SseEvent("a"), SseEvent("b"), SseEvent("c")]


def test_an_unfinished_event_is_not_an_event() -> None:
    assert parse_events("data: a\n\ndata: b\n") == [SseEvent("a")]
    assert parse_events("data: a\n\ndata: b") == [SseEvent("a")]


def test_an_event_without_data_is_no_event() -> None:
    assert parse_events("event: ping\n\n: keep-alive\n\n") == []


def test_a_leading_byte_order_mark_is_ignored() -> None:
    body = "\ufeffdata: a\n\ndata: \ufeffb\n\n"
    assert parse_events(body) == [SseEvent("a"), SseEvent("\ufeffb")]
    raw = body.encode("utf-8")
    decoder = SseDecoder()
    # The mark's three bytes arrive in two pieces; only the one at the very start is dropped.
    events = decoder.feed(raw[:2]) + decoder.feed(raw[2:]) + decoder.close()
    assert events == [SseEvent("a"), SseEvent("\ufeffb")]


def test_a_long_line_fed_in_small_pieces_arrives_whole() -> None:
    line = "data: " + "é" * 100_000
    raw = (line + "\r\n\r\n").encode("utf-8")
    decoder = SseDecoder()
    events: list[SseEvent] = []
    for start in range(0, len(raw), 7):
        events.extend(decoder.feed(raw[start : start + 7]))
    assert events == [SseEvent("é" * 100_000)]
    assert decoder.close() == []


def test_content_sniffing() -> None:
    assert looks_like_sse("data: {}\n\n")
    assert looks_like_sse("\n: comment\n")
    assert looks_like_sse("event: message_start\ndata: {}\n\n")
    assert not looks_like_sse('{"choices": []}')
    assert not looks_like_sse("  [1]")
    assert not looks_like_sse("<html>")


_LINES = st.sampled_from(
    ["data: {\"x\": \"é€😀\"}", "data:", "data: [DONE]", ": keep-alive", "event: e", "id: 1", "retry: 5", "", "", "data: a b"]
)
_ENDS = st.sampled_from(["\n", "\r\n", "\r"])


@settings(max_examples=300, deadline=None)
@given(st.lists(st.tuples(_LINES, _ENDS), max_size=30), st.data())
def test_any_split_of_the_bytes_gives_the_whole_body_events(lines: list[tuple[str, str]], data: st.DataObject) -> None:
    text = data.draw(st.sampled_from(["", "\ufeff"])) + "".join(line + end for line, end in lines)
    raw = text.encode("utf-8")
    cuts = sorted(data.draw(st.lists(st.integers(0, len(raw)), max_size=12)))
    decoder = SseDecoder()
    events: list[SseEvent] = []
    previous = 0
    for cut in [*cuts, len(raw)]:
        events.extend(decoder.feed(raw[previous:cut]))
        previous = cut
    events.extend(decoder.close())
    assert events == parse_events(text)
