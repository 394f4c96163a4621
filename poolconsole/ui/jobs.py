"""The console's background jobs, started as Textual workers from their function, not from a coroutine made in
advance: a worker cancelled before it starts (an exclusive one replaced at once, one the quit cancels) then
leaves no coroutine that was never awaited, which Python reports as a RuntimeWarning on the terminal."""

from __future__ import annotations

from collections.abc import Callable, Coroutine
from typing import Any

from textual.dom import DOMNode
from textual.worker import Worker


def start(
    node: DOMNode, job: Callable[[], Coroutine[Any, Any, None]], group: str, description: str, exclusive: bool = False
) -> Worker[None]:
    """`job()` in a worker of `group`; its failure is its own (told by the job, never the app's end)."""
    worker: Worker[None] = node.run_worker(
        job, group=group, description=description, exclusive=exclusive, exit_on_error=False
    )
    return worker
