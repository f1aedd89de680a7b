"""Providers (docs/provider.md): ``profiles`` (the declarations), ``keys`` (where a key may go), ``endpoint`` (the
resolved endpoint), ``userconfig`` (the config file), ``selection`` (choosing the endpoint), ``http`` (the transport).
Imports only errors, journal/ and wire/ from outside; everything but ``http`` and reading the config file is pure."""
