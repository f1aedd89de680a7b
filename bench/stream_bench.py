#!/usr/bin/env python3
"""Stream reassembly against a bare msgspec decode of the same chunk payloads, measured in one run.

    python bench/stream_bench.py [--mb 20] [--call-chunks 10000] [--repeat 5]

It generates one Chat Completions stream in memory (deterministic): text
deltas in OpenAI's chunk shape (pieces of 1-24 characters, some non-ASCII,
an OpenRouter keep-alive comment now and then) until the body reaches
``--mb`` megabytes, then one tool call whose arguments arrive over
``--call-chunks`` chunks, a finish chunk, a usage chunk and ``[DONE]``.
It then measures, in interleaved rounds (bare, reassemble, strict, frame,
live, bare, ...), each the best of ``--repeat``:

- bare: ``msgspec.json.Decoder().decode`` of every chunk payload, already
  cut out of the body and encoded as bytes, values discarded -- the least
  any reader of the stream must do.  **The baseline of the ratio**;
- reassemble: ``chat_stream.reassemble(text)`` -- framing, strict JSON
  (duplicate keys, lone surrogates), merging, the body, the dropped paths;
- strict: ``LineDecoder().decode`` of every payload (bytes), for reference:
  the profile's share of the cost;
- frame: ``sse.parse_events(text)`` alone, for reference;
- live: the same body fed to ``SseDecoder`` in 64 KiB network chunks, each
  event pushed through ``LiveChatView`` (what a terminal would run).

A smaller stream (``--mb`` / 10) is measured the same way, to show the time
per chunk does not grow with the stream (no quadratic string building); and
each API's reassembly, through its registered ``WireApi``, is timed on streams
of N and 4N one-character deltas (text and a tool call's arguments) for the
same figure per API (it was a timed unit test once).
Nothing here is a pass/fail test: the machine is shared and noisy, so read
the ratios, which compare figures taken in the same run.
"""

from __future__ import annotations

import argparse
import json
import random
import sys
import time
from collections.abc import Callable
from pathlib import Path

import msgspec

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from tiny_agent.journal.json_profile import LineDecoder  # noqa: E402
from tiny_agent.loopback import Answer, Call, StreamShape, event_stream  # noqa: E402
from tiny_agent.wire.chat.stream import LiveChatView, Reassembled, reassemble  # noqa: E402
from tiny_agent.wire.registry import API  # noqa: E402
from tiny_agent.wire.sse import SseDecoder, parse_events  # noqa: E402

WORDS = ["the", "stream", "résumé", "naïve", "→", "journal", "😀", "bytes", "seam", "token", "ok", "Zürich", "\n", "  ", "日本"]
NETWORK_CHUNK = 64 * 1024


def generate(megabytes: float, call_chunks: int, seed: int = 1) -> str:
    """One stream body: text deltas up to ``megabytes``, then a tool call over ``call_chunks`` chunks."""
    rng = random.Random(seed)
    encode = json.JSONEncoder(ensure_ascii=False, separators=(",", ":")).encode
    head = {"id": "chatcmpl-bench", "object": "chat.completion.chunk", "created": 1742601234, "model": "gpt-4.1-mini-2025-04-14"}
    tail = {"system_fingerprint": "fp_6f2eabb9a5"}

    def event(delta: dict[str, object], finish: str | None = None) -> str:
        chunk = {**head, **tail, "choices": [{"index": 0, "delta": delta, "logprobs": None, "finish_reason": finish}]}
        return "data: " + encode(chunk) + "\n\n"

    parts = [event({"role": "assistant", "content": "", "refusal": None})]
    size = 0
    target = int(megabytes * 1_000_000)
    while size < target:
        piece = " ".join(rng.choice(WORDS) for _ in range(rng.randint(1, 4)))[:24]
        text = event({"content": piece})
        if rng.random() < 0.001:
            text += ": OPENROUTER PROCESSING\n\n"
        parts.append(text)
        size += len(text.encode("utf-8"))
    call = {"index": 0, "id": "call_bench", "type": "function", "function": {"name": "write", "arguments": ""}}
    parts.append(event({"tool_calls": [call]}))
    for number in range(call_chunks):
        piece = '{"path":"out.txt","text":"' if number == 0 else ('"}' if number == call_chunks - 1 else f"line {number} é\\n")
        parts.append(event({"tool_calls": [{"index": 0, "function": {"arguments": piece}}]}))
    parts.append(event({}, "tool_calls"))
    usage = {"prompt_tokens": 1917, "completion_tokens": 4_000_000, "total_tokens": 4_001_917}
    parts.append("data: " + encode({**head, "choices": [], "usage": usage}) + "\n\n")
    parts.append("data: [DONE]\n\n")
    return "".join(parts)


