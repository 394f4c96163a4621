"""I/O (HTTP, SSH) and pure parsers from bytes to immutable snapshots. Never imports Textual."""
