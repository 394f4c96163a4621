"""The one default TLS context: loading the CA store costs ~40 ms, so every client shares it."""

from __future__ import annotations

import functools
import ssl


@functools.cache
def default_tls() -> ssl.SSLContext:
    return ssl.create_default_context()
