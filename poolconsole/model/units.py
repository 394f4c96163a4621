"""Numbers as an operator reads them, with one rule for what is not known: "n/a", never 0.

Every layer that prints a value (the console, `status`, `plan`, fit verdicts, host notes) formats it
here, so unknown reads the same everywhere and a value that is not zero never reads as zero."""

from __future__ import annotations

NA = "n/a"


def pct(ratio: float | None, digits: int = 0) -> str:
    """A 0..1 ratio as a percentage; a small non-zero ratio reads "<1%" (KV 0.098 % is not idle)."""
    if ratio is None:
        return NA
    shown = f"{ratio * 100:.{digits}f}"
    if ratio > 0 and float(shown) == 0:
        return f"<{10**-digits:g}%"
    return f"{shown}%"


def num(value: float | None, digits: int = 0, unit: str = "") -> str:
    """A plain number with `digits` decimals, then `unit`; unknown is n/a (no unit)."""
    return NA if value is None else f"{value:.{digits}f}{unit}"


def seconds(value: float | None, digits: int = 1) -> str:
    """A duration: milliseconds under a second ("625ms"), seconds above ("6.7s")."""
    if value is None:
        return NA
    return f"{value * 1000:.0f}ms" if value < 1 else f"{value:.{digits}f}s"


def seconds_pair(first: float | None, second: float | None) -> str:
    """Two durations in one unit, the larger's: "92/132 ms", "0.09/1.21 s", "5.53/10.11 s" (a p50 and a p95;
    "5525.5/10105.2 ms" was cut to "5525.5/101" in a narrow column, read as 101 ms). Unknown ones n/a."""
    known = [v for v in (first, second) if v is not None]
    if not known:
        return f"{NA} / {NA}"
    sep = "/" if len(known) == 2 else " / "  # "n/a/250 ms" read as one figure
    if max(known) < 1:
        return sep.join(NA if v is None else _figure(v * 1000, 0) for v in (first, second)) + " ms"
    return sep.join(NA if v is None else _figure(v, 2) for v in (first, second)) + " s"


def _figure(value: float, digits: int) -> str:
    """`value` with `digits` decimals, or as many more as it takes not to read 0 (4 ms beside 1.3 s: 0.004)."""
    shown = f"{value:.{digits}f}"
    while value > 0 and float(shown) == 0 and digits < 6:
        digits += 1
        shown = f"{value:.{digits}f}"
    return shown


def gib(value: float | None, digits: int = 1, unit: str = "") -> str:
    """Bytes in GiB, followed by `unit`; unknown is n/a (no unit), never 0."""
    return NA if value is None else f"{value / 2**30:.{digits}f}{unit}"
