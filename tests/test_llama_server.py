"""Smoke tests of the real llama.cpp server helper (tests/llama_server.py): it starts, answers a plain
and a streamed chat completion in the shapes tiny-agent reads, and dies when told to.

Skipped, saying why, when llama-server is not built (.ci/build-llama builds it).
"""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

import httpx
import pytest
from llama_server import SKIP_REASON, LlamaServer, binary, slow_model

pytest_plugins = ["llama_server"]

TIMEOUT = httpx.Timeout(60.0, connect=10.0)
"""A deadline for every request; a tiny model answers far inside it."""


def body(**extra: object) -> dict[str, object]:
    return {"model": "tiny", "messages": [{"role": "user", "content": "hello"}], "seed": 7, "max_tokens": 64, **extra}


def sse_payloads(raw: bytes) -> list[str]:
    """The `data:` payloads of an event stream, in order (llama-server writes one `data:` line per event)."""
    text = raw.decode("utf-8")
    assert "\r" not in text
    return [line[len("data: ") :] for line in text.split("\n") if line.startswith("data: ")]


def test_without_the_binary_tests_skip_with_the_reason(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.setenv("TINY_AGENT_LLAMA_DIR", str(tmp_path))
    assert binary() is None
    with pytest.raises(pytest.skip.Exception, match="llama-server not built: run .ci/build-llama or set TINY_AGENT_LLAMA_DIR"):
        LlamaServer("tiny").start()
    assert SKIP_REASON.startswith("llama-server not built")


def test_a_plain_answer(llama: LlamaServer) -> None:
    response = httpx.post(llama.chat_url, json=body(), timeout=TIMEOUT)
    assert response.status_code == 200
    assert response.headers["content-type"].startswith("application/json")
    answer = response.json()
    assert answer["object"] == "chat.completion"
    (choice,) = answer["choices"]
    assert choice["message"]["role"] == "assistant"
    assert isinstance(choice["message"]["content"], str)
    assert choice["finish_reason"] in ("stop", "length")
    usage = answer["usage"]
    assert usage["prompt_tokens"] > 0
    assert usage["total_tokens"] == usage["prompt_tokens"] + usage["completion_tokens"]


def test_a_streamed_answer(llama: LlamaServer) -> None:
    with httpx.Client(timeout=TIMEOUT) as client:
        with client.stream("POST", llama.chat_url, json=body(stream=True, stream_options={"include_usage": True})) as response:
            assert response.status_code == 200
            assert response.headers["content-type"].startswith("text/event-stream")
            raw = b"".join(response.iter_raw())
    payloads = sse_payloads(raw)
    assert payloads[-1] == "[DONE]"
    chunks = [json.loads(payload) for payload in payloads[:-1]]
    assert all(chunk["object"] == "chat.completion.chunk" for chunk in chunks)
    assert len({chunk["id"] for chunk in chunks}) == 1
    assert chunks[0]["choices"][0]["delta"]["role"] == "assistant"
    finishes = [choice["finish_reason"] for chunk in chunks for choice in chunk["choices"] if choice["finish_reason"]]
    assert finishes in (["stop"], ["length"])
    # Asked for, usage comes in a last chunk with no choices.
    assert chunks[-1]["choices"] == []
    assert chunks[-1]["usage"]["prompt_tokens"] > 0


def test_a_killed_server_cuts_its_stream(start_llama: Callable[..., LlamaServer]) -> None:
    model, context = slow_model()
    server = start_llama(model, context=context)
    # Far more tokens than arrive before the kill: the stream cannot end on its own first.
    request = body(stream=True, max_tokens=context - 100, ignore_eos=True)
    received = b""
    with httpx.Client(timeout=TIMEOUT) as client:
        with client.stream("POST", server.chat_url, json=request) as response:
            assert response.status_code == 200
            with pytest.raises(httpx.RemoteProtocolError):
                for piece in response.iter_raw():
                    received += piece
                    if server.running:
                        server.kill()
    assert not server.running
    assert received.startswith(b"data: ")
    assert b"[DONE]" not in received


# -- the recorded bodies (fixtures/wire/llamacpp, written by tests/record_llamacpp.py): no server needed --------

WIRE = Path(__file__).resolve().parent.parent / "fixtures" / "wire"
RECORDED = WIRE / "llamacpp"
RECORDED_PYTHON = WIRE / "llamacpp-python"


def recorded_manifest(directory: Path = RECORDED) -> dict[str, Any]:
    return dict(json.loads((directory / "manifest.json").read_text()))


def recorded(case: str, directory: Path = RECORDED) -> bytes:
    (entry,) = [entry for entry in recorded_manifest(directory)["cases"] if entry["case"] == case]
    return (directory / str(entry["file"])).read_bytes()


def chunks(raw: bytes) -> list[dict[str, Any]]:
    return [json.loads(payload) for payload in sse_payloads(raw) if payload != "[DONE]"]


@pytest.mark.parametrize("directory", [RECORDED, RECORDED_PYTHON], ids=lambda path: path.name)
def test_every_recorded_body_is_in_the_manifest_with_its_exact_size(directory: Path) -> None:
    cases = recorded_manifest(directory)["cases"]
    files = {path.name for path in directory.iterdir() if not path.name.endswith(".expected.json")} - {"manifest.json", "README.md"}
    assert files == {entry["file"] for entry in cases}
    readme = (directory / "README.md").read_text()
    for entry in cases:
        body = (directory / entry["file"]).read_bytes()
        assert len(body) == entry["response"]["bytes"]
        assert f"`{entry['file']}`" in readme, f"{entry['file']} is not described in README.md"
        if "content-length" in entry["response"]["headers"]:
            assert int(entry["response"]["headers"]["content-length"]) == len(body)
            json.loads(body)
        if entry["file"].endswith(".sse"):
            assert entry["response"]["headers"]["content-type"].startswith("text/event-stream")


def test_recorded_a_stream_carries_usage_only_when_asked() -> None:
    assert b'"usage"' not in recorded("stream")
    last = chunks(recorded("stream-include-usage"))[-1]
    assert last["choices"] == [] and last["usage"]["completion_tokens"] > 0


def test_recorded_context_overflow_is_a_400_with_exceed_context_size_error_streamed_or_not() -> None:
    for case in ("context-overflow", "stream-context-overflow"):
        error = json.loads(recorded(case))["error"]
        assert error["code"] == 400 and error["type"] == "exceed_context_size_error"
        assert "exceeds the available context size" in error["message"]


def test_recorded_streamed_tool_call_names_its_call_once() -> None:
    deltas = [call for chunk in chunks(recorded("stream-tool-call")) for choice in chunk["choices"] for call in choice["delta"].get("tool_calls", [])]
    assert [call["function"]["name"] for call in deltas if "name" in call.get("function", {})] == ["read"]
    assert [call["id"] for call in deltas if "id" in call] == [deltas[0]["id"]]
    arguments = json.loads("".join(call["function"].get("arguments", "") for call in deltas))
    assert isinstance(arguments["path"], str)


def test_recorded_cut_streams_end_without_a_finish_or_done() -> None:
    for case in ("stream-killed", "stream-terminated"):
        raw = recorded(case)
        assert b"[DONE]" not in raw and b'"finish_reason":"stop"' not in raw and b'"finish_reason":"length"' not in raw
        assert len(chunks(raw)) >= 8


def test_recorded_llamacpp_python_repeats_id_type_and_name_in_every_fragment() -> None:
    raw = recorded("stream-tool-call-forced", RECORDED_PYTHON)
    deltas = [call for chunk in chunks(raw) for choice in chunk["choices"] for call in choice["delta"].get("tool_calls") or []]
    assert len(deltas) > 2
    assert {(call["index"], call["id"], call["type"], call["function"]["name"]) for call in deltas} == {(0, deltas[0]["id"], "function", "read")}
    whole = json.loads(recorded("tool-call-forced", RECORDED_PYTHON))["choices"][0]["message"]["tool_calls"][0]
    assert "".join(call["function"]["arguments"] for call in deltas) == whole["function"]["arguments"]


def test_recorded_llamacpp_python_quirks() -> None:
    assert b"usage" not in recorded("stream-include-usage", RECORDED_PYTHON)  # asked for, never sent
    null = json.loads(recorded("after-tool-content-null", RECORDED_PYTHON))
    assert null["error"]["type"] == "internal_server_error" and "'input': None" in null["error"]["message"]
    assert json.loads(recorded("after-tool-content-empty", RECORDED_PYTHON))["choices"][0]["message"]["content"]
    assert json.loads(recorded("context-overflow", RECORDED_PYTHON))["error"]["code"] == "context_length_exceeded"
    assert recorded("stream-context-overflow", RECORDED_PYTHON) == b""


# -- what tiny-agent makes of each recorded body: NAME.expected.json beside it (regenerate: python tests/test_llama_server.py) --

PROFILE_OF = {RECORDED: "llamacpp", RECORDED_PYTHON: "llama-cpp-python"}


def outcome(directory: Path, entry: dict[str, Any]) -> dict[str, Any]:
    """The seam's reading of a recorded body under its server's profile, and how the agent settles it."""
    import msgspec

    from tiny_agent.agent.recovery import RETRYABLE_STATUSES
    from tiny_agent.agent.settlement import derive, settle_derived
    from tiny_agent.providers.http import raw_response
    from tiny_agent.providers.profiles import BUILTIN_PROFILES
    from tiny_agent.wire.registry import adapter_identity
    from tiny_agent.wire.seam import Accepted

    (profile,) = [profile for profile in BUILTIN_PROFILES if profile.name == PROFILE_OF[directory]]
    response = entry["response"]
    cut = f"broke off: {response['cut']}" if response["cut"] else None
    raw = raw_response(response["status"], response["headers"].get("content-type"), (directory / entry["file"]).read_bytes(), cut, None)
    derivation = derive(raw, adapter_identity(profile.api, profile.adapters))
    seam = derivation.outcome
    shown: dict[str, Any] = (
        {"message": msgspec.to_builtins(seam.message), "stopReason": seam.stop_reason}
        if isinstance(seam, Accepted)
        else {"rejected": seam.reason}
    )
    decided = settle_derived(raw, derivation)
    message = decided.message
    if cut or response["status"] in RETRYABLE_STATUSES:
        settles = "retried while attempts remain; on the last one, stepFailed " + (decided.failure or ("", ""))[0]
    elif decided.failure is not None:
        settles = f"stepFailed {decided.failure[0]}"
    elif message is not None and message.calls:
        settles = f"an assistant entry with {len(message.calls)} tool call(s)"
    elif decided.stop_reason == "length":
        settles = "an assistant entry (cut off); the run fails length_without_calls"
    elif message is not None and not (message.content or "").strip():
        settles = "an assistant entry (empty answer); the run fails empty_answer"
    else:
        settles = "an assistant entry; the run completes"
    return {"status": response["status"], "seam": shown, "settles": settles}


CASES = [(directory, entry) for directory in PROFILE_OF for entry in recorded_manifest(directory)["cases"]]


@pytest.mark.parametrize(("directory", "entry"), CASES, ids=[f"{d.name}/{e['case']}" for d, e in CASES])
def test_every_recorded_body_gives_its_expected_outcome(directory: Path, entry: dict[str, Any]) -> None:
    expected = directory / f"{Path(entry['file']).stem}.expected.json"
    assert json.loads(expected.read_text()) == outcome(directory, entry)


if __name__ == "__main__":
    for folder, case in CASES:
        text = json.dumps(outcome(folder, case), indent=2, ensure_ascii=False) + "\n"
        (folder / f"{Path(case['file']).stem}.expected.json").write_text(text)
