"""Ollama: no /metrics; /api/ps (the models in memory, and until when), /api/tags (the models on disk),
/api/version. No keys: only its bind address keeps callers out."""

from __future__ import annotations

from typing import TYPE_CHECKING

from poolconsole.collect.engines import jsonparse
from poolconsole.collect.engines.kinds.base import Capability, EngineAdapter
from poolconsole.collect.engines.scratch import Scratch
from poolconsole.collect.prom import ParseError
from poolconsole.config.models import EngineKind
from poolconsole.model.snapshots import EngineState

if TYPE_CHECKING:
    from poolconsole.collect.engines.poll import EnginePoller


class OllamaAdapter(EngineAdapter):
    kind = EngineKind.OLLAMA
    title = "Ollama"
    log_patterns = (
        "metal_out_of_memory",
        "llamacpp_buffer_alloc",
        "ollama_system_memory",
        "gb10_nv_err_no_memory",
        "cuda_out_of_memory",
    )
    capabilities = Capability.RESIDENCY
    health_path = "/api/version"
    version_path = "/api/version"
    scrape_note = "Ollama has no /metrics endpoint"
    bind_fix = "OLLAMA_HOST=127.0.0.1:{port} (or the tailnet address)"
    key_fix = (
        "Ollama has no keys: bind it to loopback or the tailnet address and let callers in only through the gateway"
    )

    async def poll(self, poller: EnginePoller, poll: Scratch) -> None:
        paths = ["/api/ps", "/api/tags"] + (["/api/version"] if poller.version is None else [])
        got = await poller.gather(paths, poller.headers(poll))
        ps = got["/api/ps"]
        if not ps.ok:
            poll.worse(poller.failed(ps), f"/api/ps: {ps.error}")
        else:
            try:
                poll.ollama = jsonparse.parse_ollama_ps(ps.body)
                poll.answered(ps, "/api/ps")
                poll.residency_read = True
            except ParseError as exc:
                poll.worse(EngineState.DEGRADED, str(exc))
        tags = got["/api/tags"]
        if tags.ok:
            try:
                poll.models = jsonparse.parse_ollama_tags(tags.body)
                poll.answered(tags, "/api/tags")
            except ParseError as exc:
                poll.worse(EngineState.DEGRADED, str(exc))
        else:
            poll.worse(poller.failed(tags), f"/api/tags: {tags.error}")
        if "/api/version" in got and got["/api/version"].ok:
            poller.version = self.version_of(got["/api/version"]) or poller.version
        offloaded = [m.name for m in poll.ollama if m.partial_offload]
        if offloaded:
            poll.extra["partial_offload"] = offloaded
        poll.all_missing("Ollama has no metrics endpoint")


ADAPTER = OllamaAdapter()
