"""``sparktui serve``: the dashboard in a browser, through textual-serve.

Each browser session gets its own dashboard process (``python -m sparktui --config FILE``, with
``--kiosk`` or ``--read-only``), driven over a websocket by textual-serve's terminal page. This module
decides who may open the page and with which powers:

- The dashboards are read-only unless ``--allow-actions``, which needs an access token, on loopback
  too (any local user, and any page in a local browser, can reach a loopback port), and is refused with
  ``--kiosk`` (the kiosk takes no input at all).
- An optional access token (``--token-file`` or ``--token-env``): a request without it gets 401. The
  browser brings it once as ``?token=…``; the answer moves it into an HttpOnly cookie and redirects to
  the same page without it. Tokens are compared as SHA-256 digests with ``hmac.compare_digest``
  (constant time, length included), and never logged: the access log has no query strings.
- On loopback, a page asked for under another host name is refused (DNS rebinding), and everywhere a
  websocket opened by a page of another origin is refused (websockets are not covered by CORS).

and keeps a wall screen alive without anybody at it: a session ends when its dashboard ends, however it
ends (textual-serve would leave a dead dashboard's last picture on the page), and the kiosk's page
reopens a session that ended or went silent as soon as the server answers again.

The options are ``sparktui.cli.serve``'s; ``main`` serves what they ask for.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import functools
import hashlib
import hmac
import ipaddress
import json
import logging
import os
import re
import shlex
import signal
import stat
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from aiohttp import web
    from aiohttp.typedefs import Handler, Middleware

MIN_TOKEN_CHARS = 16
TOKEN_QUERY = "token"
TOKEN_COOKIE = "sparktui_token"
EXIT_USAGE = 2
DEMO_START_TIMEOUT_S = 60.0
STOP_TIMEOUT_S = 10.0

log = logging.getLogger("sparktui.serve")


class UsageError(Exception):
    """A combination of options that cannot be served; the message is one sentence for the user."""


# --- who may do what: pure decisions, tested without binding anything ---------------------------------


def is_loopback(host: str) -> bool:
    """True for ``localhost`` and loopback addresses. Any other name counts as reachable from the
    network: it is not resolved, so a name that happens to point at 127.0.0.1 is treated with care."""
    name = host.strip().strip("[]").lower()
    if name == "localhost":
        return True
    try:
        return ipaddress.ip_address(name).is_loopback
    except ValueError:
        return False


@dataclass(frozen=True, slots=True)
class Access:
    """What the served dashboards may do."""

    kiosk: bool
    read_only: bool
    loopback: bool

    def dashboard_flags(self) -> list[str]:
        if self.kiosk:
            return ["--kiosk"]  # read-only by construction
        return ["--read-only"] if self.read_only else []

    def describe(self) -> str:
        if self.kiosk:
            return "kiosk (read-only, takes no input)"
        return "read-only" if self.read_only else "actions allowed"


def resolve_access(host: str, *, kiosk: bool, read_only: bool, allow_actions: bool, has_token: bool) -> Access:
    """The powers of the served dashboards from the options; raises ``UsageError`` on a contradiction."""
    loopback = is_loopback(host)
    if allow_actions and kiosk:
        raise UsageError("sparktui serve: --allow-actions and --kiosk contradict each other: the kiosk takes no input")
    if allow_actions and read_only:
        raise UsageError("sparktui serve: --allow-actions and --read-only contradict each other; pick one")
    if allow_actions and not has_token:
        where = "even on loopback (any local user or web page can reach the port)" if loopback else f"on {host}"
        raise UsageError(
            f"sparktui serve: --allow-actions needs an access token (--token-file or --token-env) {where}, "
            "or whoever reaches the port could restart your vLLMs"
        )
    return Access(kiosk=kiosk, read_only=kiosk or read_only or not allow_actions, loopback=loopback)


def token_digest(token: str) -> bytes:
    return hashlib.sha256(token.encode("utf-8")).digest()


def token_matches(candidate: str | None, digest: bytes) -> bool:
    """Constant time in the candidate's content and length: both sides are hashed to 32 bytes first."""
    if candidate is None:
        return False
    return hmac.compare_digest(token_digest(candidate), digest)


