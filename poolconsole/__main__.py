"""The `poolconsole` command (and `python -m poolconsole`): start-up with the cyclic collector paused.

Start-up makes about 100,000 tracked objects (modules, classes, the config, Textual's widgets), nearly all of
which live as long as the process. With the collector's default thresholds about 150 collections ran during
the imports alone, young ones mostly (60-65 ms of wall time by gc.callbacks on the 2-core build machine,
3.3 % of the imports' instructions under callgrind). It stays paused until the command's own work begins:
the console's runtime freezes what start-up made and sets its long-running policy as its loops start
(runtime.live.GcPolicy.start), and `cli.main` resumes it before any other command.

Pydantic looks for plugins (a scan of every installed distribution's entry points, about 10 ms) when it
first builds a validator; the config's models have no use for one, so the command turns the lookup off
unless PYDANTIC_DISABLE_PLUGINS is set already.
"""

from __future__ import annotations

import gc
import os


def main() -> int:
    gc.disable()
    os.environ.setdefault("PYDANTIC_DISABLE_PLUGINS", "__all__")
    from poolconsole.cli import main as run

    return run()


if __name__ == "__main__":
    raise SystemExit(main())
