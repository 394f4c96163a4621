"""Cutting a host's telemetry stream into samples, whatever the packet boundaries (the real loop over
sshd is tested in tests/integration/test_hosts_ssh.py)."""

from __future__ import annotations

import asyncio
from typing import Any, cast

import pytest

from poolconsole.collect.hosts.stream import SAMPLE, SampleStream


class Pipe:
    def __init__(self, chunks: list[str]) -> None:
        self.chunks = chunks

    async def read(self, n: int) -> str:
        await asyncio.sleep(0)
        return self.chunks.pop(0) if self.chunks else ""


class Process:
    def __init__(self, chunks: list[str]) -> None:
        self.stdout = Pipe(chunks)

    def close(self) -> None:
        pass


FIRST = "gpu0, 10\nMemTotal: 1 kB\n"
STREAMS = [
    (f"{FIRST}{SAMPLE}\ngpu0, 11 (cut off", 1, FIRST),
    (f"{FIRST}{SAMPLE}\ngpu0, 11\n{SAMPLE}\n{SAMPLE}\ngpu0, 12\npartial", 3, ""),
    (f"{FIRST}@@poolconsole-sam", 0, ""),  # a marker line not complete yet is no sample
]


@pytest.mark.parametrize("size", [1, 3, 7, 20, 1000])
@pytest.mark.parametrize(("text", "samples", "latest"), STREAMS)
async def test_samples_whatever_the_chunks(size: int, text: str, samples: int, latest: str) -> None:
    chunks = [text[i : i + size] for i in range(0, len(text), size)]
    stream = SampleStream("batch;", cast(Any, Process(chunks)))
    while await stream.next(stream.count, 1.0) is not None:
        pass
    assert stream.closed and stream.count == samples and stream.latest == latest
    await stream.close()
