"""The wire APIs (docs/architecture.md): one subpackage per API, each declaring one
:class:`~tiny_agent.wire.seam.WireApi` that :mod:`.registry` lists; shared: :mod:`.seam`, :mod:`.sse`, :mod:`.request`.

Pure (bytes and values in, values out); imports only journal/ and errors.
"""
