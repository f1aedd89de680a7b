"""Where sessions live, bottom first: ``failpoints``; ``files.disk`` (journal files); ``journal`` (reading, and the one
writer of a session); ``listing`` (what every store lists); ``base`` (the Store seam, stores chosen by URL scheme);
``digests`` (proofs that a checkpoint still describes a journal); ``checkpoints``;
the stores ``files/`` and ``postgres/`` (``schema``, ``database``, ``checkpoints``, ``store``).
Imports only errors, journal/, fold/ and (for a response's reported cost) wire/ from outside."""