def read_token(token_file: Path | None, token_env: str | None, environ: dict[str, str] | None = None) -> str | None:
    """The access token from a file or an environment variable (which is then removed from ``environ``,
    so the dashboards started per session do not inherit it). None when neither is given."""
    env = os.environ if environ is None else environ
    if token_file is not None:
        try:
            lines = token_file.read_text(encoding="utf-8").strip().splitlines()
        except FileNotFoundError:
            raise UsageError(f"sparktui serve: --token-file {token_file}: no such file") from None
        except OSError as exc:
            raise UsageError(f"sparktui serve: --token-file {token_file}: cannot read it: {exc.strerror}") from None
        token = lines[0].strip() if lines else ""
        source = f"--token-file {token_file}"
        with contextlib.suppress(OSError):
            if token_file.stat().st_mode & (stat.S_IRWXG | stat.S_IRWXO):
                print(f"sparktui serve: warning: {token_file} is readable by others; chmod 600 it", file=sys.stderr)
    elif token_env is not None:
        token = env.pop(token_env, "").strip()
        source = f"--token-env {token_env}"
        if not token:
            raise UsageError(f"sparktui serve: {source}: the variable is not set or empty")
    else:
        return None
    if len(token) < MIN_TOKEN_CHARS:
        raise UsageError(
            f"sparktui serve: {source}: the token is shorter than {MIN_TOKEN_CHARS} characters; "
            "make one with: openssl rand -hex 16"
        )
    return token


def dashboard_command(config: Path, access: Access, theme: str | None) -> str:
    """The shell command textual-serve starts for each browser session (``exec``: no shell left over)."""
    argv = [sys.executable, "-m", "sparktui", "--config", str(config.resolve()), *access.dashboard_flags()]
    if theme:
        argv += ["--theme", theme]
    return "exec " + shlex.join(argv)


# --- the web app ----------------------------------------------------------------------------------------


@dataclass(slots=True)
class ServeSettings:
    command: str
    access: Access
    title: str
    max_sessions: int
    font_size: int
    token_digest: bytes | None = field(default=None, repr=False)


# The page textual-serve ships asks Google for its font; a closet network often has no internet, and the
# same font ships in textual-serve's static folder.
_WEB_FONT = re.compile(r'<link\s+rel="stylesheet"\s+href="https://fonts\.googleapis\.com[^>]*>', re.DOTALL)
_LOCAL_FONT = (
    "<style>@font-face { font-family: 'Roboto Mono'; "
    "src: url('{{ config.static.url }}fonts/RobotoMono-VariableFont_wght.ttf') format('truetype'); }</style>"
)

# The session's websocket on the address the browser used, whatever a proxy in between calls this server.
_SAME_ADDRESS = """<script>
window.addEventListener("DOMContentLoaded", () => {
  const address = (location.protocol === "https:" ? "wss://" : "ws://") + location.host + "/ws";
  document.querySelectorAll(".textual-terminal").forEach((t) => { t.dataset.sessionWebsocketUrl = address; });
});
</script>
"""

