"""The fold: journal lines in, session state out, failing closed on the first broken rule.

Pure and deterministic: no I/O, no clock, no globals.  From the bottom up:

- ``contract``: the member sets (derived from the fact Structs), enumerations and one-rule checks;
- ``version``: what the header's version changes (v2 / v3 profiles);
- ``typed``: the fast path's shapes of a line, derived from the fact Structs;
- ``books``: the fold's bookkeeping, one object a snapshot stores whole;
- ``core``: what the rules work over (the state, the books, the line being folded);
- ``transcript_rules``: what a message is (§7) and the role rule (§12);
- ``messages``, ``tools``, ``steps``, ``operations``, ``compaction``, ``usage``: each kind's
  rules, every reference rule next to its fast twin where one pays;
- ``fold``: :class:`Fold`, lines, the header, the envelope and the dispatch to the rules;
- ``lines``: chunks to lines (``reduce_chunks``), and the whole-file audit after a failure;
- ``snapshot``: a fold as plain data and back (what a checkpoint stores).
"""

from tiny_agent.fold.fold import Fold
from tiny_agent.fold.lines import reduce_bytes, reduce_chunks

__all__ = ["Fold", "reduce_bytes", "reduce_chunks"]
