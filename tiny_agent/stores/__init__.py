"""Where sessions live, bottom first: ``failpoints``; ``files.disk`` (journal files); ``journal`` (reading, and the one
writer of a session); ``listing`` (what every store lists); ``base`` (the Store seam, stores chosen by URL scheme);
``checkpoints``; the stores ``files/`` and ``postgres/``.  Imports only errors, journal/ and fold/ from outside, and
nothing here imports a store but the stores themselves (and the PostgreSQL store the file store, for journal paths)."""