# A wall screen has nobody to press textual-serve's "Restart": in the kiosk the page reopens a session that
# ended (the server restarted, the network went away, the dashboard stopped) as soon as the server answers
# again, and treats a connection silent for ``stall`` seconds (default KIOSK_STALL_S, ``?stall=N`` in the
# address) as gone: it pings the server every quarter of that, and the server answers.
KIOSK_STALL_S = 30
_KIOSK_RECONNECT = """<script>
(function () {
  const asked = Number(new URLSearchParams(location.search).get("stall"));
  const stallMs = 1000 * Math.max(2, asked || {{ stall_s }});
  const Native = window.WebSocket;
  let socket = null, last = Date.now(), reconnecting = false;
  async function reconnect() {
    if (reconnecting) return;
    reconnecting = true;
    for (;;) {
      await new Promise((done) => setTimeout(done, stallMs / 4));
      try {
        const answer = await fetch(location.href, {cache: "no-store", signal: AbortSignal.timeout(stallMs / 2)});
        if (answer.ok) { location.reload(); return; }
      } catch (error) { /* not yet */ }
    }
  }
  window.WebSocket = function (url, protocols) {
    socket = new Native(url, protocols);
    last = Date.now();
    socket.addEventListener("message", () => { last = Date.now(); });
    socket.addEventListener("close", reconnect);
    return socket;
  };
  window.WebSocket.prototype = Native.prototype;
  Object.assign(window.WebSocket, {CONNECTING: 0, OPEN: 1, CLOSING: 2, CLOSED: 3});
  setInterval(() => {
    if (socket === null || socket.readyState !== Native.OPEN) return;
    if (Date.now() - last > stallMs) { socket.close(); reconnect(); return; }
    socket.send(JSON.stringify(["ping", String(Date.now())]));
  }, stallMs / 4);
})();
</script>"""


def _https(request: web.Request) -> bool:
    # Behind a TLS proxy the page is https and its websocket must be wss (the proxy says so).
    return request.secure or request.headers.get("X-Forwarded-Proto", "").lower() == "https"


def _same_origin(request: web.Request) -> bool:
    """A websocket opened by a page of this server (a browser always says which page opened it; a page
    cannot forge it, nor add headers to a websocket). Behind a proxy the page's host is the one the
    proxy forwards as X-Forwarded-Host."""
    origin = request.headers.get("Origin")
    if origin is None:
        return True  # not a browser: the token, if any, still applies
    host = origin.split("://", 1)[-1]
    forwarded = request.headers.get("X-Forwarded-Host", "").split(",")[0].strip()
    return host == request.host or (bool(forwarded) and host == forwarded)


def _without_token(request: web.Request) -> str:
    query = [(k, v) for k, v in request.query.items() if k != TOKEN_QUERY]
    url = request.rel_url.with_query(query) if query else request.rel_url.with_query(None)
    return str(url)


def _access_checks(settings: ServeSettings) -> list[Middleware]:
    """What every request passes first: the loopback rule, then the access token."""
    from aiohttp import web

    @web.middleware
    async def same_host(request: web.Request, handler: Handler) -> web.StreamResponse:
        if settings.access.loopback and not is_loopback(request.url.host or ""):
            return web.Response(status=403, text="sparktui serve: open this page as localhost or 127.0.0.1\n")
        return await handler(request)

    @web.middleware
    async def token_required(request: web.Request, handler: Handler) -> web.StreamResponse:
        digest = settings.token_digest
        if digest is None:
            return await handler(request)
        from_query = request.query.get(TOKEN_QUERY)
        if token_matches(from_query, digest):
            assert from_query is not None
            if request.method == "GET" and request.path == "/":
                # The token leaves the address bar (and the history); the cookie carries it from now on.
                moved = web.Response(status=303, headers={"Location": _without_token(request)})
                moved.set_cookie(
                    TOKEN_COOKIE, from_query, httponly=True, samesite="Lax", secure=_https(request), path="/"
                )
                return moved
            return await handler(request)
        bearer = request.headers.get("Authorization", "")
        if bearer.startswith("Bearer ") and token_matches(bearer.removeprefix("Bearer ").strip(), digest):
            return await handler(request)
        if token_matches(request.cookies.get(TOKEN_COOKIE), digest):
            return await handler(request)
        return web.Response(
            status=401,
            text="sparktui serve: this page needs its access token: open it once as /?token=TOKEN\n",
            headers={"WWW-Authenticate": 'Bearer realm="sparktui"'},
        )

    return [same_host, token_required]


