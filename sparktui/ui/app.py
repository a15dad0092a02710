"""The Textual app: collection runs in an async worker into the monitor core (``sparktui.monitor``);
a render tick ticks the core and hands its views to the screen on display. The app renders and
dispatches; what is known about the fleet lives in the core. Widgets never talk to collectors."""

from __future__ import annotations

import asyncio
import gc
import re
import signal
import time
from collections import deque
from collections.abc import Callable, Mapping
from functools import partial
from pathlib import Path
from types import FrameType
from typing import ClassVar

from textual.actions import ActionParseResult, parse
from textual.app import App
from textual.binding import BindingType
from textual.dom import DOMNode
from textual.timer import Timer

from sparktui.actions.controller import ActionController, Plan, Shown, plan_for
from sparktui.actions.plans import BenchPlan, Refusal
from sparktui.actions.progress import RunningAction
from sparktui.actions.registry import ActionSpec, Mode, action_spec, refused_in
from sparktui.actions.runner import ActionResult, ActionRunner
from sparktui.config import catalogue_for
from sparktui.diagnosis.alerts import AlertEngine, AlertEvent
from sparktui.diagnosis.engine import DiagnosisEngine, Finding
from sparktui.model.bench import BenchRun
from sparktui.model.drift import drift_report
from sparktui.model.fleet import FleetState, NodeView
from sparktui.model.history import History
from sparktui.model.logbuffer import DEFAULT_MAX_LINES, LogBuffer
from sparktui.model.specs import FleetSpec
from sparktui.model.units import fmt_clock
from sparktui.monitor.core import UNSHOWN_LOG_LINES, WINDOW_S, Monitor
from sparktui.monitor.schedule import TickRounds
from sparktui.record.recorder import Recorder
from sparktui.sources.bench import BenchJob
from sparktui.sources.live import FleetSource, LiveFleet
from sparktui.sources.prometheus import fleet_source
from sparktui.ui.actions_ui import ActionLogScreen, ConfirmAction
from sparktui.ui.alerts_screen import AlertsScreen
from sparktui.ui.bench_ui import BenchScreen, ConfirmBench, bench_job
from sparktui.ui.commands import FleetCommands
from sparktui.ui.fleet_screen import FleetScreen
from sparktui.ui.fleet_views import DriftScreen, FindingsScreen
from sparktui.ui.help_screen import HelpScreen
from sparktui.ui.keys import ACTION_BINDINGS, APP_BINDINGS, UNLOCK_ID, binding_ids
from sparktui.ui.kiosk_screen import KioskScreen
from sparktui.ui.log_screen import LogScreen
from sparktui.ui.node_screen import NodeScreen
from sparktui.ui.textual_fixes import apply as apply_textual_fixes
from sparktui.ui.themes import DEFAULT_THEME, VARIABLE_DEFAULTS, load_themes, palette

apply_textual_fixes()  # known bugs of the pinned Textual (textual_fixes.py)

FREEZE_AFTER_S = 5.0  # the first polls answered and the first full frame drawn
ARRIVAL_DELAY_S = 0.05  # observations arriving this close together are drawn in one frame
EXIT_SIGNALS = (signal.SIGTERM, signal.SIGHUP)  # a service stopping it, its terminal closed


