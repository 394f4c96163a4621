"""What an engine says it runs with, read in the order its adapter gives (collect/engines/reported): SGLang's
older /get_server_info only where /server_info is missing, its /v1/models only while the context is unknown;
a kind with nothing to read says so. A plain HTTP server on loopback stands in for the engines."""

from __future__ import annotations

from collections.abc import AsyncIterator

import pytest

from poolconsole.collect.engines.reported import read_reported
from tests.helpers.rawhttp import RawHTTPServer, Reply

MODELS = b'{"data": [{"id": "m", "max_model_len": 8192}]}'


@pytest.fixture
async def server() -> AsyncIterator[RawHTTPServer]:
    srv = await RawHTTPServer().start()
    yield srv
    await srv.stop()


async def test_sglang_reads_the_older_path_and_the_models_list_only_where_needed(server: RawHTTPServer) -> None:
    server.routes = {
        "/get_server_info": Reply.json(b'{"context_length": null, "tp_size": 2}'),
        "/v1/models": Reply.json(MODELS),
    }
    got = await read_reported("sglang", server.url, {})
    assert got["source"] == ["/get_server_info", "/v1/models"] and got["unknown"] is None
    assert (got["max_context"], got["tp_size"]) == (8192, 2)

    server.routes = {
        "/server_info": Reply.json(b'{"context_length": 4096, "tp_size": 1}'),
        "/get_server_info": Reply.json(b'{"context_length": 1, "tp_size": 9}'),
        "/v1/models": Reply.json(MODELS),
    }
    got = await read_reported("sglang", server.url, {})
    assert got["source"] == ["/server_info"] and (got["max_context"], got["tp_size"]) == (4096, 1)


async def test_vllm_reads_its_models_list_always_and_a_kind_without_reads_says_so(server: RawHTTPServer) -> None:
    server.routes = {"/v1/models": Reply.json(MODELS)}
    got = await read_reported("vllm", server.url, {})
    assert got["source"] == ["/v1/models"] and got["max_context"] == 8192
    assert got["unknown"] is None  # /metrics answered 404 first: what was read still counts
    ollama = await read_reported("ollama", server.url, {})
    assert ollama["source"] == [] and ollama["unknown"] == "a ollama engine does not report its configuration"
