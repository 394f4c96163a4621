"""The detail panels' lines of fields wrap between fields, never inside one (Rich's word wrap had split
"TTFT mean" / "245ms p50 ..." and "rtt 12.5" / "ms" in the half-width panels), at every width."""

from __future__ import annotations

from rich.console import Console
from rich.text import Text

from poolconsole.ui.fields import SEP, FieldLines, pack

FIELDS = ("tok/s 455.5", "prompt tok/s 164.0", "TTFT mean 245ms p50 175ms p95 242ms (window)", "ITL mean 3ms p95 10ms")


def drawn(renderable: object, width: int) -> list[str]:
    console = Console(width=width, record=True, color_system=None)
    console.print(renderable)
    return [line.rstrip() for line in console.export_text().splitlines()]


def test_every_row_is_whole_fields_at_every_width() -> None:
    widest = max(len(f) for f in FIELDS)
    for width in range(widest, 140):
        rows = drawn(FieldLines([FIELDS]), width)
        assert [f for row in rows for f in row.split(SEP)] == list(FIELDS), (width, rows)
        assert all(len(row) <= width for row in rows)
    assert drawn(FieldLines([FIELDS]), 200) == [SEP.join(FIELDS)]  # one row where it fits


def test_a_field_wider_than_the_panel_wraps_on_its_own_and_text_lines_wrap_as_text() -> None:
    rows = drawn(
        FieldLines([("host tp4", "(tp4-3090.tailnet-example.ts.net)"), "error: connection refused by peer"]), 20
    )
    assert rows[0] == "host tp4" and "".join(rows[1:3]) == "(tp4-3090.tailnet-example.ts.net)"
    assert rows[3:] == ["error: connection", "refused by peer"]


def test_styles_and_plain_text_survive_packing() -> None:
    [row] = pack((Text("qwen", "bold"), "vllm 0.32.0"), 40)
    assert row.plain == "qwen  vllm 0.32.0" and not row.style  # bold is the name's alone
    assert [(span.start, span.end, span.style) for span in row.spans] == [(0, 4, "bold")]
    assert FieldLines([FIELDS, "a sentence"]).plain == SEP.join(FIELDS) + "\na sentence"
