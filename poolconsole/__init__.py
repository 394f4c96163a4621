"""poolconsole: a terminal console for a self-hosted, heterogeneous GPU inference pool."""

__version__ = "0.1.0"
