"""Any OpenAI-compatible server: /v1/models is all it is known to have (the base adapter's poll)."""

from __future__ import annotations

from poolconsole.collect.engines.kinds.base import EngineAdapter
from poolconsole.config.models import EngineKind


class OpenaiAdapter(EngineAdapter):
    kind = EngineKind.OPENAI
    title = "OpenAI-compatible server"
    scrape_note = "a generic OpenAI-compatible server has no known /metrics"
    no_metrics = "a generic OpenAI-compatible server exposes no metrics"


ADAPTER = OpenaiAdapter()
