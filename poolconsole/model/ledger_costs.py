"""The ledger's money and its decision: the API-equivalent value of the output tokens, the energy and idle
burn in the currency, depreciation and payback, and seed 002's pragmatic decision line (the median day's
output tokens against the threshold, after DECISION_DAYS days of data)."""

from __future__ import annotations

import statistics
from typing import Any

from poolconsole.config.models import LedgerSettings
from poolconsole.model.ledger import GATEWAY_KINDS, Day, short

DECISION_DAYS = 14
"""The seed's two weeks: with fewer days of data the ledger does not decide."""


def price_of(day: Day, settings: LedgerSettings) -> float | None:
    """The API-equivalent price per million output tokens: by engine name, else by its first priced model,
    else "*"."""
    prices = settings.api_price_per_mtok
    if day.engine in prices:
        return prices[day.engine]
    for model in day.models:
        if model in prices:
            return prices[model]
    return prices.get("*")


def pool_per_day(days: list[Day]) -> dict[str, int]:
    """Output tokens of the whole pool per date (gateways left out), for the dates with a reading."""
    out: dict[str, int] = {}
    for day in days:
        if day.kind in GATEWAY_KINDS or day.output_tokens is None:
            continue
        out[day.date] = out.get(day.date, 0) + day.output_tokens
    return out


def decide(days: list[Day], settings: LedgerSettings) -> dict[str, Any]:
    """The median day's output tokens against the threshold; no verdict with under DECISION_DAYS days."""
    per_day = pool_per_day(days)
    threshold = settings.threshold_output_tokens_per_day
    line = f"threshold {short(threshold)}"
    if not per_day:
        return {
            "output_tokens_per_day": None,
            "days_of_data": 0,
            "threshold": threshold,
            "pays_off": None,
            "reason": f"no output tokens recorded yet ({line}): too early to decide",
        }
    median = statistics.median(per_day.values())
    count = len(per_day)
    days_text = f"{count} day{'s' if count != 1 else ''}"
    pays: bool | None
    if count < DECISION_DAYS:
        pays = None
        reason = (
            f"{short(median)} output tokens/day over {days_text} ({line}): only {days_text} of data, under "
            f"{DECISION_DAYS}: too early to decide"
        )
    elif median >= threshold:
        pays = True
        reason = f"{short(median)} output tokens/day over {days_text} ({line}): pooling pays off"
    else:
        pays = False
        reason = (
            f"{short(median)} output tokens/day over {days_text} ({line}): "
            "treat the pool as an on-prem compliance backup"
        )
    return {
        "output_tokens_per_day": round(median),
        "days_of_data": count,
        "threshold": threshold,
        "pays_off": pays,
        "reason": reason,
    }


def costs(days: list[Day], settings: LedgerSettings, unattributed_kwh: float) -> dict[str, Any]:
    """Value produced, energy cost, idle burn, depreciation and payback over the window; each entry gets
    its `value` and `energy_cost` where the prices allow. Amounts are in `settings.currency`."""
    electricity = settings.electricity_per_kwh
    value = energy_cost = 0.0
    priced = False
    kwh = idle_kwh = 0.0
    for day in days:
        if day.kind in GATEWAY_KINDS:
            continue
        price = price_of(day, settings)
        if price is not None and day.output_tokens is not None:
            day.value = day.output_tokens / 1e6 * price
            value += day.value
            priced = True
        if day.energy_kwh is not None:
            kwh += day.energy_kwh
            idle_kwh += day.idle_energy_kwh or 0.0
            if electricity is not None:
                day.energy_cost = day.energy_kwh * settings.pue * electricity
                energy_cost += day.energy_cost
    wall_kwh = (kwh + unattributed_kwh) * settings.pue
    if electricity is not None:
        energy_cost += unattributed_kwh * settings.pue * electricity
    count = len({d.date for d in days}) or 1
    depreciation = (
        settings.hardware_cost / (settings.hardware_lifetime_years * 365.25) if settings.hardware_cost else None
    )
    doc: dict[str, Any] = {
        "currency": settings.currency,
        "gpu_energy_kwh": round(kwh + unattributed_kwh, 6),
        "unattributed_energy_kwh": round(unattributed_kwh, 6),
        "wall_energy_kwh": round(wall_kwh, 6),
        "idle_energy_kwh": round(idle_kwh, 6),
        "value": round(value, 4) if priced else None,
        "energy_cost": round(energy_cost, 4) if electricity is not None else None,
        "idle_cost": round(idle_kwh * settings.pue * electricity, 4) if electricity is not None else None,
        "depreciation_per_day": round(depreciation, 4) if depreciation is not None else None,
        "net_per_day": None,
        "payback_days": None,
        "unknown": {},
    }
    unknown: dict[str, str] = doc["unknown"]
    if not priced:
        unknown["value"] = "no api_price_per_mtok in [ledger] for these engines' models"
    if electricity is None:
        unknown["energy_cost"] = unknown["idle_cost"] = "no electricity_per_kwh in [ledger]"
    if depreciation is None:
        unknown["depreciation_per_day"] = unknown["payback_days"] = "no hardware_cost in [ledger]"
    if not priced:
        unknown["net_per_day"] = "no value without api_price_per_mtok"
    if priced:
        margin = (value - (energy_cost if electricity is not None else 0.0)) / count
        doc["net_per_day"] = round(margin - (depreciation or 0.0), 4)
        if settings.hardware_cost:
            if margin > 0:
                doc["payback_days"] = round(settings.hardware_cost / margin, 1)
            else:
                unknown["payback_days"] = "never at this rate: the energy costs more than the tokens are worth"
    elif settings.hardware_cost:
        unknown["payback_days"] = unknown["value"]
    return doc
