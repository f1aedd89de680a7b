"""The fold: journal lines in, session state out, failing closed on the first broken rule.

Pure and deterministic.  ``contract`` (member sets, enumerations, one-rule checks), ``version``,
``typed`` (the fast path's shapes), ``books`` and ``core`` (what the rules work over), then one
module of rules per concept, each reference rule next to its fast twin; ``fold`` (:class:`Fold`:
lines, header, envelope, dispatch), ``lines`` (chunks to lines), ``snapshot``, and ``spilled`` (a fold that leaves its
messages in the journal, for a reader of the whole transcript).
"""

from tiny_agent.fold.fold import Fold
from tiny_agent.fold.lines import reduce_bytes, reduce_chunks

__all__ = ["Fold", "reduce_bytes", "reduce_chunks"]