class SparkApp(App[None]):
    TITLE = "sparktui"
    COMMANDS = App.COMMANDS | {FleetCommands}
    # A node's row is redrawn as its observation arrives (within ARRIVAL_DELAY_S), not at the next
    # render tick up to a second later; the tick still does the fleet-wide work (history, diagnosis,
    # alerts, ages). A replay draws only what its recording's ticks computed.
    DRAW_ON_ARRIVAL: ClassVar[bool] = True
    NODE_SCREENS_KEPT: ClassVar[int] = 4  # node screens kept composed after they close (see _node_screen)
    # The recovery actions first: the footer shows them before the rest, so a narrow terminal leaves out
    # Theme or Pause (still in help, `?`), never Restart.
    BINDINGS: ClassVar[list[BindingType]] = [*ACTION_BINDINGS, *APP_BINDINGS]
    CSS = """
    Screen { background: $background; }
    """

    def __init__(
        self,
        fleet: FleetSpec,
        *,
        collect: bool = True,
        read_only: bool = False,
        kiosk: bool = False,
        theme: str | None = None,
        theme_dirs: tuple[Path, ...] = (),
        clock: Callable[[], float] = time.monotonic,
        window_s: float = WINDOW_S,
        source: FleetSource | None = None,
        freeze_gc: bool = False,
        recorder: Recorder | None = None,
        render_every_s: float | None = None,
    ) -> None:
        """``collect`` runs ``source`` (live collection from the fleet when None) in the background;
        ``recorder`` (``--record``, ``--black-box``) hears of every tick, finding and alert of the core;
        ``freeze_gc`` (the CLI's dashboard) takes what exists a few seconds in out of the collector's
        generations (see ``_freeze_startup``); ``render_every_s``: the render tick's period (default
        the poll interval, at least 0.5 s; a snapshot test sets it past its own length, so its picture
        is of the first tick however slow the machine)."""
        super().__init__()
        self.render_every_s = render_every_s
        self.freeze_gc = freeze_gc
        self.fleet = fleet
        self.recorder = recorder
        self.monitor = Monitor(
            fleet,
            catalogue_for(fleet.diagnosis),
            window_s=window_s,
            log_lines=UNSHOWN_LOG_LINES if kiosk else DEFAULT_MAX_LINES,  # unlocked, a kiosk scrolls less
        )
        if recorder is not None:
            self.monitor.attach(recorder)  # taps what the core is fed, observes what it derives
        self.monitor.subscribe(self)
        self.collect = collect
        self.kiosk = kiosk
        self.read_only = read_only or kiosk  # the kiosk is read-only by construction
        self.clock = clock
        self.paused = False
        self.colours: dict[str, str] = dict(VARIABLE_DEFAULTS)
        self._arrived: set[str] = set()  # nodes observed since the last frame drew them
        self._kept_screens: list[str] = []  # installed node screens, the least recently opened first
        self._arrival_pending = False
        self._render_timer: Timer | None = None
        self.rounds = TickRounds(1.0)  # when the core ticks: its period is set on mount
        self.timer_clock: Callable[[], float] = time.monotonic  # the render timer's clock (tests set it)
        self.action_log: list[tuple[str, tuple[str, ...]]] = []
        self.running_actions: list[RunningAction] = []  # confirmed and not ended, oldest first
        self.action_results: list[ActionResult] = []
        self.source: FleetSource = source or fleet_source(fleet, clock=clock)
        loaded = load_themes(theme_dirs)
        self._theme_errors = loaded.errors
        self._theme_names: list[str] = []
        for found in loaded.themes:
            self.register_theme(found)
            self._theme_names.append(found.name)
        self._wanted_theme = theme or DEFAULT_THEME
        self._signals_before: dict[signal.Signals, Callable[[int, FrameType | None], object] | int | None] = {}

    # --- lifecycle ----------------------------------------------------------------------------------

    def on_mount(self) -> None:
        self._exit_on_signals()
        self.theme_changed_signal.subscribe(self, lambda _theme: self._theme_changed())
        if self._wanted_theme in self._theme_names:
            self.theme = self._wanted_theme
        else:
            self.notify(f"theme {self._wanted_theme!r} not found; using {DEFAULT_THEME}", severity="warning")
            self.theme = DEFAULT_THEME
        self._theme_changed()
        for error in self._theme_errors:
            self.notify(error, severity="error", timeout=10)
        self._apply_keymap()
        self.refresh_views()
        self.push_screen(KioskScreen() if self.kiosk else FleetScreen())
        live = self.source if isinstance(self.source, LiveFleet) else None
        self.actions = ActionRunner(
            self.fleet,
            read_only=self.read_only,
            ssh_for=(lambda node: live.node_ssh(node.name)) if live is not None else None,
            memory=lambda name: self.state.nodes[name].memory if name in self.state.nodes else None,
            clock=self.clock,
        )
        self.controller = ActionController(self.actions, core=self.monitor, clock=self.clock)
        if self.collect:
            self.run_worker(self.source.run(self.monitor), name="collect", group="collect", exit_on_error=False)
        every = self.render_every_s if self.render_every_s is not None else max(0.5, self.fleet.poll_interval_s)
        self.rounds = TickRounds(every, follows_arrivals=self.DRAW_ON_ARRIVAL and not self.source.drives_ticks)
        self._render_timer = self.set_interval(self.rounds.timer_period_s, self.refresh_views, name="render")
        if self.freeze_gc:
            self.set_timer(FREEZE_AFTER_S, self._freeze_startup, name="gc-freeze")

    def _exit_on_signals(self) -> None:
        """SIGTERM and SIGHUP end the app the way quitting does, so the terminal leaves the alternate
        screen and gets its cursor back; their default action would kill the process and leave the
        terminal as the app had set it. Not under a test's headless driver: the process is pytest's."""
        if self.is_headless:
            return
        loop = asyncio.get_running_loop()
        for sig in EXIT_SIGNALS:
            before = signal.getsignal(sig)
            try:
                loop.add_signal_handler(sig, self.exit)
            except (RuntimeError, ValueError):  # not the main thread: the signals stay as they were
                return
            self._signals_before[sig] = before

    def _restore_signals(self) -> None:
        loop = asyncio.get_running_loop()
        for sig, before in self._signals_before.items():
            loop.remove_signal_handler(sig)
            if before is not None:
                signal.signal(sig, before)
        self._signals_before.clear()

    def _freeze_startup(self) -> None:
        """Python's full collections walk every tracked object: at 64 nodes one took ~220 ms
        (benchmarks/bench_scale.py with gc callbacks), and a key pressed meanwhile waited for it. What
        exists a few seconds in (modules, classes, Textual's styles and screens, the fleet's state)
        lives as long as the app; moved out of the generations once (``gc.freeze``), the full
        collections walk only what came since. Not for tests: frozen cycles are never collected."""
        gc.freeze()

    # --- what the core knows, for the screens -------------------------------------------------------

    @property
    def state(self) -> FleetState:
        return self.monitor.state

    @property
    def history(self) -> History:
        return self.monitor.history

    @property
    def views(self) -> tuple[NodeView, ...]:
        return self.monitor.views

    @property
    def findings(self) -> dict[str, tuple[Finding, ...]]:
        return self.monitor.findings

    @property
    def diagnosis(self) -> DiagnosisEngine:
        return self.monitor.diagnosis

    @property
    def alerts(self) -> AlertEngine:
        return self.monitor.alerts  # shown here; sparktui watch sends them

    @property
    def signature_patterns(self) -> tuple[re.Pattern[str], ...]:
        return self.monitor.signature_patterns

    @property
    def poll_errors(self) -> deque[str]:
        return self.monitor.errors

    @property
    def window_s(self) -> float:
        return self.monitor.window_s or WINDOW_S

    # --- MonitorSubscriber: what the core publishes -------------------------------------------------

    def arrived(self, node: str) -> None:
        """An observation of ``node`` reached the core: its row is drawn within ``ARRIVAL_DELAY_S``.
        Before the app runs (a core fed ahead, as a test does) there is nothing to draw yet: the
        first tick draws everything."""
        if self.DRAW_ON_ARRIVAL and self.is_running:
            self._arrived.add(node)
            if not self._arrival_pending:
                self._arrival_pending = True
                self.set_timer(ARRIVAL_DELAY_S, self._draw_arrivals, name="arrivals")

    def failed(self, node: str, line: str) -> None:
        if self.is_running:
            self.notify(f"{node}: {line}", severity="error")

    def ticked(self, now: float, events: tuple[AlertEvent, ...]) -> None:
        pass  # drawn by the render tick (``refresh_views``), which ticks a live core itself

    def restarted(self) -> None:
        pass  # only a replay starts the core again (``ReplayApp``)

    async def on_unmount(self) -> None:
        self._restore_signals()
        await self.actions.close()

    # --- rendering ----------------------------------------------------------------------------------

    def _theme_changed(self) -> None:
        self.colours = palette(self.get_css_variables())
        self.refresh_views(force=True)

    def refresh_views(self, force: bool = False) -> None:
        """The render tick: the core ticked (unless the source carries the clock: a recording ticks the
        core itself), the screen redrawn."""
        if not self.source.drives_ticks:
            self.rounds.ticked(self.timer_clock())
            self.monitor.tick(self.clock())
        self._draw(force)

    def _draw(self, force: bool = False) -> None:
        if (self.paused and not force) or not self.screen_stack:
            return
        screen = self.screen
        if isinstance(screen, (FleetScreen, NodeScreen, KioskScreen, LogScreen)):
            with self.batch_update():
                screen.update_views(self.views)

    def _draw_arrivals(self) -> None:
        """The nodes observed since the last frame: their views again, their rows (or node screen) drawn."""
        self._arrival_pending = False
        names, self._arrived = self._arrived, set()
        if self.paused or not self.screen_stack or not self.views:
            return  # before the first tick there is nothing to patch; the tick draws everything
        screen = self.screen
        # On a node screen the round is its node's: ticked at another node's arrival, it would be drawn
        # again a moment later at its own.
        ours = not isinstance(screen, NodeScreen) or screen.node in names
        if ours and self.rounds.round_due(self.timer_clock()) and self._render_timer is not None:
            self.refresh_views()  # the tick, early or a little late: every row drawn once this round
            self._render_timer.reset()
            return
        fresh = self.monitor.views_of(names, self.clock())
        if isinstance(screen, FleetScreen) or (isinstance(screen, NodeScreen) and screen.node in fresh):
            with self.batch_update():
                screen.update_views(self.views, changed=frozenset(fresh))

    # --- navigation ---------------------------------------------------------------------------------

    def open_node(self, name: str, instance: str | None = None) -> None:
        """The node's screen, its engine panels on ``instance`` (None: as it was, or the first)."""
        screen = self._node_screen(name)
        if instance is not None:
            node_screen = self.get_screen(screen) if isinstance(screen, str) else screen
            if isinstance(node_screen, NodeScreen):
                node_screen.instance = instance
        self.push_screen(screen)

    def _node_screen(self, name: str) -> NodeScreen | str:
        """The node's screen: kept composed (installed) for the last NODE_SCREENS_KEPT nodes opened, so
        going back to one is a redraw instead of composing and mounting twenty widgets again."""
        if self.NODE_SCREENS_KEPT <= 0:
            return NodeScreen(name)
        key = f"node:{name}"
        if key in self._kept_screens:
            self._kept_screens.remove(key)
        elif not self.is_screen_installed(key):
            self.install_screen(NodeScreen(name), key)
        self._kept_screens.append(key)
        while len(self._kept_screens) > self.NODE_SCREENS_KEPT:
            oldest = self._kept_screens.pop(0)
            if self.get_screen(oldest) in self.screen_stack:
                self._kept_screens.insert(0, oldest)  # still shown somewhere below: keep it for now
                break
            screen = self.get_screen(oldest)
            self.uninstall_screen(oldest)
            # Textual removes a screen only as it is popped or switched away; one uninstalled while
            # hidden would stay mounted, its widgets' message pumps running, for ever.
            screen.remove()
        return key

    def open_logs(self, name: str) -> None:
        self.push_screen(LogScreen(name))

    def close_node(self) -> None:
        if isinstance(self.screen, NodeScreen):
            self.pop_screen()

    def step_node(self, current: str, step: int) -> None:
        names = [v.name for v in self.views]
        if current not in names:
            return
        target = names[(names.index(current) + step) % len(names)]
        self.switch_screen(self._node_screen(target))

    # --- logs and findings --------------------------------------------------------------------------

    def log_buffers(self, node_name: str) -> Mapping[str, LogBuffer]:
        return self.monitor.node_logs(node_name)

    # --- modes --------------------------------------------------------------------------------------

    def _apply_keymap(self) -> None:
        keymap = dict(self.fleet.keymap)
        unknown = sorted(set(keymap) - binding_ids())
        for key_id in unknown:
            self.notify(f"config keymap: no binding has the id {key_id!r}; see docs/keys.md", severity="warning")
            keymap.pop(key_id)
        if self.fleet.kiosk.unlock_key:
            keymap[UNLOCK_ID] = self.fleet.kiosk.unlock_key
        self.set_keymap(keymap)

    def check_action(self, action: str, parameters: tuple[object, ...]) -> bool | None:
        """The kiosk takes no input but its unlock key; read-only refuses the table's actions."""
        if self.kiosk:
            return action == "unlock" and bool(self.fleet.kiosk.unlock_key)
        return not (self.read_only and action == "act" and parameters[:1] in _REFUSED_READ_ONLY)

    @property
    def _mode(self) -> Mode | None:
        return Mode.KIOSK if self.kiosk else Mode.READ_ONLY if self.read_only else None

    def unlock_kiosk(self) -> None:
        """The unlock key: leave the kiosk for the (still read-only) dashboard."""
        if not self.kiosk:
            return
        self.kiosk = False
        self.switch_screen(FleetScreen())
        self.refresh_bindings()

    # --- actions: the table's, through the controller -----------------------------------------------

    def current_node(self) -> str | None:
        """The node an action key applies to: the one shown, or the one highlighted in the fleet."""
        screen = self.screen
        if isinstance(screen, (NodeScreen, LogScreen)):
            return screen.node
        if isinstance(screen, FleetScreen):
            view = screen.highlighted()
            return view.name if view is not None else None
        return None

    def current_instance(self) -> str | None:
        """The instance an action key applies to: the one the node screen shows, or the highlighted fleet
        row's (a node may run a llama.cpp fallback beside its vLLM); None: the node's own choice."""
        screen = self.screen
        if isinstance(screen, NodeScreen):
            return screen.shown_instance()
        if isinstance(screen, FleetScreen):
            return screen.highlighted_instance()
        return None

    async def run_action(
        self,
        action: str | ActionParseResult,
        default_namespace: DOMNode | None = None,
        namespaces: Mapping[str, DOMNode] | None = None,
    ) -> bool:
        """An action's key (or any other way to run it) in read-only or kiosk mode goes to the
        controller, which refuses it and audits the refusal; ``check_action`` alone would drop the key
        without a trace."""
        if isinstance(action, str) and self._mode is not None:
            _, name, parameters = parse(action)
            if name == "act" and parameters[:1] in _REFUSED_READ_ONLY | _REFUSED_KIOSK:
                self.start_action(str(parameters[0]))
                return True
        return await super().run_action(action, default_namespace, namespaces)

    def action_act(self, action_id: str) -> None:
        """Every key of the table (``act('drop-caches')``): its id is its one name."""
        self.start_action(action_id)

    def start_action(self, action_id: str, node: str | None = None) -> None:
        """The table's action ``action_id`` on ``node`` (the current one when None), through the
        controller: plan, refuse, confirm (a dialog that names node, target and exact commands), run,
        audit. Every refusal is written to the audit log, wherever it is decided."""
        spec = action_spec(action_id)
        if spec is not None:
            # The node, its instance and the mode as the key is pressed.
            instance = self.current_instance() if node is None else None
            node = node or self.current_node()
            self.run_worker(self._request(spec, node, self._mode, instance), group="actions", exit_on_error=False)

    async def _request(
        self, spec: ActionSpec, node: str | None, mode: Mode | None, instance: str | None = None
    ) -> ActionResult:
        jobs: list[BenchJob] = []  # the bench the dialog showed, the one that runs
        running: list[RunningAction] = []  # this request's action, once confirmed

        async def plan(spec: ActionSpec, node: str) -> Plan | Refusal:
            shown = Shown(self.fleet, self.views, self.findings, self.diagnosis.catalogue)
            return plan_for(spec, node, shown, instance=instance)

        async def confirm(planned: Plan) -> bool:
            answer: asyncio.Future[bool] = asyncio.get_running_loop().create_future()
            if isinstance(planned, BenchPlan):
                jobs.append(bench_job(planned))
                self.push_screen(ConfirmBench(planned, jobs[-1]), lambda ok: answer.set_result(bool(ok)))
            else:
                self.push_screen(ConfirmAction(planned), lambda ok: answer.set_result(bool(ok)))
            return await answer

        def refused(_where: str, reason: str) -> None:
            if mode is not Mode.KIOSK:  # the kiosk shows nothing it was not asked to
                self.notify(reason, severity="warning", timeout=8)

        return await self.controller.request(
            spec,
            node,
            mode=mode,
            plan=plan,
            confirm=confirm,
            refused=refused,
            progress=lambda message: self._progress(running, message),
            run_bench=lambda _planned: partial(self._show_bench, jobs[-1]),
            before_run=lambda planned: self._before_run(planned, running),
            after_run=lambda planned, result: self._after_run(planned, result, running),
        )

    def _before_run(self, plan: Plan, running: list[RunningAction]) -> None:
        """Confirmed: on screen from its first second ("Recent actions", the action log, the node's
        title), not as toasts that pile over the table."""
        action = RunningAction(plan.title, self.clock(), fmt_clock(time.time()), nodes=plan.nodes)
        running.append(action)
        self.running_actions.append(action)
        self._draw(force=True)

    def _progress(self, running: list[RunningAction], message: str) -> None:
        if running:
            running[-1].heard(message)
            self._draw()  # a paused screen stays as it was: the line is there when it resumes

    def _after_run(self, plan: Plan, result: ActionResult | None, running: list[RunningAction]) -> None:
        for action in running:
            if action in self.running_actions:
                self.running_actions.remove(action)
        if result is None:  # cancelled: sparktui is stopping
            return
        self.action_results.append(result)
        self.action_log.append((fmt_clock(time.time()), result.lines()))
        self.notify(result.message, severity="information" if result.ok else "error", timeout=12)
        self.refresh_views(force=True)

    async def _show_bench(self, job: BenchJob) -> BenchRun | str:
        """The bench's screen: its progress and table live; escape stops it and keeps what finished.
        Its end (the run, or why it did not start) goes back to the runner's audit."""
        ended: asyncio.Future[BenchRun | str] = asyncio.get_running_loop().create_future()

        def end(outcome: BenchRun | str) -> None:
            if not ended.done():
                ended.set_result(outcome)

        self.push_screen(BenchScreen(job, ca_file=self.fleet.ca_file, on_end=end))
        return await ended

    def action_action_log(self) -> None:
        self.push_screen(ActionLogScreen(self.action_log, self.running_actions, self.clock))

    def firing_alerts(self) -> list[tuple[str, str]]:
        """The firing, unsilenced alerts, worst first: (severity, one line) each, for the banners."""
        now = self.clock()
        return [
            (a.severity.value, f"{a.severity.value.upper()} {a.node} {a.name}: {a.summary}")
            for a in self.alerts.active()
            if self.alerts.silenced_until(a.key, now) is None
        ]

    def own_problems(self) -> list[str]:
        """What stopped working in sparktui itself, one line each for the banners: a recording whose
        disk filled up (the dashboard goes on without it)."""
        return list(self.monitor.observer_problems())

    def alert_banner(self) -> list[str]:
        """The firing, unsilenced alerts as one line each, worst first (for the screens' banners)."""
        return [line for _, line in self.firing_alerts()]

    def action_alerts(self) -> None:
        self.push_screen(AlertsScreen())

    def action_findings(self) -> None:
        self.push_screen(FindingsScreen())

    def action_drift(self) -> None:
        self.push_screen(DriftScreen(drift_report(self.state)))

    # --- actions ------------------------------------------------------------------------------------

    def action_help(self) -> None:
        self.push_screen(HelpScreen())

    @property
    def theme_names(self) -> list[str]:
        return list(self._theme_names)

    def action_cycle_theme(self) -> None:
        names = self._theme_names or [DEFAULT_THEME]
        current = self.theme if self.theme in names else names[0]
        self.theme = names[(names.index(current) + 1) % len(names)]
        self.notify(f"theme: {self.theme}", timeout=2)

    def action_toggle_pause(self) -> None:
        self.paused = not self.paused
        self.refresh_views(force=True)

    def action_screenshot(self, filename: str | None = None, path: str | None = None) -> None:
        """f8: the screen as an SVG, in the folder sparktui was started from (``path`` when given), named
        by the local time; the notification gives the full path, or why it could not be written.
        (Textual's own would deliver it to a Downloads folder a server seldom has, and say nothing.)"""
        try:
            folder = Path(path).expanduser() if path else Path.cwd()
        except OSError as exc:
            self.notify(
                f"screenshot not saved: the current folder cannot be read ({exc.strerror or exc}); "
                "start sparktui from a folder you can write to",
                severity="error",
                timeout=10,
            )
            return
        stamp = time.strftime("%Y%m%d-%H%M%S")
        target = folder.absolute() / (filename or f"sparktui-{stamp}.svg")
        taken = 1
        while filename is None and target.exists():  # two in one second
            taken += 1
            target = target.with_name(f"sparktui-{stamp}-{taken}.svg")
        try:
            target.write_text(self.export_screenshot(), encoding="utf-8")
        except OSError as exc:
            self.notify(
                f"screenshot not saved: cannot write {target} ({exc.strerror or exc}); "
                "start sparktui from a folder you can write to",
                severity="error",
                timeout=10,
            )
            return
        self.notify(f"screenshot saved: {target}", timeout=10)


_REFUSED_READ_ONLY = {(action,) for action in refused_in(Mode.READ_ONLY)}
_REFUSED_KIOSK = {(action,) for action in refused_in(Mode.KIOSK)}


def make_app(fleet: FleetSpec, **options: object) -> SparkApp:
    """The app factory the CLI, the tests and the screenshot command share."""
    return SparkApp(fleet, **options)  # type: ignore[arg-type]
