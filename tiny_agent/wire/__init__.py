"""The wire APIs: how a request is built from the canonical transcript, and how a response (whole or
streamed) becomes one canonical assistant message.

One subpackage per API (:mod:`.chat`, :mod:`.anthropic`, :mod:`.responses`), each declaring one
:class:`~tiny_agent.wire.seam.WireApi`; :mod:`.registry` lists them.  Shared: :mod:`.seam` (the
protocol, the outcome types, the seam's tools), :mod:`.sse` (event-stream framing) and :mod:`.request`.

Everything in this package is pure (bytes and values in, values out) and imports only journal/ and errors.
"""
