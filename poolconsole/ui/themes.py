"""Themes are data: TOML files in themes/ (name, colours, and the console's semantic variables). The checkout's
top-level themes/ is where they are kept; a built wheel carries a copy as poolconsole/ui/theme_files/
(setup.py), which an installed console (`pip install .`, pipx) reads."""

from __future__ import annotations

import json
import tomllib
from pathlib import Path
from typing import Any

from platformdirs import user_state_path
from textual.app import App
from textual.theme import Theme

BUNDLED_DIR = Path(__file__).with_name("theme_files")
"""The wheel's copy of themes/ (absent from a checkout, and so from an editable install)."""
CHECKOUT_DIR = Path(__file__).resolve().parents[2] / "themes"
THEMES_DIR = BUNDLED_DIR if BUNDLED_DIR.is_dir() else CHECKOUT_DIR
DEFAULT = "pool-dark"
SEMANTIC = {"gpu-hot": "$error", "target-down": "$error", "stale": "$warning", "unified": "$accent"}


def load_themes(directory: Path = THEMES_DIR) -> list[Theme]:
    themes: list[Theme] = []
    for path in sorted(directory.glob("*.toml")):
        data = tomllib.loads(path.read_text())
        variables = {str(k): str(v) for k, v in data.pop("variables", {}).items()}
        themes.append(Theme(variables=variables, **data))
    return themes


def state_file() -> Path:
    return user_state_path("poolconsole") / "ui.json"


def remembered_theme(path: Path | None = None) -> str | None:
    try:
        value = json.loads((path or state_file()).read_text()).get("theme")
    except (OSError, ValueError, AttributeError):
        return None
    return value if isinstance(value, str) else None


def remember_theme(name: str, path: Path | None = None) -> None:
    target = path or state_file()
    try:
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_text(json.dumps({"theme": name}))
    except OSError:
        pass  # a read-only home does not stop the console


def install(app: App[Any], state: Path | None) -> list[str]:
    """Registers every theme of themes/ on `app` and picks the remembered one (else DEFAULT); returns the names
    `t` cycles through."""
    names = []
    for theme in load_themes():
        app.register_theme(theme)
        names.append(theme.name)
    remembered = remembered_theme(state)
    default = DEFAULT if DEFAULT in names else (names or ["textual-dark"])[0]
    app.theme = remembered if remembered in app.available_themes else default
    return names or ["textual-dark"]
