"""The stalled rule counts prefill progress (issue 37): a long prefill moves the prompt counter while the
generation counter stands still, and is no wedge; when both stand still it fires as before. Read from
real-format pages (vLLM 0.32's and llama.cpp's captures, their counters set per poll) through the parsers
and the engine view, as the watcher reads them."""

from __future__ import annotations

import re

from poolconsole.collect.engines import specs
from poolconsole.collect.engines.mapping import MetricSpec, parse_metrics
from poolconsole.config.models import AlertSettings, EngineKind
from poolconsole.model.alerts import Alerts
from poolconsole.model.snapshots import EngineSnapshot, EngineState
from poolconsole.model.view import engine_view
from tests.conftest import REAL

VLLM = (REAL / "vllm-0.32.0-cpu" / "metrics.load.txt").read_text()
LLAMA = (REAL / "llamacpp-b1-0c1e570" / "metrics-after-requests.txt").read_text()


def _set(page: str, name: str, value: float) -> str:
    """The sample lines of `name` (any labels) set to `value`; the rest of the real page as captured."""
    pattern = re.compile(rf"^({re.escape(name)}(\{{[^}}]*\}})?) \S+$", re.M)
    out, n = pattern.subn(lambda m: f"{m.group(1)} {value}", page)
    assert n >= 1, name
    return out


def vllm(generated: float, prompt: float) -> str:
    page = _set(VLLM, "vllm:generation_tokens_total", generated)
    return _set(page, "vllm:prompt_tokens_total", prompt)


def llama(predicted: float, prompt: float) -> str:
    page = _set(LLAMA, "llamacpp:tokens_predicted_total", predicted)
    page = _set(page, "llamacpp:prompt_tokens_total", prompt)
    return _set(page, "llamacpp:requests_processing", 2)


def stalled(alerts: Alerts, kind: str, spec: MetricSpec, page: str, at: float) -> list[tuple[str, bool]]:
    metrics, _, _ = parse_metrics(page, spec)
    snap = EngineSnapshot(
        "e", EngineKind(kind), "http://x", None, at, at, EngineState.OK, None, "", None, None, (), metrics
    )
    return [(e.rule, e.fired) for e in alerts.engine(engine_view([snap]), at) if e.rule == "stalled"]


def test_a_long_prefill_on_vllm_is_progress_and_a_still_engine_still_stalls() -> None:
    alerts = Alerts(AlertSettings(stall_s=10))
    for t in range(0, 60, 2):  # 8 running, no token generated for 60 s, prompts processed all along
        assert stalled(alerts, "vllm", specs.VLLM, vllm(334, 502 + 4000 * t), t) == [], t
    assert stalled(alerts, "vllm", specs.VLLM, vllm(334, 502 + 4000 * 60), 62) == []
    assert stalled(alerts, "vllm", specs.VLLM, vllm(334, 502 + 4000 * 60), 70) == []
    assert stalled(alerts, "vllm", specs.VLLM, vllm(334, 502 + 4000 * 60), 72) == [("stalled", True)]
    assert stalled(alerts, "vllm", specs.VLLM, vllm(334, 502 + 4000 * 61), 74) == [("stalled", False)]


def test_a_long_prefill_on_llama_cpp_is_progress() -> None:
    alerts = Alerts(AlertSettings(stall_s=5))
    for t in range(0, 30):
        assert stalled(alerts, "llamacpp", specs.LLAMACPP, llama(81, 50 + 512 * t), t) == [], t
    fired = [stalled(alerts, "llamacpp", specs.LLAMACPP, llama(81, 50 + 512 * 29), t) for t in range(30, 36)]
    assert fired[-2:] == [[("stalled", True)], []]
