"""The one default TLS context, and aiohttp imported without the two it builds and this program never uses.

Loading the system CA store is slow with OpenSSL 3 (cpython#95031): 0.25 G instructions a context here,
~40 ms. Every TLS client of this program takes `default_tls()` (the poll client for an https engine, the
smoke client), built on first use, so a pool reached over plain http never loads the store at all.

aiohttp builds two contexts of its own when it is imported (its defaults for `ssl=True` and `ssl=False`),
each loading the store: 0.49 G instructions, 14 % of all the console did before its first frame with data
(benchmarks/first_frame_bench.py). `import_aiohttp` imports it with those two loads skipped; nothing here
passes aiohttp its defaults (the poll client hands every https request `default_tls()` or the engine's own
context), and tests/integration/test_poll_client.py checks an https GET is verified against the system
store after this import."""

from __future__ import annotations

import ssl
import threading

_default: ssl.SSLContext | None = None
_loading = threading.Lock()


def default_tls() -> ssl.SSLContext:
    """The system's CA store in one context, loaded once: the engines' first https GETs call this from
    threads at the same time, and each would otherwise load the store again (6 loads for 16 callers)."""
    global _default
    with _loading:
        if _default is None:
            _default = ssl.create_default_context()
        return _default


def _skip_ca_load(context: ssl.SSLContext) -> None:
    """Stands in for SSLContext.set_default_verify_paths while aiohttp is imported."""


def import_aiohttp() -> None:
    """Imports aiohttp (the first time) with its two default contexts built without the system CA store.

    The stand-in is ssl's, process-wide, while the import runs: so only while this is the only thread (the
    console's start-up), else aiohttp is imported as it is. A context another thread built meanwhile would
    trust nothing (it would fail closed, never unverified)."""
    import sys

    if "aiohttp" in sys.modules or "set_default_verify_paths" in vars(ssl.SSLContext) or threading.active_count() > 1:
        return  # already imported, or the method is not ssl's own, or another thread could build a context
    ssl.SSLContext.set_default_verify_paths = _skip_ca_load  # type: ignore[method-assign,assignment]
    try:
        import aiohttp  # noqa: F401
    finally:
        del ssl.SSLContext.set_default_verify_paths  # ssl's own method again (inherited from _ssl._SSLContext)
