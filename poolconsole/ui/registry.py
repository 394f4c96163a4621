"""One action registry: it generates the key bindings, the command palette entries and the help screen.
Keys are remappable with a `[keys]` table in hosts.toml (action id = key)."""

from __future__ import annotations

from dataclasses import dataclass

from textual.binding import Binding


@dataclass(frozen=True)
class Action:
    id: str
    title: str
    key: str
    action: str
    """Textual action string run by the key and the palette."""
    help: str
    mutating: bool = False
    """Changes something on the pool: hidden and refused in --read-only mode."""
    show: bool = True
    """Shown in the footer."""
    replay: bool = False
    """Only while a recording is played back (`poolconsole replay`)."""


ACTIONS: tuple[Action, ...] = (
    Action("detail", "Node detail", "enter", "app.open_detail", "GPUs, metrics and history charts of the selected row"),
    Action("filter", "Filter", "slash", "app.filter", "Show only rows containing some text"),
    Action("sort", "Sort", "s", "app.sort", "Sort by the next column (host, tok/s, KV, waiting, name)"),
    Action(
        "attention",
        "Problems first",
        "exclamation_mark",
        "app.attention",
        "Rows that need attention first, or not (on by default while anything is wrong)",
        show=False,
    ),
    Action("gateway", "Gateway", "g", "app.gateway", "LiteLLM routes, drift and degrade hints"),
    Action("alerts", "Alerts", "a", "app.alerts", "The alert log"),
    Action(
        "events",
        "Events",
        "E",
        "app.events",
        "The events timeline, newest first: restarts with their cause, alerts, actions, smoke runs; with a filter",
    ),
    Action(
        "events_pane",
        "Events pane",
        "e",
        "app.toggle_events",
        "Show or hide the overview's pane of the newest events",
        show=False,
    ),
    Action("smoke", "Smoke test", "m", "app.smoke", "Smoke-test the selected engine (all checks, stored, vs baseline)"),
    Action("smoke_all", "Smoke test pool", "M", "app.smoke_all", "Smoke-test every engine, one after another"),
    Action(
        "restart",
        "Restart engine",
        "R",
        "app.restart",
        "Restart the selected engine over SSH (confirmed, audited)",
        mutating=True,
    ),
    Action(
        "rollover",
        "Switch profile",
        "P",
        "app.rollover",
        "Roll the selected engine to another quantization profile (fit check, rollback on failure)",
        mutating=True,
    ),
    Action(
        "ollama_unload",
        "Unload model",
        "U",
        "app.ollama_unload",
        "Ollama: unload one of the selected instance's resident models (keep_alive 0; confirmed, audited)",
        mutating=True,
        show=False,
    ),
    Action(
        "ollama_preload",
        "Preload model",
        "O",
        "app.ollama_preload",
        "Ollama: load a model of the selected instance with a keep-alive (confirmed, audited)",
        mutating=True,
        show=False,
    ),
    Action("audit", "Audit log", "L", "app.audit_log", "Every action taken, with its commands and outcome"),
    Action(
        "ledger",
        "Token ledger",
        "T",
        "app.ledger",
        "Tokens per day per engine, busy hours, energy, and whether the pool pays off (from the history store)",
    ),
    Action("window", "Chart window", "w", "app.window", "Switch history charts between 5 minutes and 1 hour"),
    Action("theme", "Next theme", "t", "app.next_theme", "Cycle through the themes in themes/ (remembered)"),
    Action("refresh", "Poll now", "r", "app.poll_now", "Poll every target now"),
    Action("help", "Help", "question_mark", "app.help", "Keys and actions"),
    Action(
        "palette",
        "Command palette",
        "colon",
        "app.palette",  # not app.command_palette: Textual would then leave Ctrl+P unbound
        "Every action (with its key) and theme, by name (also Ctrl+P)",
        show=False,
    ),
    Action("replay_pause", "Pause / play", "space", "app.replay_pause", "Pause or resume the replay", replay=True),
    Action("replay_back", "Back 1 min", "left_square_bracket", "app.replay_seek(-60)", "Seek the replay", replay=True),
    Action(
        "replay_forward", "Forward 1 min", "right_square_bracket", "app.replay_seek(60)", "Seek the replay", replay=True
    ),
    Action("replay_slower", "Slower", "minus", "app.replay_speed(False)", "Play the recording slower", replay=True),
    Action("replay_faster", "Faster", "plus", "app.replay_speed(True)", "Play the recording faster", replay=True),
    Action("back", "Back", "escape", "app.go_back", "Close this screen, or clear the filter", show=False),
    Action("quit", "Quit", "q", "app.quit", "Leave the console"),
)


def visible(read_only: bool, replaying: bool = False) -> list[Action]:
    return [a for a in ACTIONS if not (read_only and a.mutating) and a.replay <= replaying]


LIVE_ONLY = frozenset({"smoke", "smoke_all", "poll_now"})
"""Actions that reach the live pool: refused while a recording is played back."""
REPLAY = frozenset(a.action.removeprefix("app.").split("(")[0] for a in ACTIONS if a.replay)


MUTATING = frozenset(a.action.removeprefix("app.") for a in ACTIONS if a.mutating)


def bindings() -> list[Binding]:
    """Every action's key binding; --read-only disables the mutating ones through App.check_action."""
    return [Binding(a.key, a.action, a.title, show=a.show, id=a.id, priority=a.id in ("quit",)) for a in ACTIONS]


def keymap_problems(keys: dict[str, str]) -> list[str]:
    """What is wrong with a `[keys]` table: ids the registry does not know, empty keys, two actions on one key."""
    ids = {a.id: a for a in ACTIONS}
    problems = [
        f"keys.{action_id}: no action has this id (known: {', '.join(sorted(ids))})"
        for action_id in keys
        if action_id not in ids
    ]
    problems += [f"keys.{action_id}: the key is empty" for action_id, key in keys.items() if not key.strip()]
    bound: dict[str, str] = {}
    for a in ACTIONS:
        key = keys.get(a.id, a.key)
        if key in bound:
            problems.append(f"keys: {key_label(key)!r} is the key of both {bound[key]} and {a.id}")
        bound[key] = a.id
    return problems


def key_label(key: str) -> str:
    labels = {"slash": "/", "question_mark": "?", "escape": "Esc", "enter": "Enter", "space": "Space"}
    labels |= {"exclamation_mark": "!", "colon": ":"}
    labels |= {"left_square_bracket": "[", "right_square_bracket": "]", "minus": "-", "plus": "+"}
    return labels.get(key, key)