def payloads(text: str) -> list[bytes]:
    return [event.data.encode("utf-8") for event in parse_events(text) if event.data != "[DONE]"]


def bare(chunks: list[bytes]) -> int:
    decode = msgspec.json.Decoder().decode
    count = 0
    for chunk in chunks:
        decode(chunk)
        count += 1
    return count


def strict(chunks: list[bytes]) -> int:
    decode = LineDecoder().decode
    count = 0
    for chunk in chunks:
        decode(chunk)
        count += 1
    return count


def live(raw: bytes) -> int:
    decoder = SseDecoder()
    view = LiveChatView()
    shown = 0
    for start in range(0, len(raw), NETWORK_CHUNK):
        for event in decoder.feed(raw[start : start + NETWORK_CHUNK]):
            shown += len(view.push(event))
    for event in decoder.close():
        shown += len(view.push(event))
    return shown


def timed(work: Callable[[], object]) -> float:
    start = time.perf_counter()
    work()
    return time.perf_counter() - start


def measure(text: str, repeat: int) -> dict[str, float]:
    chunks = payloads(text)
    raw = text.encode("utf-8")
    modes: dict[str, Callable[[], object]] = {
        "bare": lambda: bare(chunks),
        "reassemble": lambda: reassemble(text),
        "strict": lambda: strict(chunks),
        "frame": lambda: parse_events(text),
        "live": lambda: live(raw),
    }
    best = {name: float("inf") for name in modes}
    for _ in range(repeat):
        for name, work in modes.items():
            best[name] = min(best[name], timed(work))
    return best


def report(label: str, text: str, repeat: int) -> dict[str, float]:
    outcome = reassemble(text)
    assert isinstance(outcome, Reassembled), outcome
    message = outcome.body["choices"][0]["message"]
    arguments = message["tool_calls"][0]["function"]["arguments"]
    megabytes = outcome.bytes / 1e6
    best = measure(text, repeat)
    print(
        f"{label}: {megabytes:.1f} MB, {outcome.chunks:,} chunks, content {len(message['content']) / 1e6:.1f} M chars,"
        f" arguments {len(arguments) / 1e3:.0f} k chars"
    )
    print(f"  {'mode':<11} {'seconds':>8} {'MB/s':>7} {'µs/chunk':>9} {'bare/mode':>9}")
    for name, seconds in best.items():
        print(
            f"  {name:<11} {seconds:8.3f} {megabytes / seconds:7.1f} {seconds / outcome.chunks * 1e6:9.2f}"
            f" {best['bare'] / seconds:9.2f}"
        )
    return {name: seconds / outcome.chunks for name, seconds in best.items()}


def per_api(pieces: int, repeat: int) -> None:
    """Each API's reassembly of ``pieces`` and 4x ``pieces`` one-character deltas: the time per delta should not grow."""
    print(f"every API, {pieces:,} and {4 * pieces:,} deltas of text and of arguments (best of {repeat}):")
    for name, wire in API.items():
        per_delta = []
        for count in (pieces, 4 * pieces):
            answer = Answer(text="tök " * (count // 4), calls=(Call("t", '{"a":[' + "1," * (count // 2) + "1]}"),))
            text = event_stream(name, answer, StreamShape(piece=1, pings=False)).decode("utf-8")
            per_delta.append(min(timed(lambda text=text, wire=wire: wire.reassemble(text)) for _ in range(repeat)) / (2 * count))
        print(f"  {name:<10} {per_delta[0] * 1e6:7.2f} µs/delta, then {per_delta[1] * 1e6:7.2f}: {per_delta[1] / per_delta[0]:.2f}x")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--mb", type=float, default=20.0, help="size of the text part of the stream (default 20)")
    parser.add_argument("--call-chunks", type=int, default=10_000, help="chunks the tool call's arguments arrive in")
    parser.add_argument("--repeat", type=int, default=5, help="interleaved rounds; each figure is the best")
    args = parser.parse_args()
    print(f"Python {sys.version.split()[0]}, msgspec {msgspec.__version__}; best of {args.repeat} interleaved rounds")
    small = report("small", generate(args.mb / 10, args.call_chunks // 10), args.repeat)
    large = report("large", generate(args.mb, args.call_chunks), args.repeat)
    growth = {name: large[name] / small[name] for name in large}
    print("time per chunk, large / small: " + ", ".join(f"{name} {value:.2f}x" for name, value in growth.items()))
    per_api(10_000, args.repeat)


if __name__ == "__main__":
    main()