def _page_template(path: Path, *, kiosk: bool) -> str:
    """textual-serve's page with its web font made local and our scripts in its head."""
    template = _WEB_FONT.sub(_LOCAL_FONT, path.read_text(encoding="utf-8"))
    head = _SAME_ADDRESS + (_KIOSK_RECONNECT if kiosk else "")
    return template.replace("<head>", "<head>\n" + head, 1)


def make_web_app(settings: ServeSettings) -> web.Application:
    """The aiohttp app: textual-serve's page, static files and dashboard processes, behind the access
    checks of this module."""
    import aiohttp_jinja2
    import jinja2
    from aiohttp import web
    from textual_serve.server import Server

    server = Server(settings.command, title=settings.title)
    session_app = _session_app_class()
    sessions: set[asyncio.Task[Any]] = set()

    async def index(request: web.Request) -> web.StreamResponse:
        try:
            font_size = min(64, max(6, int(request.query.get("fontsize", settings.font_size))))
        except ValueError:
            font_size = settings.font_size
        scheme = "wss" if _https(request) else "ws"
        context = {
            "stall_s": KIOSK_STALL_S,
            "font_size": font_size,
            "app_websocket_url": f"{scheme}://{request.host}/ws",
            "config": {"static": {"url": "/static/"}},
            "application": {"name": settings.title},
        }
        return aiohttp_jinja2.render_template("app_index.html", request, context)

    async def session(request: web.Request) -> web.StreamResponse:
        if not _same_origin(request):
            return web.Response(status=403, text="sparktui serve: websocket from another origin refused\n")
        websocket = web.WebSocketResponse(heartbeat=15)
        if not websocket.can_prepare(request).ok:
            return web.Response(status=400, text="sparktui serve: /ws is the page's websocket\n")
        if len(sessions) >= settings.max_sessions:
            return web.Response(status=503, text="sparktui serve: too many sessions open (--max-sessions)\n")
        task = asyncio.current_task()
        assert task is not None
        sessions.add(task)
        try:
            await websocket.prepare(request)
            dashboard = session_app(
                settings.command,
                write_bytes=websocket.send_bytes,
                write_str=websocket.send_str,
                close=websocket.close,
                download_manager=server.download_manager,
            )
            await dashboard.start(_cells(request, "width", 80), _cells(request, "height", 24))
            try:
                await _relay(websocket, dashboard)
            finally:
                await dashboard.stop()  # tells the dashboard to quit and waits for it
        except asyncio.CancelledError:
            await websocket.close()
        except Exception:
            log.exception("sparktui serve: a session failed")
        finally:
            sessions.discard(task)
        return websocket

    async def end_sessions(_app: web.Application) -> None:
        """On shutdown each open session is cancelled: textual-serve then tells its dashboard to quit."""
        for task in list(sessions):
            task.cancel()
        if sessions:
            await asyncio.wait(list(sessions), timeout=STOP_TIMEOUT_S)

    app = web.Application(middlewares=_access_checks(settings))
    template = _page_template(server.templates_path / "app_index.html", kiosk=settings.access.kiosk)
    aiohttp_jinja2.setup(app, loader=jinja2.DictLoader({"app_index.html": template}))
    app.add_routes(
        [
            web.get("/", index, name="index"),
            web.get("/ws", session, name="websocket"),
            web.get("/download/{key}", server.handle_download, name="download"),
            web.static("/static", server.statics_path, name="static"),
        ]
    )
    app.on_shutdown.append(end_sessions)
    return app


def _cells(request: web.Request, name: str, default: int) -> int:
    try:
        return min(1000, max(10, int(request.query.get(name, default))))
    except ValueError:
        return default


