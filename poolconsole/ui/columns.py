"""The table's columns and rows, apart from the widget that draws them (ui/grid.py): which columns fit a
width, a row's cells and their styled segments, built once per change."""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field

from rich.console import Console
from rich.segment import Segment
from rich.style import Style
from rich.text import Text
from textual.strip import Strip

PAD = 1  # blank cells either side of a column's content


@dataclass(frozen=True)
class Column:
    key: str
    label: str
    width: int
    """Content width; the column takes width + its grid's padding."""
    ellipsis: bool = False
    """Text longer than the width ends in "…" (prose); otherwise it is cropped."""


@dataclass(frozen=True)
class ColumnSpec:
    """A column that fits its width to the screen: `fit_columns` folds or widens it."""

    key: str
    label: str
    min: int
    max: int
    """Widest it grows before the spare width goes on; `grow` columns take what is left after all."""
    fold: int | None = None
    """Fold order when the screen is too narrow (1 folds first); None: never folds."""
    grow: bool = False
    ellipsis: bool = False
    short: str | None = None
    """The label when the column is narrower than `label`."""


def fit_columns(specs: Sequence[ColumnSpec], width: int, pad: int, widen: Sequence[str] = ()) -> list[Column]:
    """The columns that fit `width` cells (each column costs its width + `pad`): every column at its
    minimum, folding in fold order until they fit, then the spare width to the columns named in `widen`
    (in that order, each up to its max), and what is left after that to the `grow` columns. A column
    that never folds stays, even when the screen is narrower than it."""
    shown = list(specs)
    folding = sorted((s for s in specs if s.fold is not None), key=lambda s: s.fold or 0)
    while sum(s.min + pad for s in shown) > width and folding:
        shown.remove(folding.pop(0))
    widths = {s.key: s.min for s in shown}
    spare = width - sum(s.min + pad for s in shown)
    by_key = {s.key: s for s in shown}
    for key in widen:
        if spare <= 0:
            break
        if key in by_key:
            add = min(spare, by_key[key].max - widths[key])
            widths[key] += max(0, add)
            spare -= max(0, add)
    growing = [s for s in shown if s.grow]
    for index, s in enumerate(growing):
        add = spare // (len(growing) - index) if spare > 0 else 0
        widths[s.key] += add
        spare -= add

    def label(s: ColumnSpec) -> str:
        return s.short if s.short is not None and len(s.label) > widths[s.key] else s.label

    return [Column(s.key, label(s), widths[s.key], s.ellipsis) for s in shown]


@dataclass
class Row:
    cells: list[Text]
    span: bool = False
    """One line across every column (a host line over its engines): `cells` holds that one Text."""
    styled: dict[int, list[list[Segment] | None]] = field(default_factory=dict)
    """Per style variant (odd, even, cursor), each cell's segments in that style; None: not built yet.
    Built when first drawn, so rows scrolled out of sight cost nothing but their Text."""
    strips: dict[tuple[int, int, int], Strip] = field(default_factory=dict)
    """Built strips by (style variant, scroll x, width); emptied when a cell changes."""

    def change(self, index: int, text: Text) -> None:
        self.cells[index] = text
        for cells in self.styled.values():
            cells[index] = None
        self.strips.clear()


def cell_segments(
    text: Text,
    width: int,
    console: Console,
    column: Style,
    pad: tuple[int, int] = (PAD, PAD),
    ellipsis: bool = False,
) -> list[Segment]:
    """A cell's content cut or padded to `width`, with its padding (left, right), in its own styles.
    `column` (meta naming the column) keeps neighbouring cells apart in exported screenshots, whose SVG
    would otherwise run same-styled cells together into one stretched text run."""
    if text.cell_len > width:
        text = text.copy()
        text.truncate(width, overflow="ellipsis" if ellipsis else "crop")
    rendered: Iterable[Segment] = text.render(console)
    if text.style:  # Text.render leaves the text's own style out when it has no spans
        rendered = Segment.apply_style(rendered, console.get_style(text.style))
    segments = [Segment(" " * pad[0]), *rendered, Segment(" " * (width - text.cell_len + pad[1]))]
    return list(Segment.apply_style(segments, column))
