"""The console app: wiring. A PoolSource (runtime.source: the live pool, or a recording played back) feeds it;
the app subscribes, draws the visible screen from the model once a second, toasts what fired, and routes each
registry action to who runs it (model.actions' target: a screen, the action runner, or the app itself)."""

from __future__ import annotations

import asyncio
import contextlib
import inspect
import time
from collections.abc import Callable, Iterable, Mapping
from functools import partial
from pathlib import Path
from typing import TYPE_CHECKING, ClassVar

from textual import actions, events
from textual.app import App
from textual.command import CommandPalette, Provider
from textual.css.query import NoMatches
from textual.dom import DOMNode
from textual.notifications import SeverityLevel
from textual.screen import ModalScreen, Screen
from textual.worker import Worker, WorkerState

from poolconsole.config.models import EngineKind, PoolConfig
from poolconsole.model.alerts import AlertEvent
from poolconsole.model.hosts import HostSnapshot
from poolconsole.model.notices import summarise
from poolconsole.model.snapshots import EngineSnapshot
from poolconsole.runtime.live import Backlog, LivePool, Update
from poolconsole.runtime.source import LiveSource, Playback, PoolSource, SSHPool
from poolconsole.runtime.store import Store
from poolconsole.ui import leaks, registry, themes
from poolconsole.ui.history import History
from poolconsole.ui.palette import Entry, PoolCommands
from poolconsole.ui.runner import ActionRunner
from poolconsole.ui.screens import RefreshingView
from poolconsole.ui.screens.overview import OverviewScreen

if TYPE_CHECKING:  # the other screens are imported where first used, not at start-up
    from poolconsole.runtime.replay import Replay

REDRAW_S = 1.0  # the coalesced redraw: what changed since is drawn once (polls come every 2 s by default)
LEAVE_S = 5.0
"""Quitting waits this long at most for the stopped actions to write their audit entries."""


