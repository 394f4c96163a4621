"""No command: the console on the configured pool, on the pool a Prometheus holds (--prometheus), or on the
demo pool when none is configured."""

from __future__ import annotations

import argparse
from pathlib import Path

from poolconsole.commands import demo, launch
from poolconsole.commands.common import default_config_path, demo_stores_of, discovered
from poolconsole.config import load_config
from poolconsole.config.example import names_example_hosts


def run(args: argparse.Namespace) -> int:
    """No sub-command: the console on the configured pool, or on the demo pool when none is configured."""
    if args.prometheus:  # the pool a Prometheus holds: no control tables, so read-only
        return launch.open_console(discovered(args.prometheus), True, f"discovered from {args.prometheus} (read-only)")
    path = Path(args.config) if args.config else default_config_path()
    if path is None:
        defaults = argparse.Namespace(
            serve_only=False, config_out=None, scenario="normal", nodes=0, seed=1, read_only=args.read_only
        )
        return demo.run(defaults)
    from poolconsole.runtime.store import store_path

    config = load_config(path)  # the history store: [store] path, else the user data dir (not for the demo)
    own = demo_stores_of(str(path), say=False)  # the demo's hosts.toml: its own stores, as `demo` has them
    history = (own[2] if own else store_path(config)) if config.store.record else None
    subtitle = str(path)
    if names_example_hosts(config):  # fictional hosts, all down: nothing worth a row in the user's store
        history, subtitle = None, f"{path}: the example pool's fictional hosts (nothing recorded)"
    return launch.open_console(config, args.read_only, subtitle, store=history, stores=own[:2] if own else None)
