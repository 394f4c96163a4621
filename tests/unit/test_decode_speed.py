"""The decode speed of one streamed answer. On a loaded machine (or from a fast engine) every token of an
answer can arrive in one read, stamped with one time: no span to time. llama.cpp's context probe had then
reported no per-stream speed though 32 tokens came (seeds 6 and 22 of 24 on this machine, idle). The engine's
own figure is taken where it gives one; without it the speed is unknown, never a division by zero."""

from __future__ import annotations

import json
from pathlib import Path

from poolconsole.ops.smoke.stream import StreamResult

SSE = Path(__file__).resolve().parents[1] / "fixtures/real/llamacpp-b1-0c1e570/v1-chat-completions-stream-usage.sse"


def last_event() -> dict[str, object]:
    events = [line[6:] for line in SSE.read_text().splitlines() if line.startswith("data: {")]
    found = json.loads(events[-1])
    assert isinstance(found, dict)
    return found


def test_a_timed_span_gives_the_clients_figure() -> None:
    r = StreamResult(True, None, 0.0, token_times=[1.0, 1.5, 2.0], usage_tokens=3, last_event=last_event())
    assert r.decode_tps == 2.0


def test_tokens_in_one_read_take_the_engines_own_figure() -> None:
    event = last_event()
    r = StreamResult(True, None, 0.0, token_times=[1.0] * 4, usage_tokens=4, last_event=event)
    assert r.decode_tps == event["timings"]["predicted_per_second"] == 12605.042016806725  # type: ignore[index]


def test_without_the_engines_figure_it_is_unknown() -> None:
    r = StreamResult(True, None, 0.0, token_times=[1.0] * 4, usage_tokens=4, last_event={"usage": {}})
    assert r.decode_tps is None
    assert StreamResult(True, None, 0.0, token_times=[1.0], usage_tokens=1, last_event=last_event()).decode_tps is None
