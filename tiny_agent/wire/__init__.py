"""The wire APIs tiny-agent speaks, one module each: how a request is built from the canonical
transcript, and how a response (whole or streamed) becomes one canonical assistant message.

- :mod:`tiny_agent.wire.sse` — Server-Sent Events framing, shared by every streamed API;
- :mod:`tiny_agent.wire.chat.stream` — Chat Completions chunks reassembled into one body;
- :mod:`tiny_agent.wire.anthropic` — Anthropic Messages;
- :mod:`tiny_agent.wire.responses` — OpenAI Responses.

The Chat Completions seam itself is :mod:`tiny_agent.wire.chat.seam`.

Everything in this package is pure: bytes and values in, values out, no I/O.
"""
