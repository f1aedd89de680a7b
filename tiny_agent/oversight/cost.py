"""What tokens cost, from the user's per-model prices (``[models."NAME"]`` in the config file).

A price is never guessed: a component (input, output, cache read, cache
write) that has tokens but no price leaves the cost *partial*, and the
missing components are named so a page can say what to add to the config.

Pure.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import TYPE_CHECKING, Final

import msgspec

from tiny_agent.journal.transcript import Usage

if TYPE_CHECKING:
    from tiny_agent.providers.userconfig import ModelSettings

PER: Final = 1_000_000
"""Prices are USD per million tokens."""


class Cost(msgspec.Struct, frozen=True):
    """USD for the tokens whose price is known, and what had tokens but no price."""

    amount: float = 0.0
    missing: tuple[str, ...] = ()
    """``model: component`` for each component that had tokens and no price (then ``amount`` is partial)."""

    @property
    def known(self) -> bool:
        return not self.missing

    @property
    def priced(self) -> bool:
        """Whether any part of it had a price (a partial cost still says something)."""
        return self.amount > 0 or self.known

    def __add__(self, other: Cost) -> Cost:
        missing = tuple(dict.fromkeys((*self.missing, *other.missing)))
        return Cost(amount=self.amount + other.amount, missing=missing)


FREE: Final = Cost()


def price(usage: Usage, model: str, prices: Mapping[str, ModelSettings]) -> Cost:
    """The cost of ``usage`` on ``model``; components with tokens and no price are named, not guessed."""
    settings = prices.get(model)
    parts = (
        ("input", usage.input, None if settings is None else settings.input),
        ("output", usage.output, None if settings is None else settings.output),
        ("cache_read", usage.cacheRead, None if settings is None else settings.cache_read),
        ("cache_write", usage.cacheWrite, None if settings is None else settings.cache_write),
    )
    amount = 0.0
    missing: list[str] = []
    for component, tokens, rate in parts:
        if not tokens:
            continue
        if rate is None:
            missing.append(f"{model}: {component}")
            continue
        amount += tokens * rate / PER
    return Cost(amount=amount, missing=tuple(missing))


def total(costs: Iterable[Cost]) -> Cost:
    result = FREE
    for cost in costs:
        result = result + cost
    return result


def unpriced(cost: Cost) -> str:
    """The missing prices grouped by model: ``test/model (input, output, cache_read)``."""
    by_model: dict[str, list[str]] = {}
    for item in cost.missing:
        model, _, component = item.rpartition(": ")
        by_model.setdefault(model, []).append(component)
    return "; ".join(f"{model} ({', '.join(components)})" for model, components in by_model.items())


def unpriced_models(cost: Cost) -> list[str]:
    return list(dict.fromkeys(item.rpartition(": ")[0] for item in cost.missing))


def money(cost: Cost) -> str:
    """``$0.001234``, ``≥ $0.0012 (partial)`` or ``n/a``."""
    if cost.known:
        return dollars(cost.amount)
    if cost.amount > 0:
        return f"≥ {dollars(cost.amount)} (partial)"
    return "n/a"


def dollars(amount: float) -> str:
    if amount == 0:
        return "$0"
    if amount >= 1:
        return f"${amount:,.2f}"
    return f"${amount:.6f}".rstrip("0")
