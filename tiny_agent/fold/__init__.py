"""The fold: journal lines in, session state out, failing closed on the first broken rule.

Pure and deterministic: no I/O, no clock, no globals.  One module per concept:

- ``contract``: the member sets (derived from the fact Structs), enumerations and one-rule checks;
- ``version``: what the header's version changes (v2 / v3 profiles);
- ``books``: the fold's bookkeeping (attempts, operations, configurations);
- ``core``: lines, the header, the fact envelope, the seal chain, the ID namespace, dispatch;
- ``transcript_rules``: what a message is (§7) and the role rule (§12);
- ``messages``, ``tools``, ``steps``, ``operations``, ``compaction``, ``usage``, ``sealing``:
  each kind's rules, every reference rule next to its fast twin;
- ``fold``: the composed :class:`Fold`;
- ``lines``: chunks to lines (``reduce_chunks``), and the whole-file audit after a failure.

:mod:`tiny_agent.reducer` is the stable facade other modules import from.
"""

from tiny_agent.fold.fold import Fold
from tiny_agent.fold.lines import reduce_bytes, reduce_chunks

__all__ = ["Fold", "reduce_bytes", "reduce_chunks"]