async def _relay(websocket: web.WebSocketResponse, dashboard: Any) -> None:
    """What the page sends, to the dashboard: keys and mouse (stdin), its size, focus; pings answered here.
    Anything else, or anything malformed, is dropped."""
    from aiohttp import WSMsgType

    async for message in websocket:
        if message.type != WSMsgType.TEXT:
            continue
        try:
            envelope = json.loads(message.data)
        except (ValueError, RecursionError):
            continue
        if not isinstance(envelope, list) or not envelope:
            continue
        kind, payload = envelope[0], envelope[1] if len(envelope) > 1 else None
        if kind == "stdin" and isinstance(payload, str):
            await dashboard.send_bytes(payload.encode("utf-8"))
        elif kind == "resize" and isinstance(payload, dict):
            width, height = payload.get("width"), payload.get("height")
            if isinstance(width, int) and isinstance(height, int) and 0 < width <= 1000 and 0 < height <= 1000:
                await dashboard.set_terminal_size(width, height)
        elif kind == "ping" and isinstance(payload, str):
            await websocket.send_json(["pong", payload])
        elif kind == "blur":
            await dashboard.blur()
        elif kind == "focus":
            await dashboard.focus()


def _session_app_class() -> type[Any]:
    from textual_serve.app_service import AppService

    class SessionApp(AppService):
        """textual-serve's dashboard process, whose end (however it comes) ends the browser's session.
        textual-serve closes the page only when the dashboard says goodbye: one that crashed or was killed
        would leave its last picture frozen on the wall, looking alive."""

        async def run(self) -> None:
            try:
                await super().run()
            finally:
                with contextlib.suppress(Exception):
                    await self.remote_close()

    return SessionApp


def _access_logger() -> type[Any]:
    from aiohttp.abc import AbstractAccessLogger
    from aiohttp.web_request import BaseRequest
    from aiohttp.web_response import StreamResponse

    class PathOnlyAccessLog(AbstractAccessLogger):
        """The access log without query strings or headers: the token never reaches it."""

        def log(self, request: BaseRequest, response: StreamResponse, time: float) -> None:
            self.logger.info('%s "%s %s" %d %.3fs', request.remote, request.method, request.path, response.status, time)

    return PathOnlyAccessLog


async def _run_server(app: web.Application, host: str, port: int, banner: str) -> None:
    from aiohttp import web

    runner = web.AppRunner(app, access_log_class=_access_logger(), handle_signals=False, shutdown_timeout=5.0)
    await runner.setup()
    try:
        site = web.TCPSite(runner, host, port)
        await site.start()
        stop = asyncio.Event()
        loop = asyncio.get_running_loop()
        for sig in (signal.SIGINT, signal.SIGTERM, signal.SIGHUP):
            loop.add_signal_handler(sig, stop.set)
        for address in runner.addresses:
            bound_host, bound_port = address[0], address[1]
            shown = f"[{bound_host}]" if ":" in bound_host else bound_host
            print(f"sparktui serve: http://{shown}:{bound_port}/  {banner}", flush=True)
        await stop.wait()
    finally:
        await runner.cleanup()
        await _end_dashboards()


def _is_dashboard(process: Any) -> bool:
    """A dashboard of a browser session (``dashboard_command``), not the demo fleet."""
    import psutil

    try:
        return "--config" in process.cmdline()
    except psutil.Error:
        return False


async def _end_dashboards() -> None:
    """The sessions were told to quit: wait for their dashboards, stop the ones that do not go, and let
    the event loop see them exit (it owns their pipes and reaps them, so they are polled, not waited on)."""
    import psutil

    def dashboards() -> list[Any]:
        return [c for c in psutil.Process().children() if _is_dashboard(c)]

    if not await _poll_until(lambda: not dashboards(), STOP_TIMEOUT_S):
        for child in dashboards():
            with contextlib.suppress(psutil.Error):
                child.terminate()
        if not await _poll_until(lambda: not dashboards(), STOP_TIMEOUT_S / 2):
            for child in dashboards():
                with contextlib.suppress(psutil.Error):
                    child.kill()
    await asyncio.sleep(0.2)


async def _poll_until(done: Callable[[], bool], timeout_s: float, every_s: float = 0.1) -> bool:
    for _ in range(round(timeout_s / every_s)):
        if done():
            return True
        await asyncio.sleep(every_s)
    return done()


