"""A panel's lines of fields ("running 0", "TTFT mean 245ms p50 175ms p95 242ms", "rtt 12.5 ms") that wrap
between fields, never inside one. Rich's word wrap broke them at any space: "TTFT mean" / "245ms p50 ...",
"rtt 12.5" / "ms" in the detail screen's half-width panels. A line given as a tuple is packed into rows of
whole fields, two spaces apart, at the width it is drawn at; a line given as text (a sentence: an error, a
diagnosis) wraps as text does. A field wider than the panel wraps on its own."""

from __future__ import annotations

from collections.abc import Iterator, Sequence

from rich.console import Console, ConsoleOptions
from rich.measure import Measurement
from rich.text import Text

SEP = "  "

Field = Text | str
Line = Text | str | tuple[Field, ...]


def _text(part: Field) -> Text:
    return Text(part) if isinstance(part, str) else part


def pack(fields: Sequence[Field], width: int) -> list[Text]:
    """`fields` in rows no wider than `width` where each fits, whole fields only, SEP apart."""
    rows: list[Text] = []
    row: Text | None = None
    for field in map(_text, fields):
        if row is not None and row.cell_len + len(SEP) + field.cell_len <= width:
            row.append(SEP)
        else:
            if row is not None:
                rows.append(row)
            row = Text()  # a field's own style stays a span of it (a copy would lend it to the whole row)
        row.append_text(field)
    return rows + ([row] if row is not None else [])


class FieldLines:
    """A Rich renderable: `lines`, each a tuple of fields (packed) or a text (wrapped as text)."""

    def __init__(self, lines: Sequence[Line]) -> None:
        self.lines = tuple(lines)

    def _joined(self, line: Line) -> Text:
        return Text(SEP).join(map(_text, line)) if isinstance(line, tuple) else _text(line)

    @property
    def plain(self) -> str:
        """Every line with its fields on one row (what a test or a log reads)."""
        return "\n".join(self._joined(line).plain for line in self.lines)

    def __str__(self) -> str:
        return self.plain

    def __rich_console__(self, console: Console, options: ConsoleOptions) -> Iterator[Text]:
        for line in self.lines:
            if isinstance(line, tuple):
                yield from pack(line, options.max_width)
            else:
                yield _text(line)

    def __rich_measure__(self, console: Console, options: ConsoleOptions) -> Measurement:
        widest_field = max(
            (_text(f).cell_len for line in self.lines if isinstance(line, tuple) for f in line), default=1
        )
        widest_line = max((self._joined(line).cell_len for line in self.lines), default=1)
        return Measurement(min(widest_field, widest_line), widest_line).clamp(max_width=options.max_width)
