"""What several commands share: exit codes, where the config and the stores are, the confirmation."""

from __future__ import annotations

import argparse
import os
import re
import sys
from pathlib import Path
from typing import TypeAlias

from poolconsole.config import ConfigError, PoolConfig, load_config

Subparsers: TypeAlias = "argparse._SubParsersAction[argparse.ArgumentParser]"
"""What each command's `add_parser(sub)` adds its parser to."""

EXIT_OK, EXIT_PROBLEM, EXIT_CONFIG = 0, 1, 2
EXIT_READER_GONE = 128 + 13  # SIGPIPE

TIME_VALUE = re.compile(r"^-\d+(\.\d+)?\s*(s|m|min|h|d|w)?$|^-\d*\.\d+$")
"""`--from -10m` is a value, not an option: argparse takes only negative numbers as values (a parser's
`_negative_number_matcher`)."""


def user_config_file() -> Path:
    from platformdirs import user_config_path

    return user_config_path("poolconsole") / "hosts.toml"


def default_config_path() -> Path | None:
    """--config, else $POOLCONSOLE_CONFIG, else hosts.toml in the user config directory
    (~/.config/poolconsole/hosts.toml on Linux). The working directory is not searched: the checkout's
    example hosts.toml is documentation, and a console must not open a pool by where it was started."""
    env = os.environ.get("POOLCONSOLE_CONFIG")
    if env:
        return Path(env)
    candidate = user_config_file()
    return candidate if candidate.is_file() else None


def load(path: str | None) -> PoolConfig:
    chosen = Path(path) if path else default_config_path()
    if chosen is None:
        raise ConfigError("(no config)", [])
    return load_config(chosen)


def discovered(url: str) -> PoolConfig:
    from poolconsole.workflows.discovery import discover_pool

    return discover_pool(url)


def empty(config: PoolConfig, args: argparse.Namespace, doing: str) -> bool:
    """A config with no target: said in words naming the file (the command then exits 2)."""
    if config.engines or config.hosts:
        return False
    source = args.config or getattr(args, "file", None) or default_config_path()
    print(
        f"poolconsole {args.command}: nothing to {doing}: {source} has no [[engines]] and no [[hosts]]", file=sys.stderr
    )
    return True


def confirm(yes: bool) -> int | None:
    """None to go on: --yes, or 'y' at the terminal's prompt. Else the exit code: 2 where there is no terminal
    to ask (a script that forgot --yes), 1 where the operator said no; either way nothing changed."""
    if yes:
        return None
    if not sys.stdin.isatty():
        print("not confirmed: add --yes (there is no terminal to ask); nothing changed", file=sys.stderr)
        return EXIT_CONFIG
    try:
        answer = input("proceed? [y/N] ")
    except EOFError:
        answer = ""
    if answer.strip().lower() in ("y", "yes"):
        return None
    print("not confirmed: nothing changed", file=sys.stderr)
    return EXIT_PROBLEM


def audit_read(args: argparse.Namespace, demo: tuple[Path, Path, Path] | None, *, writes: bool) -> Path:
    """The audit log a command takes the promoted profiles from: --audit-db, else the demo's beside its
    hosts.toml, else the user's. A --audit-db is checked now, naming it: where the command `writes` (actions,
    smoke --ab) it must be usable or creatable, before anything runs; where it only reads, a --audit-db must
    exist (a typo is not an empty log)."""
    from poolconsole.workflows import audit_log, stores

    path = Path(args.audit_db) if args.audit_db else demo[0] if demo else audit_log.default_path()
    if writes:
        stores.require_audit_writable(path)
    elif args.audit_db and not path.exists():
        raise stores.StoreUnusable(f"no audit log at {path}")
    return path


def stores_read(args: argparse.Namespace) -> tuple[Path, Path, Path] | None:
    """What `audit` and `runs` read without --db: the stores the actions on the config (--config, else the
    default) write, so the demo's own beside a hosts.toml the demo wrote (as restart, rollover and smoke with
    it do), else None: the user's. A --config is loaded first: one that cannot be read or is invalid is said
    naming the file (exit 2), not passed over for the user's stores."""
    if args.config:
        load(args.config)
    return demo_stores_of(args.config)


def demo_stores_of(config: str | None, *, say: bool = True) -> tuple[Path, Path, Path] | None:
    """The audit log, smoke store and history store of the demo whose hosts.toml `config` is (its first line
    says `poolconsole demo` wrote it): the CLI's actions, smoke runs and recordings on the simulated pool stay
    beside it, as its console's do, never in the user's. Said on stderr unless `say` is False."""
    path = Path(config) if config else default_config_path()
    if path is None:
        return None
    try:
        with path.open(encoding="utf-8", errors="replace") as text:
            first = text.readline()
    except OSError:
        return None  # told where the config is loaded
    from poolconsole.sim.demo_files import CONFIG_HEADER, demo_stores

    if not first.startswith(CONFIG_HEADER):
        return None
    stores = demo_stores(path)
    if say:
        print(
            f"poolconsole: {path} is a hosts.toml the demo wrote: its own stores beside it are used "
            f"({stores[0].name}, {stores[1].name}, {stores[2].name}); remove its first line to use yours",
            file=sys.stderr,
        )
    return stores


def history_path(config: PoolConfig | None, args: argparse.Namespace) -> Path:
    """The history store: --store, else the demo's beside the demo's hosts.toml, else `[store] path`, else the
    user data directory's."""
    from poolconsole.runtime.store import store_path

    own = None if args.store else demo_stores_of(args.config)
    return store_path(config, args.store or (str(own[2]) if own else None))