class PoolApp(App[None]):
    TITLE = "poolconsole"
    CSS_PATH = Path(__file__).with_name("app.tcss")
    BINDINGS = registry.bindings()  # type: ignore[assignment]
    # The palette: the registry's actions and the themes, shown as plain text.
    COMMANDS: ClassVar[set[type[Provider] | Callable[[], type[Provider]]]] = {PoolCommands}

    def __init__(
        self,
        config: PoolConfig,
        *,
        read_only: bool = False,
        live: bool = True,
        clock: Callable[[], float] = time.time,
        theme_state: Path | None = None,
        subtitle: str = "",
        hint: str | None = None,
        store: Path | None = None,
        replay: Replay | None = None,
        started: Backlog | None = None,
    ) -> None:
        super().__init__()
        self.config = config
        self.runtime = LivePool(config, clock=clock) if started is None else started.runtime
        """The live pool (ui.launch may have started it already, its first updates kept in `started`)."""
        self.source: PoolSource = replay or LiveSource(self.runtime, read_only=read_only, polling=live, backlog=started)
        """What is shown: the live pool, or a recording played back (`poolconsole replay`, read-only)."""
        capabilities = self.source.capabilities
        self.read_only = read_only or capabilities.read_only
        self.live = capabilities.live
        self.hint = hint
        """A line shown above the overview's table (the demo says how to point the console at a real pool)."""
        self.state = self.source.state
        self.alerts = self.source.alerts
        self.events = self.source.events
        """The timeline: restarts, alerts, and (live) the actions and smoke runs started here."""
        self.source.subscribe(self._heard)
        self.theme_state = theme_state
        self.window_index = 0
        self.sub_title = subtitle + ("  [read-only]" if self.read_only else "")
        self._dirty = False
        self._fired: list[AlertEvent] = []
        self.smoke_db: Path | None = None
        self.audit_path: Path | None = None
        self.store_path = store
        """The history store a live console records into and fills its charts from (None: none)."""
        self.history = History(self)
        self.runner = ActionRunner(self)

    @property
    def ssh(self) -> SSHPool | None:
        return self.runtime.ssh

    @property
    def history_store(self) -> Store | None:
        """The history store, once open."""
        recording = self.history.recording
        return recording.store if recording is not None else None

    # -- start-up ------------------------------------------------------------------------------------
    def on_mount(self) -> None:
        self.pool_themes = themes.install(self, self.theme_state)
        if self.config.keys:
            # each a minute on screen: the console starts anyway, on the default keys there
            for problem in registry.keymap_problems(dict(self.config.keys)):
                self.notify(f"{problem} (`poolconsole check-config` lists every problem)", severity="error", timeout=60)
            known = {a.id for a in registry.ACTIONS}
            self.set_keymap({k: v for k, v in self.config.keys.items() if k in known and v.strip()})
        # Pushed once the app's start-up is done, not during it: Textual holds every repaint back until its
        # start-up ends, and a screen pushed here is laid out and rendered inside it (a frame thrown away),
        # then rendered again with the first data. Pushed after it, the first frame drawn is the one with data.
        overview = OverviewScreen(
            self.state, self.alerts, self.events, hint=self.hint, read_only=self.read_only, opener=self.open_detail
        )
        overview.show_board(self.store_path, self.live)  # the watcher's pending automatic actions, counting down
        self.call_later(self.push_screen, overview)
        if (label := self.source.label()) is not None:
            self.sub_title = label
        self.set_interval(REDRAW_S, self._redraw)
        self.set_interval(leaks.RELEASE_EVERY_S, leaks.release)
        if self.live:
            self.history.open(self.runtime, self.store_path)
            self.history.load_audit(self.runner.audit_path())
        self.source.start()
        every = self.config.settings.litellm_health_interval_s
        if self.live and every > 0 and any(e.kind is EngineKind.LITELLM for e in self.config.engines):
            self.notify(
                f"LiteLLM deep /health every {every:g} s: each probe calls every deployment (spends tokens)",
                severity="warning",
                timeout=10,
            )

    def notify(
        self,
        message: str,
        *,
        title: str = "",
        severity: SeverityLevel = "information",
        timeout: float | None = None,
        markup: bool = False,
    ) -> None:
        """Notifications carry data (engine errors, host names, "[N/A]"): plain text unless asked."""
        super().notify(message, title=title, severity=severity, timeout=timeout, markup=markup)

    def get_theme_variable_defaults(self) -> dict[str, str]:
        return dict(themes.SEMANTIC)

    def on_worker_state_changed(self, event: Worker.StateChanged) -> None:
        """The one place worker failures land: a broken loop is reported, the console keeps running."""
        if event.state is WorkerState.ERROR and event.worker.error is not None:
            # each worker's description says what it was ("a poll loop stopped" had named a smoke run's failure)
            self.notify(f"{event.worker.description} stopped: {event.worker.error}", severity="error", timeout=10)

    async def on_unmount(self) -> None:
        await self.source.stop()
        await self.history.close()

    # -- results ------------------------------------------------------------------------------------
    def apply_engine(self, snapshot: EngineSnapshot) -> None:
        """A result from outside the runtime's loops (tests): applied as the loops apply theirs."""
        self.runtime.apply_engine(snapshot)

    def apply_host(self, snapshot: HostSnapshot) -> None:
        self.runtime.apply_host(snapshot)

    def _heard(self, update: Update) -> None:
        """Told by the source, once per applied result: the screen redraws on the next tick (the first
        result at once, so the first frame with data does not wait for a tick); what fired is toasted."""
        if (label := self.source.label()) is not None:
            self.sub_title = label
        self.changed(polled=True)
        if update.kind == "restart" and update.message:
            self.notify(f"{update.target}: {update.message}", title="restart", severity="warning", timeout=8)
        elif update.kind == "problem" and update.message:
            self.notify(update.message, severity="error", timeout=10)
        self._fired.extend(e for e in update.events if e.fired)

    def changed(self, polled: bool = False) -> None:
        """The model changed: the screen redraws on the next tick, the first poll result at once (not the
        audit log's entries read at launch, which came first and left the first data to the next tick)."""
        self._dirty = True
        if polled and not self.history.drawn_data:
            self.history.drawn_data = True
            self.call_later(self._redraw)
            self.call_after_refresh(self.history.start_fill)

    def _redraw(self) -> None:
        """Coalesced: however many results arrived, the visible screen redraws once, and what fired since
        the last tick is one notice per rule ("5 targets queueing: ..."), never one toast per target."""
        if self._fired:
            fired, self._fired = self._fired, []
            for line in summarise(fired):
                self.notify(line, title="alert", severity="warning", timeout=6)
            if self.config.alerts.bell:
                self.bell()
        if not self._dirty:
            return
        self._dirty = False
        self.refresh_screen()

    def refresh_screen(self) -> None:
        screen = self.screen
        if isinstance(screen, RefreshingView) and screen.ready:  # not composed yet: it draws itself as it mounts
            with contextlib.suppress(NoMatches):  # the screen is being torn down (quitting, or popped meanwhile)
                screen.refresh_view()

    # -- routing: each registry action to who runs it -------------------------------------------------
    async def run_action(
        self,
        action: str | actions.ActionParseResult,
        default_namespace: DOMNode | None = None,
        namespaces: Mapping[str, DOMNode] | None = None,
    ) -> bool:
        """An action of the app's (its keys, the palette) whose registry entry names another target runs
        there, once check_action allows it: on the action runner, or on the screen the keys act on."""
        destination, name, params = actions.parse(action) if isinstance(action, str) else action
        target = registry.TARGET_OF.get(name, registry.APP)
        if destination not in ("", "app") or default_namespace not in (None, self) or target == registry.APP:
            return await super().run_action(action, default_namespace, namespaces)
        if not self.check_action(name, params):
            return False
        owner: object = self.runner if target == registry.RUNNER else self._keyed_screen()
        method = getattr(owner, f"action_{name}", None)
        if method is None or (target != registry.RUNNER and registry.screen_name(owner) != target):
            return False
        result = method(*params)
        if inspect.isawaitable(result):
            await result
        return True

    def check_action(self, action: str, parameters: tuple[object, ...]) -> bool | None:
        """--read-only: every action that changes the pool is hidden from keys, footer and palette, and refused.
        A replay also refuses what reaches the live pool; the replay's own keys exist only in a replay."""
        dialog = isinstance(self.screen, ModalScreen) and not isinstance(self.screen, CommandPalette)
        if dialog and action in ("quit", "close_screen"):
            return False  # q cancels a dialog, as Escape does (from a picker it quit the console)
        replay = self.source.capabilities.replay
        return registry.allowed(action, self._screen_name(), read_only=self.read_only, replay=replay)

    def on_key(self, event: events.Key) -> None:
        """A read-only console (--read-only, a replay) says why the key of an action that changes the pool does
        nothing, rather than nothing at all (check_action leaves the key unbound); a replay says so too for
        what would reach the live pool (a smoke test, a poll now)."""
        replay = self.source.capabilities.replay
        why = registry.refusal(
            event.key, self._screen_name(), self.config.keys, read_only=self.read_only, replay=replay
        )
        if why is not None:
            self.notify(why, severity="warning", timeout=4)

    def _keyed_screen(self) -> Screen[object]:
        """The screen the keys and the palette act on (the one under the palette)."""
        return next((s for s in reversed(self.screen_stack) if not isinstance(s, CommandPalette)), self.screen)

    def _screen_name(self) -> str:
        return registry.screen_name(self._keyed_screen())

    def palette_entries(self) -> Iterable[Entry]:
        """The palette's entries: every visible action of the registry (with its key), then the themes."""
        keymap = dict(self.config.keys)
        shown = registry.visible(self.read_only, self.source.capabilities.replay, self._screen_name())
        for a in shown:  # hidden actions, and those of other screens, are not even listed
            key = registry.key_label(keymap.get(a.id, a.key))
            yield Entry(f"{a.title}  ({key})", a.help, partial(self.run_action, a.action.removeprefix("app.")), a.id)
        for theme in self.pool_themes:
            yield Entry(f"Theme: {theme}", "Switch theme (remembered)", partial(self.set_theme, theme))

    # -- navigation -----------------------------------------------------------------------------------
    def overview(self) -> OverviewScreen | None:
        return next((s for s in self.screen_stack if isinstance(s, OverviewScreen)), None)

    def open_detail(self, key: str) -> None:
        from poolconsole.ui.screens.detail import DetailScreen

        if isinstance(self.screen, OverviewScreen) and not key.startswith("model:"):
            self.push_screen(DetailScreen(self.state, key, self.window_index, self.history.fill_detail))

    def replace_top(self, screen: Screen[None]) -> None:
        if not isinstance(self.screen, OverviewScreen):
            self.pop_screen()
        self.push_screen(screen)

    def action_palette(self) -> None:
        """`:` (as in k9s and vim): the command palette, as Ctrl+P opens it."""
        self.action_command_palette()

    def action_window(self) -> None:
        from poolconsole.ui.screens.detail import DetailScreen

        self.window_index = (self.window_index + 1) % 2
        if isinstance(self.screen, DetailScreen):
            self.screen.toggle_window()

    def action_next_theme(self) -> None:
        names = self.pool_themes
        current = names.index(self.theme) if self.theme in names else -1
        self.set_theme(names[(current + 1) % len(names)])

    def set_theme(self, name: str) -> None:
        self.theme = name
        themes.remember_theme(name, self.theme_state)
        self.refresh_screen()
        self.notify(f"theme: {name}", timeout=2)

    def action_poll_now(self) -> None:
        self.source.poll_now()

    def action_go_back(self) -> None:
        if len(self.screen_stack) > 2:
            self.pop_screen()
        elif isinstance(self.screen, OverviewScreen):
            self.screen.clear_filter()

    def action_close_screen(self) -> None:
        """q on a screen opened from the overview: back to where it was opened from (the console stays)."""
        if len(self.screen_stack) > 2:
            self.pop_screen()

    # -- a recording's controls (the registry's replay actions) ----------------------------------------
    def _played(self, control: Callable[[Playback], None]) -> None:
        playback = self.source.playback
        if playback is not None:
            control(playback)
            self.sub_title = self.source.label() or self.sub_title
            self._dirty = True
            self._redraw()

    def action_replay_pause(self) -> None:
        self._played(lambda p: p.toggle_pause())

    def action_replay_seek(self, seconds: int) -> None:
        self._played(lambda p: p.seek(float(seconds)))

    def action_replay_speed(self, up: bool) -> None:
        self._played(lambda p: p.faster(up))

    # -- quitting -------------------------------------------------------------------------------------
    async def leave(self) -> None:
        """Quit, the actions still running stopped first: each is audited as abandoned, with where it stood,
        before the console goes (cancelled with the app, an action met its end only as the loop closed)."""
        stopped = self.workers.cancel_group(self, "actions")
        with contextlib.suppress(TimeoutError):
            async with asyncio.timeout(LEAVE_S):
                await asyncio.gather(*(w.wait() for w in stopped), return_exceptions=True)
        self.exit()

    def quit_soon(self) -> None:
        """SIGTERM or SIGHUP: quit as a confirmed q does (ui.launch.run_app)."""
        if self.is_running:
            self.call_later(self.leave)
        else:
            self.exit()

    async def action_quit(self) -> None:
        """q on the overview. While a restart, rollover or Ollama load runs, quitting would stop it where it
        stands (a profile written, its engine not yet serving, no rollback): the operator is asked first."""
        if not self.runner.ask_before_quit(self.leave):
            self.exit()
