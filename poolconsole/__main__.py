"""The `poolconsole` command (and `python -m poolconsole`): start-up with the cyclic collector paused.

Start-up makes about a million objects (modules, classes, the config, Textual's widgets), nearly all of which
live as long as the process. With the collector's default thresholds it walked them about 150 times before
the console's first frame (60-65 ms of a 0.6-0.7 s start on the 2-core build machine). It stays paused until
the command's own work begins: the console's runtime freezes what start-up made and sets its long-running
policy as its loops start (runtime.live.GcPolicy.start), and `cli.main` resumes it before any other command.
"""

from __future__ import annotations

import gc


def main() -> int:
    gc.disable()
    from poolconsole.cli import main as run

    return run()


if __name__ == "__main__":
    raise SystemExit(main())
