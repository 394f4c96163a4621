"""llama.cpp's progress for the stalled rule (issues 35/37), polled as the watcher polls it: real llama-server
pages (b1-0c1e570) with their counters set per poll, through EnginePoller, engine_view and the rule.

llama-server adds a request's tokens to tokens_predicted_total only when it ends. Without /slots
(`--no-slots`) a long answer therefore moves only n_decode_total (one llama_decode call per step), which
the spec reads as progress_total: a long answer is no wedge, and an engine whose counters all stand still
is one (before, such an engine was never called stalled). A build without n_decode_total and without /slots
cannot be judged: its progress is unknown, with the reason."""

from __future__ import annotations

import re

from poolconsole.collect.engines import specs
from poolconsole.collect.engines.kinds.llamacpp import ADAPTER
from poolconsole.collect.engines.poll import EnginePoller
from poolconsole.collect.http import PollError
from poolconsole.config.models import AlertSettings, Engine, EngineKind
from poolconsole.model.alerts import Alerts
from poolconsole.model.snapshots import EngineState
from poolconsole.model.view import EngineView, engine_view
from poolconsole.runtime.alerts_audit import Page, check
from tests.conftest import REAL
from tests.unit.test_hostile_input import Pages

CAPTURE = REAL / "llamacpp-b1-0c1e570"
PAGE = (CAPTURE / "metrics-after-requests.txt").read_text()
STALL_S = 10


def _set(page: str, name: str, value: float) -> str:
    pattern = re.compile(rf"^{re.escape(name)} \S+$", re.M)
    out, n = pattern.subn(f"{name} {value}", page)
    assert n == 1, name
    return out


def page(decodes: float | None, predicted: float = 81, running: float = 2) -> bytes:
    """The captured page with its generation counter, running requests and llama_decode calls set
    (decodes None: a build without n_decode_total, its HELP and TYPE lines gone too)."""
    text = _set(_set(PAGE, "llamacpp:tokens_predicted_total", predicted), "llamacpp:requests_processing", running)
    if decodes is None:
        text = "\n".join(line for line in text.split("\n") if "llamacpp:n_decode_total" not in line)
    else:
        text = _set(text, "llamacpp:n_decode_total", decodes)
    return text.encode()


class Llama:
    """A llama-server answering from memory: its /metrics page swapped before each poll."""

    def __init__(self, slots: bool) -> None:
        self.routes: dict[str, bytes | PollError] = {
            "/v1/models": (CAPTURE / "v1-models.json").read_bytes(),
            "/props": (CAPTURE / "props.json").read_bytes(),
            "/slots": (CAPTURE / "slots-after-requests.json").read_bytes() if slots else b"",  # b"": 404
        }
        self.poller = EnginePoller(Engine(name="e", kind=EngineKind.LLAMACPP, url="http://e"), Pages(self.routes))

    async def view(self, metrics: bytes) -> EngineView:
        self.routes["/metrics"] = metrics
        return engine_view([await self.poller.poll()])


async def stalled_over(llama: Llama, pages: list[bytes]) -> list[tuple[int, bool, str]]:
    """The stalled rule's events over one poll every 2 s: (second, fired, message)."""
    alerts = Alerts(AlertSettings(stall_s=STALL_S))
    out = []
    for i, metrics in enumerate(pages):
        seen = await llama.view(metrics)
        assert seen.state is EngineState.OK, seen.error
        out += [(2 * i, e.fired, e.message) for e in alerts.engine(seen, 2 * i) if e.rule == "stalled"]
    return out


def test_the_spec_and_the_adapter_name_one_progress_counter() -> None:
    """prometheus-rules' stalled rule and the view read the same counter."""
    assert specs.LLAMACPP.counters["progress_total"] == ("llamacpp:n_decode_total",)
    assert ADAPTER.progress_counter == "llamacpp:n_decode_total"
    assert "progress_total" not in specs.VLLM.counters and "progress_total" not in specs.SGLANG.counters


async def test_without_slots_a_long_answer_moves_n_decode_total_and_is_not_stalled() -> None:
    llama = Llama(slots=False)
    seen = await llama.view(page(decodes=4321))
    assert seen.progress_total == 4321 and "progress_total" not in seen.unknown
    assert seen.generation_tokens_total == 81 and "generation_counted_at_end" not in seen.details
    # two minutes of one answer: tokens_predicted_total stays at 81 until it ends, n_decode_total grows
    assert await stalled_over(Llama(slots=False), [page(decodes=100 + 7 * i) for i in range(60)]) == []


async def test_without_slots_an_engine_whose_counters_all_stand_still_is_stalled() -> None:
    """Two requests running, nothing counted anywhere: it fires after stall_s (before it stood aside for
    good), and clears once n_decode_total moves again."""
    pages = [page(decodes=500)] * 8 + [page(decodes=501)]
    events = await stalled_over(Llama(slots=False), pages)
    assert [(t, fired) for t, fired, _ in events] == [(STALL_S, True), (16, False)]
    assert "2 running and 0 waiting, no token generated, prompt token processed or decoding step" in events[0][2]


async def test_a_reset_of_n_decode_total_counts_as_progress() -> None:
    """A restart sets it back: progress, as for the other counters (the wait starts again)."""
    pages = [page(decodes=500)] * 4 + [page(decodes=3)] * 6
    events = await stalled_over(Llama(slots=False), pages)
    assert [(t, fired) for t, fired, _ in events] == [(8 + STALL_S, True)]


async def test_a_build_without_n_decode_total_is_judged_by_slots_or_not_at_all() -> None:
    """Without /slots its generation counter moves only when a request ends: progress unknown, with the
    reason, and the rule stands aside. With /slots the requests in progress are counted: judged by that."""
    blind = await Llama(slots=False).view(page(decodes=None))
    assert blind.progress_total is None
    assert "without /slots" in blind.unknown["progress_total"]
    assert "not in this llamacpp /metrics page" in blind.unknown["progress_total"]
    assert await stalled_over(Llama(slots=False), [page(decodes=None)] * 30) == []
    counted = await Llama(slots=True).view(page(decodes=None))
    assert counted.progress_total is None and "progress_total" not in counted.unknown
    events = await stalled_over(Llama(slots=True), [page(decodes=None)] * 8)
    assert [(t, fired) for t, fired, _ in events] == [(STALL_S, True)]
    assert "decoding step" not in events[0][2]


async def test_a_negative_n_decode_total_is_unknown_never_a_value() -> None:
    seen = await Llama(slots=False).view(page(decodes=-5))
    assert seen.progress_total is None
    assert seen.unknown["progress_total"].startswith("the engine reported -5: this metric is never negative")


def test_the_false_page_audit_reads_the_progress_counter_too() -> None:
    """runtime.alerts_audit vouches for a stalled page only where the store shows every counter the rule
    reads standing still: a moving n_decode_total (a long answer without /slots) is a finding."""
    page = Page("stalled", "e", 20.0, {"alertname": "stalled", "engine": "e"})
    times = [float(t) for t in range(0, 22, 2)]
    row = {"requests_running": 2.0, "generation_tokens_total": 81.0, "prompt_tokens_total": 50.0}
    still = [{**row, "progress_total": 500.0} for _ in times]
    moving = [{**row, "progress_total": 500.0 + t} for t in times]
    settings = AlertSettings(stall_s=STALL_S)
    assert check(page, still, times, settings, is_host=False) is None
    assert check(page, moving, times, settings, is_host=False) == "its counters stood still only 0.0 s"
