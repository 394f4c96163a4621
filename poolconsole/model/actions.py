"""The console's actions as data: id, title, default key, the screen that owns each, and whether it changes
the pool or needs a live one. The console (ui.registry) makes its key bindings, command palette and help
screen from them; `check-config` checks a `[keys]` table against them without loading Textual or Rich.
Keys are remappable with a `[keys]` table in hosts.toml (action id = key)."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

APP = "app"
"""The target of an action the app runs itself (navigation, themes, quitting, the replay's controls)."""
RUNNER = "runner"
"""The target of an action that starts a workflow or opens a screen from the pool (ui.runner.ActionRunner)."""


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
    footer: str | None = None
    """The footer's shorter label (None: the title); the palette and the help screen show the title."""
    screens: tuple[str, ...] = ()
    """The screens it applies to: its key works there and the footer and the palette show it there only (a
    screen is named by its class, less "Screen", in lower case: "overview", "detail"). Empty: every screen."""
    target: str = APP
    """Who runs it (harlequin's `Action(target=...)`): a screen's name (its own `action_*` method, on that
    screen), RUNNER, or APP."""
    live_only: bool = False
    """Reaches the live pool (a smoke test, a poll, a log read over SSH, the exposure audit's probes): refused
    while a recording is played back, and left out of its footer and palette."""


FOOTER_KEPT = ("help", "close", "quit")
"""The footer's keys kept when the width runs out (at 80 columns the overview had lost "q Quit" and the
detail "q Back"); the others follow in order while they fit."""

OVERVIEW = ("overview",)
ENGINE = ("overview", "detail")
"""Actions on the selected engine: the overview's row, or the engine the detail screen shows."""
LOG = ("log",)
"""The engine log view (screens.logs.LogScreen)."""
SUBSCREENS = ("detail", "log", "action", "audit", "events", "ledger", "gateway", "alerts", "help", "security", "smoke")
"""Every screen opened from the overview: q closes them (as Escape does) instead of quitting the console, which
an operator pressing q to leave the detail or a finished action's progress lost."""

ACTIONS: tuple[Action, ...] = (
    Action(
        "detail",
        "Node detail",
        "enter",
        "app.open_detail",
        "GPUs, metrics and history charts of the selected row (on a group line: fold or unfold the group)",
        screens=OVERVIEW,
        footer="Detail",
        target="overview",
    ),
    Action(
        "filter",
        "Filter",
        "slash",
        "app.filter",
        "Show only rows containing some text",
        screens=OVERVIEW,
        target="overview",
    ),
    Action(
        "sort",
        "Sort",
        "s",
        "app.sort",
        "Sort by the next column (host, tok/s, KV, waiting, name)",
        screens=OVERVIEW,
        show=False,
        target="overview",
    ),
    Action(
        "group",
        "Group by",
        "G",
        "app.group",
        "Group the rows by host, by model, or not at all (each group under its line, sorted inside as chosen)",
        screens=OVERVIEW,
        show=False,
        target="overview",
    ),
    Action(
        "collapse",
        "Fold group",
        "c",
        "app.collapse",
        "Fold or unfold the selected row's group (its line keeps the count and the worst state)",
        show=False,
        screens=OVERVIEW,
        target="overview",
    ),
    Action(
        "collapse_all",
        "Fold all",
        "C",
        "app.collapse_all",
        "Fold every group (all folded: unfold them)",
        show=False,
        screens=OVERVIEW,
        target="overview",
    ),
    Action(
        "problems",
        "Problems only",
        "p",
        "app.problems",
        "Only the rows that need attention (the status line says how many are hidden), or all of them",
        screens=OVERVIEW,
        footer="Problems",
        target="overview",
    ),
    Action(
        "attention",
        "Problems first",
        "exclamation_mark",
        "app.attention",
        "Rows that need attention first, or not (on by default while anything is wrong)",
        show=False,
        screens=OVERVIEW,
        target="overview",
    ),
    Action("gateway", "Gateway", "g", "app.gateway", "LiteLLM routes, drift and degrade hints", target=RUNNER),
    Action(
        "alerts",
        "Alerts",
        "a",
        "app.alerts",
        "The alert log, with where the watcher paged each alert, when, and what failed",
        target=RUNNER,
    ),
    Action(
        "silence",
        "Silence alert",
        "Z",
        "app.silence",
        "Silence the selected alert for 15m, 1h, 4h or 1d: in Alertmanager where one is a [[notify]] receiver, "
        "else a local silence the watcher honours (confirmed, audited)",
        mutating=True,
        screens=("alerts",),
        footer="Silence",
        target="alerts",
    ),
    Action(
        "events",
        "Events",
        "E",
        "app.events",
        "The events timeline, newest first: restarts with their cause, alerts, actions, smoke runs; with a filter",
        show=False,
        target=RUNNER,
    ),
    Action(
        "events_pane",
        "Events pane",
        "e",
        "app.toggle_events",
        "Show or hide the overview's pane of the newest events",
        show=False,
        screens=OVERVIEW,
        target="overview",
    ),
    Action(
        "smoke",
        "Smoke test",
        "m",
        "app.smoke",
        "Smoke-test the selected engine (all checks, stored, vs baseline)",
        screens=ENGINE,
        footer="Smoke",
        target=RUNNER,
        live_only=True,
    ),
    Action(
        "smoke_all",
        "Smoke test pool",
        "M",
        "app.smoke_all",
        "Smoke-test every engine, one after another",
        show=False,
        target=RUNNER,
        live_only=True,
    ),
    Action(
        "restart",
        "Restart engine",
        "R",
        "app.restart",
        "Restart the selected engine over SSH (confirmed, audited)",
        mutating=True,
        screens=ENGINE,
        footer="Restart",
        target=RUNNER,
    ),
    Action(
        "rollover",
        "Switch profile",
        "P",
        "app.rollover",
        "Roll the selected engine to another quantization profile (fit check, rollback on failure)",
        mutating=True,
        screens=ENGINE,
        footer="Profile",
        target=RUNNER,
    ),
    Action(
        "ollama_unload",
        "Unload model",
        "U",
        "app.ollama_unload",
        "Ollama: unload one of the selected instance's resident models (keep_alive 0; confirmed, audited)",
        mutating=True,
        show=False,
        screens=ENGINE,
        target=RUNNER,
    ),
    Action(
        "ollama_preload",
        "Preload model",
        "O",
        "app.ollama_preload",
        "Ollama: load a model of the selected instance with a keep-alive (confirmed, audited)",
        mutating=True,
        show=False,
        screens=ENGINE,
        target=RUNNER,
    ),
    Action(
        "logs",
        "Engine log",
        "l",
        "app.logs",
        "The selected engine's log over SSH (bounded, redacted), followed while open; find, last error",
        screens=ENGINE,
        footer="Log",
        target=RUNNER,
        live_only=True,
    ),
    Action(
        "log_find", "Find", "f", "app.log_find", "Log view: search for a text (then n / N)", screens=LOG, target="log"
    ),
    Action("log_next", "Next match", "n", "app.log_next(True)", "Log view: the next match", screens=LOG, target="log"),
    Action(
        "log_previous",
        "Previous match",
        "N",
        "app.log_next(False)",
        "Log view: the previous match",
        screens=LOG,
        target="log",
    ),
    Action(
        "log_error",
        "Last error",
        "x",
        "app.log_error",
        "Log view: the newest failure-mode line, then back through the error lines",
        screens=LOG,
        target="log",
    ),
    Action(
        "log_follow", "Follow", "F", "app.log_follow", "Log view: pause or resume following", screens=LOG, target="log"
    ),
    Action(
        "security",
        "Exposure audit",
        "S",
        "app.security",
        "Which engines and gateways answer without a key or listen on every interface (with the fixes); "
        "sends a models list and, unless skipped, a one-token completion",
        show=False,
        target=RUNNER,
        live_only=True,
    ),
    Action(
        "audit",
        "Audit log",
        "L",
        "app.audit_log",
        "Every action taken, with its commands and outcome",
        show=False,
        target=RUNNER,
    ),
    Action(
        "ledger",
        "Token ledger",
        "T",
        "app.ledger",
        "Tokens per day per engine, busy hours, energy, and whether the pool pays off (from the history store)",
        show=False,
        target=RUNNER,
    ),
    Action(
        "window",
        "Chart window",
        "w",
        "app.window",
        "Switch history charts between 5 minutes and 1 hour",
        screens=("detail",),
        footer="Window",
    ),
    Action(
        "theme", "Next theme", "t", "app.next_theme", "Cycle through the themes in themes/ (remembered)", show=False
    ),
    Action("refresh", "Poll now", "r", "app.poll_now", "Poll every target now", show=False, live_only=True),
    Action("help", "Help", "question_mark", "app.help", "Keys and actions", target=RUNNER),
    Action(
        "palette",
        "Command palette",
        "colon",
        "app.palette",  # not app.command_palette: Textual would then leave Ctrl+P unbound
        "Every action (with its key) and theme, by name (also Ctrl+P)",
        show=False,
    ),
    # the replay's footer labels are short: with them its footer fits 120 columns ("Forward 1 min" was cut)
    Action(
        "replay_pause",
        "Pause / play",
        "space",
        "app.replay_pause",
        "Pause or resume the replay",
        replay=True,
        footer="Pause",
    ),
    Action(
        "replay_back",
        "Back 1 min",
        "left_square_bracket",
        "app.replay_seek(-60)",
        "Seek the replay",
        replay=True,
        footer="-1 min",
    ),
    Action(
        "replay_forward",
        "Forward 1 min",
        "right_square_bracket",
        "app.replay_seek(60)",
        "Seek the replay",
        replay=True,
        footer="+1 min",
    ),
    Action(
        "replay_slower",
        "Slower",
        "minus",
        "app.replay_speed(False)",
        "Play the recording slower",
        replay=True,
        footer="Slow",
        show=False,  # in the help and the palette: the replay's footer fits 120 columns beside the palette mark
    ),
    Action(
        "replay_faster",
        "Faster",
        "plus",
        "app.replay_speed(True)",
        "Play the recording faster",
        replay=True,
        footer="Fast",
        show=False,
    ),
    Action("back", "Back", "escape", "app.go_back", "Close this screen, or clear the filter", show=False),
    Action(
        "close",
        "Close",
        "q",
        "app.close_screen",
        "Close this screen and go back (on the overview, q quits)",
        screens=SUBSCREENS,
        footer="Back",
    ),
    Action(
        "quit",
        "Quit",
        "q",
        "app.quit",
        "Leave the console (asked first while a restart or rollover runs)",
        screens=OVERVIEW,
    ),
    Action(  # last: the help screen's first page (its snapshots) stays as it was
        "cancel_auto",
        "Cancel auto-action",
        "X",
        "app.cancel_auto",
        "Cancel the watcher's pending automatic restart or rollback (the selected alert's engine, else the next "
        "due): the alert log's countdown line (confirmed, audited; the watcher then only notifies)",
        mutating=True,
        show=False,
        screens=("alerts",),
        target="alerts",
    ),
)


def visible(read_only: bool, replaying: bool = False, screen: str | None = None) -> list[Action]:
    """The actions offered: not the mutating ones read-only, the replay's only in a replay, and with a
    `screen`, only those that apply to it."""
    return [
        a
        for a in ACTIONS
        if not (read_only and a.mutating) and a.replay <= replaying and (screen is None or applies(a, screen))
    ]


def applies(action: Action, screen: str) -> bool:
    return not action.screens or screen in action.screens


def on_screen(action: str, screen: str) -> bool:
    """Whether the action method `action` (as Textual names it: "open_detail", "replay_seek") applies to
    `screen`; an action the registry does not know applies everywhere."""
    screens = SCREENS_OF.get(action, ())
    return not screens or screen in screens


def method(action: Action) -> str:
    """The action's method as Textual names it: "app.log_next(True)" is "log_next"."""
    return action.action.removeprefix("app.").split("(")[0]


LIVE_ONLY = frozenset(method(a) for a in ACTIONS if a.live_only)
"""The methods of the actions that reach the live pool (Action.live_only)."""
REPLAY = frozenset(method(a) for a in ACTIONS if a.replay)
MUTATING = frozenset(a.action.removeprefix("app.") for a in ACTIONS if a.mutating)
SCREENS_OF = {method(a): a.screens for a in ACTIONS}
TARGET_OF = {method(a): a.target for a in ACTIONS}
"""Method -> who runs it (Action.target)."""


def keymap_problems(keys: dict[str, str]) -> list[str]:
    """What is wrong with a `[keys]` table: ids the registry does not know, empty keys, two actions on one key."""
    ids = {a.id: a for a in ACTIONS}
    problems = [
        f"keys.{action_id}: no action has this id (known: {', '.join(sorted(ids))})"
        for action_id in keys
        if action_id not in ids
    ]
    problems += [f"keys.{action_id}: the key is empty" for action_id, key in keys.items() if not key.strip()]
    bound: dict[str, list[Action]] = {}
    for a in ACTIONS:  # one key may serve two actions of different screens (f: filter, and find in a log)
        key = keys.get(a.id, a.key)
        for other in bound.get(key, []):
            if not a.screens or not other.screens or set(a.screens) & set(other.screens):
                problems.append(f"keys: {key_label(key)!r} is the key of both {other.id} and {a.id}")
                break
        bound.setdefault(key, []).append(a)
    return problems


def key_label(key: str) -> str:
    labels = {"slash": "/", "question_mark": "?", "escape": "Esc", "enter": "Enter", "space": "Space"}
    labels |= {"exclamation_mark": "!", "colon": ":"}
    labels |= {"left_square_bracket": "[", "right_square_bracket": "]", "minus": "-", "plus": "+"}
    return labels.get(key, key)


def allowed(method_name: str, screen: str, *, read_only: bool, replay: bool) -> bool:
    """Whether the action method (as Textual names it) is offered on `screen`: --read-only hides every action
    that changes the pool; a replay hides what reaches the live pool, and the replay's own exist only in one."""
    if read_only and method_name in MUTATING:
        return False
    if not on_screen(method_name, screen):
        return False  # not this screen's: its key does nothing here and the footer leaves it out
    return method_name not in (LIVE_ONLY if replay else REPLAY)


def refusal(key: str, screen: str, keys: Mapping[str, str], *, read_only: bool, replay: bool) -> str | None:
    """Why `key` does nothing in a read-only console (--read-only, a replay), where it is an action's key on
    `screen` that changes the pool or, in a replay, reaches the live pool; None where it is not."""
    if not read_only:
        return None
    for action in ACTIONS:
        name = action.action.removeprefix("app.")
        if key not in {k.strip() for k in (keys.get(action.id) or action.key).split(",")}:
            continue
        if not on_screen(name, screen):
            continue
        if name in MUTATING:
            why = "a replay" if replay else "started with --read-only"
            return f"read-only console ({why}): {action.title} is refused"
        if replay and action.live_only:
            return f"a replay has no live pool: {action.title} is refused"
    return None
