"""The history store: every applied poll's normalized values (an engine's `status --json` fields plus its
reset-safe running totals, a host's `status --json` fields; never a raw page, never a prompt or generated
text) for every target, in one embedded SQLite file. The runtime's clients write it (the console, `poolconsole
record`) and read it (`poolconsole export`, replay, the ledger, the console's charts on launch).

One module per job: `files` (the path, the schema, the one-writer lock), `codec` (a poll's bytes), `rollup`
(a minute's polls as one row, a rule per field), `writer` (the buffer, the writer thread, retention),
`reader`, `export` and `charts` (the console's charts filled on launch). The names below are what the rest
of poolconsole imports."""

from poolconsole.runtime.store.charts import StoredHistory, fill_history, read_history
from poolconsole.runtime.store.codec import Codec, Kind, decode, deflate, dumps, inflate, payload, poll_json
from poolconsole.runtime.store.export import EXPORT_FIELDS, export, export_doc, iso, parse_time
from poolconsole.runtime.store.files import StoreBusy, StoreProblem, default_path, store_path
from poolconsole.runtime.store.reader import Reader, Row
from poolconsole.runtime.store.rollup import rollup
from poolconsole.runtime.store.writer import COMMIT_EVERY_S, MAX_PENDING, ROLLUP_S, HeldPolls, Store, record

__all__ = [
    "COMMIT_EVERY_S",
    "EXPORT_FIELDS",
    "MAX_PENDING",
    "ROLLUP_S",
    "Codec",
    "HeldPolls",
    "Kind",
    "Reader",
    "Row",
    "Store",
    "StoreBusy",
    "StoreProblem",
    "StoredHistory",
    "decode",
    "default_path",
    "deflate",
    "dumps",
    "export",
    "export_doc",
    "fill_history",
    "inflate",
    "iso",
    "parse_time",
    "payload",
    "poll_json",
    "read_history",
    "record",
    "rollup",
    "store_path",
]
