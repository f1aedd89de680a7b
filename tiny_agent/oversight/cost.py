"""What tokens cost: the figure the provider reported, else the user's prices (``[models."NAME"]``), never guessed: a
component with tokens and no price makes the cost *partial*, named; no figure at all is ``n/a`` (docs/view.md, *Costs and
prices*).  Pure."""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import TYPE_CHECKING, Final

import msgspec

from tiny_agent.journal.transcript import Usage

if TYPE_CHECKING:
    from tiny_agent.oversight.audit import AttemptAudit
    from tiny_agent.providers.userconfig import ModelSettings

PER: Final = 1_000_000
"""Prices are USD per million tokens."""
COMPONENTS: Final = ("input", "output", "cache_read", "cache_write")
SOURCES: Final = {"provider": "as the provider reported it", "prices": "from your prices"}


class Cost(msgspec.Struct, frozen=True):
    """USD where a figure is known, where the figures came from, and what had tokens but no price."""

    amount: float = 0.0
    missing: tuple[str, ...] = ()
    """``model: component`` for each component that had tokens and no price (then ``amount`` is partial)."""
    sources: tuple[str, ...] = ()
    """``provider`` (its own figure) and/or ``prices`` (the config's); none: there is no figure at all."""

    @property
    def known(self) -> bool:
        """A figure covers every token (an empty cost has no figure: see :attr:`sources`)."""
        return not self.missing

    def __add__(self, other: Cost) -> Cost:
        missing = tuple(dict.fromkeys((*self.missing, *other.missing)))
        return Cost(self.amount + other.amount, missing, tuple(sorted({*self.sources, *other.sources})))


def price(usage: Usage, model: str, prices: Mapping[str, ModelSettings]) -> Cost:
    """The cost of ``usage`` on ``model`` from the user's prices; components with tokens and no price are named."""
    settings = prices.get(model)
    tokens = (usage.input, usage.output, usage.cacheRead, usage.cacheWrite)
    rates = [None] * 4 if settings is None else [settings.input, settings.output, settings.cache_read, settings.cache_write]
    amount = 0.0
    missing: list[str] = []
    for component, count, rate in zip(COMPONENTS, tokens, rates, strict=True):
        if count and rate is None:
            missing.append(f"{model}: {component}")
        elif count and rate is not None:
            amount += count * rate / PER
    return Cost(amount, tuple(missing), () if settings is None else ("prices",))


def attempt_cost(attempt: AttemptAudit, prices: Mapping[str, ModelSettings]) -> Cost:
    """One attempt's cost: the figure its response reported, else its usage at the user's prices."""
    response = attempt.response
    if response is not None and response.cost is not None:
        return Cost(response.cost, sources=("provider",))
    return Cost() if attempt.usage is None else price(attempt.usage, attempt.model, prices)  # not reported: never priced


def total(costs: Iterable[Cost]) -> Cost:
    return sum(costs, Cost())


def unpriced(cost: Cost) -> str:
    """The missing prices grouped by model: ``test/model (input, output, cache_read)``."""
    by_model: dict[str, list[str]] = {}
    for item in cost.missing:
        model, _, component = item.rpartition(": ")
        by_model.setdefault(model, []).append(component)
    return "; ".join(f"{model} ({', '.join(components)})" for model, components in by_model.items())


def money(cost: Cost) -> str:
    """``$0.001234``, ``≥ $0.0012 (partial)``, or ``n/a`` when there is no figure at all."""
    if not cost.sources:
        return "n/a"
    return dollars(cost.amount) if cost.known else f"≥ {dollars(cost.amount)} (partial)"


def cost_text(cost: Cost) -> str:
    """:func:`money` and where the figure came from: ``$0.000676 as the provider reported it``, or ``n/a``."""
    return f"{money(cost)} {source(cost)}".rstrip()


def source(cost: Cost) -> str:
    """``as the provider reported it``, ``from your prices``, both joined by ``and``, or nothing."""
    return " and ".join(SOURCES[name] for name in SOURCES if name in cost.sources)


def dollars(amount: float) -> str:
    if amount == 0:
        return "$0"
    if amount >= 1:
        return f"${amount:,.2f}"
    return f"${amount:.6f}".rstrip("0") if amount >= 0.000001 else "< $0.000001"
