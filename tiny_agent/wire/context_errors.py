"""Context-length errors: how each provider says the prompt does not fit, in one table (docs/provider.md lists it
and the rule).  Pure: no I/O.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any, Final

import msgspec

from tiny_agent.journal.json_profile import LineDecoder, ProfileViolation


class ContextError(msgspec.Struct, frozen=True):
    provider: str
    statuses: tuple[int, ...]
    """The HTTP statuses it comes with (200: inside a stream that had already begun)."""
    codes: tuple[str, ...]
    """Values of the error object's ``code`` or ``type`` that say it, whatever the message."""
    phrases: tuple[str, ...]
    """Lower-case parts of the error message that say it (for providers without a dedicated code)."""


CONTEXT_ERRORS: Final = (
    ContextError("OpenAI", (400, 200), ("context_length_exceeded",), ("maximum context length", "exceeds the context window")),
    ContextError("Anthropic", (400,), (), ("prompt is too long", "exceed context limit")),
    ContextError(
        "llama.cpp",
        (400,),
        ("exceed_context_size_error",),
        ("exceeds the available context size", "larger than the max context size"),
    ),
    ContextError("llama-cpp-python", (400,), ("context_length_exceeded",), ("maximum context length",)),
    ContextError("vLLM", (400,), (), ("maximum context length",)),
    ContextError("Ollama", (), (), ()),
    ContextError("Mistral", (400,), (), ("maximum context length",)),
    ContextError("Groq", (400,), ("context_length_exceeded",), ()),
    ContextError("OpenRouter", (400,), (), ("maximum context length",)),
)
"""Ollama's OpenAI-compatible endpoint sends none: it cuts the prompt to ``num_ctx`` and answers 200."""


def context_error(
    status: int, body: Any, text: str = "", table: tuple[ContextError, ...] = CONTEXT_ERRORS
) -> ContextError | None:
    """The first row a response matches, from its decoded ``body`` (or, when it was not JSON, its ``text``)."""
    rows = [row for row in table if status in row.statuses]
    if body is None:
        lowered = text.lower()
        return next((row for row in rows if any(phrase in lowered for phrase in row.phrases)), None)
    for error in _error_objects(body, 0):
        labels = {label for label in (error.get("code"), error.get("type")) if type(label) is str}
        message = error["message"].lower()
        for row in rows:
            if labels.intersection(row.codes) or any(phrase in message for phrase in row.phrases):
                return row
    return None


def _error_objects(body: Any, depth: int) -> Iterator[dict[str, Any]]:
    if type(body) is not dict or depth > 2:
        return
    for candidate in (body.get("error"), body):
        if type(candidate) is dict and type(candidate.get("message")) is str:
            yield candidate
            metadata = candidate.get("metadata")
            raw = metadata.get("raw") if type(metadata) is dict else None
            if type(raw) is str:
                try:
                    yield from _error_objects(LineDecoder().decode(raw.encode("utf-8", "surrogatepass")), depth + 1)
                except ProfileViolation:
                    pass