def _stop_children() -> None:
    """The last word: no process serve started outlives it."""
    import psutil

    children = psutil.Process().children(recursive=True)
    for child in children:
        with contextlib.suppress(psutil.Error):
            child.terminate()
    _gone, alive = psutil.wait_procs(children, timeout=STOP_TIMEOUT_S)
    for child in alive:
        with contextlib.suppress(psutil.Error):
            child.kill()


@contextlib.contextmanager
def _demo_fleet() -> Iterator[Path]:
    """The demo fleet in a child process, as ``sparktui demo`` starts it; yields its config file."""
    with tempfile.TemporaryDirectory(prefix="sparktui-serve-demo-") as tmp:
        config = Path(tmp) / "demo.toml"
        output = Path(tmp) / "demo.log"
        command = [sys.executable, "-m", "sparktui", "demo", "--serve-only", "--write-config", str(config)]
        with output.open("wb") as out:
            child = subprocess.Popen(command, stdout=out, stderr=subprocess.STDOUT)
        try:
            deadline = time.monotonic() + DEMO_START_TIMEOUT_S
            while not config.exists():
                if child.poll() is not None or time.monotonic() > deadline:
                    raise UsageError(f"sparktui serve: the demo fleet did not start:\n{output.read_text()}")
                time.sleep(0.05)
            time.sleep(0.1)  # written in one go, but let the servers settle
            yield config
        finally:
            child.terminate()
            try:
                child.wait(timeout=STOP_TIMEOUT_S)
            except subprocess.TimeoutExpired:
                child.kill()


# --- the command ----------------------------------------------------------------------------------------


def _config_path(args: argparse.Namespace) -> Path:
    from sparktui.config import ConfigError, default_config_path, load_config

    path: Path = getattr(args, "config", None) or default_config_path()
    try:
        # Errors here, in one sentence, rather than in every browser session; so is a warning.
        load_config(path, warn=functools.partial(print, file=sys.stderr))
    except ConfigError as exc:
        raise UsageError(str(exc)) from None
    return path


def main(args: argparse.Namespace) -> int:
    kiosk = bool(getattr(args, "kiosk", False))
    try:
        if not 0 <= args.port <= 65535:
            raise UsageError(f"sparktui serve: --port {args.port}: not a port (0 to 65535)")
        if args.max_sessions < 1:
            raise UsageError("sparktui serve: --max-sessions must be at least 1")
        if args.demo and getattr(args, "config", None) is not None:
            raise UsageError("sparktui serve: --demo serves its own fleet; drop --config")
        token = read_token(args.token_file, args.token_env)
        access = resolve_access(
            args.host,
            kiosk=kiosk,
            read_only=bool(getattr(args, "read_only", False)),
            allow_actions=args.allow_actions,
            has_token=token is not None,
        )
        if not access.loopback and token is None:
            print(
                f"sparktui serve: warning: {args.host} is not loopback and there is no access token: anyone who "
                "reaches the port sees the fleet (--token-file adds one)",
                file=sys.stderr,
            )
        with contextlib.ExitStack() as stack:
            config = stack.enter_context(_demo_fleet()) if args.demo else _config_path(args)
            settings = ServeSettings(
                command=dashboard_command(config, access, getattr(args, "theme", None)),
                access=access,
                title="sparktui kiosk" if kiosk else "sparktui",
                token_digest=token_digest(token) if token is not None else None,
                max_sessions=args.max_sessions,
                font_size=args.font_size,
            )
            logging.basicConfig(level=logging.INFO, format="%(asctime)s %(name)s %(message)s")
            banner = access.describe() + ("; access token required" if settings.token_digest else "")
            try:
                asyncio.run(_run_server(make_web_app(settings), args.host, args.port, banner))
            except OSError as exc:
                raise UsageError(f"sparktui serve: cannot listen on {args.host}:{args.port}: {exc.strerror}") from None
            finally:
                _stop_children()
    except UsageError as exc:
        print(str(exc), file=sys.stderr)
        return EXIT_USAGE
    except KeyboardInterrupt:
        return 0
    return 0
