"""``sparktui serve``: the dashboard in a real browser.

The demo fleet runs in a child process (``sparktui demo --serve-only``), ``sparktui serve`` in another,
and Debian's headless Chromium opens the page, driven over its DevTools protocol (a websocket: no
browser driver). What the page received is read from the websocket frames Chromium reports, what it
looks like from a screenshot. The access rules (token, host, origin, read-only off loopback) are tested
with plain HTTP requests and on the argument logic, without binding anything but 127.0.0.1.
"""

from __future__ import annotations

import argparse
import asyncio
import base64
import contextlib
import json
import os
import re
import shutil
import signal
import socket
import struct
import subprocess
import sys
import time
import tomllib
import zlib
from collections.abc import AsyncIterator, Iterator
from pathlib import Path
from typing import Any

import aiohttp
import psutil
import pytest

from sparktui.cli import serve as serve_cli
from sparktui.ui import serve
from sparktui.ui.serve import Access, UsageError, dashboard_command, is_loopback, resolve_access
from tests.support.wait import wait_until

pytestmark = pytest.mark.browser

ROOT = Path(__file__).resolve().parents[2]
NODES = ("spark1", "spark2", "spark3", "spark4")
TOKEN = "kiosk-token-0123456789abcdef"
TOKEN_ENV = "SPARKTUI_TEST_SERVE_TOKEN"
CHROMIUM_FLAGS = (
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
)
VIEWPORT = (1280, 720)  # a wall display's 16:9
SCREENSHOT = ROOT / "docs" / "screenshots" / "kiosk-browser.png"
UPDATE_SCREENSHOTS = os.environ.get("SPARKTUI_UPDATE_SCREENSHOTS") == "1"

# What each refused key would have put on screen, had it got through.
REACTIONS = {
    "y runs it": "a recovery action's confirmation (r, d, K, w)",
    "Search for commands": "the command palette (ctrl+p)",
    "Every key ·": "the help screen (?)",
    "theme:": "the theme cycling (t)",
    "Gen t/s": "the dashboard behind the kiosk",
}


def _find_chromium() -> str | None:
    return shutil.which("chromium") or shutil.which("chromium-browser")


@pytest.fixture
def chromium() -> str:
    found = _find_chromium()
    if found is None:
        if os.environ.get("CI") == "true":
            pytest.fail("chromium is not installed: .ci/run must `apt-get install -y chromium` for the browser tests")
        pytest.skip("chromium is not installed (apt-get install chromium)")
    return found


# --- the processes -------------------------------------------------------------------------------------


def _wait_for(what: str, check: Any, timeout_s: float, log: Path | None = None) -> Any:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        found = check()
        if found:
            return found
        time.sleep(0.05)
    output = log.read_text(errors="replace") if log is not None and log.exists() else ""
    raise AssertionError(f"{what} did not happen within {timeout_s} s\n{output}")


def _all_listening(config: Path) -> bool:
    """Every vLLM endpoint the config names accepts a connection (the config is written before the last
    server is up)."""
    try:
        nodes = tomllib.loads(config.read_text())["nodes"]
    except (OSError, tomllib.TOMLDecodeError, KeyError):
        return False  # still being written
    for node in nodes:
        for vllm in node.get("vllm", []):
            if "port" not in vllm:
                continue
            try:
                socket.create_connection((node["host"], vllm["port"]), timeout=1).close()
            except OSError:
                return False
    return True


@pytest.fixture(scope="module")
def demo_config(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Path]:
    """The demo fleet, served by its own process for the whole module; its config file."""
    folder = tmp_path_factory.mktemp("demo")
    config, log = folder / "demo.toml", folder / "demo.log"
    command = [sys.executable, "-m", "sparktui", "demo", "--serve-only", "--write-config", str(config)]
    with log.open("wb") as out:
        child = subprocess.Popen(command, cwd=ROOT, stdout=out, stderr=subprocess.STDOUT)
    try:
        _wait_for("the demo fleet's config", lambda: config.exists() and child.poll() is None, 60, log)
        _wait_for("the demo fleet's servers", lambda: _all_listening(config), 30, log)
        yield config
    finally:
        child.terminate()
        try:
            child.wait(timeout=10)
        except subprocess.TimeoutExpired:
            child.kill()


class Served:
    """``python -m sparktui serve ARGS`` on 127.0.0.1, port 0."""

    def __init__(self, folder: Path, args: list[str], env: dict[str, str], port: int = 0) -> None:
        folder.mkdir(parents=True, exist_ok=True)
        self.out = folder / "serve.out"
        self.err = folder / "serve.err"
        command = [sys.executable, "-m", "sparktui", "serve", "--host", "127.0.0.1", "--port", str(port), *args]
        with self.out.open("wb") as out, self.err.open("wb") as err:
            self.process = subprocess.Popen(command, cwd=ROOT, stdout=out, stderr=err, env=env)
        line = _wait_for("sparktui serve listening", self._address_line, 30, self.err)
        self.url = re.search(r"http://\S+/", line).group(0)  # type: ignore[union-attr]
        self.banner = line

    def _address_line(self) -> str | None:
        if self.process.poll() is not None:
            raise AssertionError(f"sparktui serve exited with {self.process.returncode}:\n{self.output()}")
        return next((ln for ln in self.out.read_text().splitlines() if ln.startswith("sparktui serve: http")), None)

    def output(self) -> str:
        return self.out.read_text(errors="replace") + self.err.read_text(errors="replace")

    def dashboards(self) -> list[psutil.Process]:
        """The dashboard processes serve started, one per browser session."""
        found = []
        for child in psutil.Process(self.process.pid).children(recursive=True):
            with contextlib.suppress(psutil.NoSuchProcess):
                if "sparktui" in child.cmdline() and "--config" in child.cmdline():
                    found.append(child)
        return found

    def stop(self) -> int:
        if self.process.poll() is None:
            self.process.send_signal(signal.SIGTERM)
        try:
            return self.process.wait(timeout=30)
        except subprocess.TimeoutExpired:
            self.process.kill()
            raise AssertionError(f"sparktui serve did not stop on SIGTERM:\n{self.output()}") from None


@contextlib.contextmanager
def served(folder: Path, args: list[str], **env: str) -> Iterator[Served]:
    process = Served(folder, args, env={**os.environ, **env})
    try:
        yield process
    finally:
        process.stop()


# --- the browser, over the DevTools protocol --------------------------------------------------------------

_ESCAPES = re.compile(r"\x1b\][^\x07\x1b]*(?:\x07|\x1b\\)|\x1b\[[0-9;?<>=]*[ -/]*[@-~]|\x1b[@-Z\\-_]")


class Browser:
    """Headless Chromium with one page, driven over the DevTools protocol's websocket."""

    def __init__(self, executable: str, profile: Path) -> None:
        self.executable = executable
        self.profile = profile
        self.process: subprocess.Popen[bytes] | None = None
        self._http: aiohttp.ClientSession | None = None
        self._socket: aiohttp.ClientWebSocketResponse | None = None
        self._reader: asyncio.Task[None] | None = None
        self._pending: dict[int, asyncio.Future[dict[str, Any]]] = {}
        self._next_id = 0
        self.received: list[str] = []  # what the page's websocket received, as text
        self.sent: list[Any] = []  # what the page sent on it, decoded

    async def start(self) -> None:
        self.profile.mkdir(parents=True, exist_ok=True)
        width, height = VIEWPORT
        command = [
            self.executable,
            *CHROMIUM_FLAGS,
            f"--user-data-dir={self.profile}",
            "--remote-debugging-port=0",
            f"--window-size={width},{height}",
            "about:blank",
        ]
        self.process = _launch(command, self.profile.parent / "chromium.log")
        port_file = self.profile / "DevToolsActivePort"
        deadline = time.monotonic() + 30
        while not (port_file.exists() and port_file.read_text().count("\n") >= 1):
            assert self.process.poll() is None, "chromium exited at start"
            assert time.monotonic() < deadline, "chromium did not open its DevTools port"
            await asyncio.sleep(0.05)
        port = int(port_file.read_text().split()[0])
        self._http = aiohttp.ClientSession()
        async with self._http.get(f"http://127.0.0.1:{port}/json/list") as answer:
            targets = await answer.json()
        page = next(t for t in targets if t["type"] == "page")
        self._socket = await self._http.ws_connect(page["webSocketDebuggerUrl"], max_msg_size=0)
        self._reader = asyncio.create_task(self._read())
        await self.call("Network.enable")
        await self.call("Page.enable")
        await self.call(
            "Emulation.setDeviceMetricsOverride", width=width, height=height, deviceScaleFactor=1, mobile=False
        )

    async def close(self) -> None:
        if self._reader is not None:
            self._reader.cancel()
        if self._socket is not None:
            await self._socket.close()
        if self._http is not None:
            await self._http.close()
        if self.process is not None:
            self.process.terminate()
            try:
                self.process.wait(timeout=10)
            except subprocess.TimeoutExpired:
                self.process.kill()

    async def _read(self) -> None:
        assert self._socket is not None
        async for message in self._socket:
            data = json.loads(message.data)
            if "id" in data:
                future = self._pending.pop(data["id"], None)
                if future is not None and not future.done():
                    future.set_result(data)
            elif data.get("method") == "Network.webSocketFrameReceived":
                self.received.append(_frame_text(data["params"]["response"]))
            elif data.get("method") == "Network.webSocketFrameSent":
                response = data["params"]["response"]
                if response["opcode"] == 1:
                    self.sent.append(json.loads(response["payloadData"]))

    async def call(self, method: str, **params: Any) -> dict[str, Any]:
        assert self._socket is not None
        self._next_id += 1
        future: asyncio.Future[dict[str, Any]] = asyncio.get_running_loop().create_future()
        self._pending[self._next_id] = future
        await self._socket.send_json({"id": self._next_id, "method": method, "params": params})
        answer = await asyncio.wait_for(future, 30)
        assert "error" not in answer, answer
        result: dict[str, Any] = answer["result"]
        return result

    async def evaluate(self, expression: str) -> Any:
        result = await self.call("Runtime.evaluate", expression=expression, returnByValue=True)
        return result["result"].get("value")

    def text(self, since: int = 0) -> str:
        """What the terminal was sent (from frame ``since`` on), escape sequences removed."""
        return _ESCAPES.sub("", "".join(self.received[since:]))

    async def wait_for_text(self, *texts: str, timeout_s: float = 30, since: int = 0) -> None:
        deadline = time.monotonic() + timeout_s
        while not all(t in self.text(since) for t in texts):
            if time.monotonic() > deadline:
                missing = [t for t in texts if t not in self.text(since)]
                raise AssertionError(f"the page never showed {missing}; it received:\n{self.text(since)[-3000:]}")
            await asyncio.sleep(0.1)

    async def press(self, key: str, code: str, vk: int, *, text: str = "", modifiers: int = 0) -> None:
        down: dict[str, Any] = {"key": key, "code": code, "windowsVirtualKeyCode": vk, "modifiers": modifiers}
        await self.call("Input.dispatchKeyEvent", type="keyDown", text=text, **down)
        await self.call("Input.dispatchKeyEvent", type="keyUp", **down)

    async def click(self, x: int, y: int) -> None:
        for kind in ("mousePressed", "mouseReleased"):
            await self.call("Input.dispatchMouseEvent", type=kind, x=x, y=y, button="left", clickCount=1)

    async def screenshot(self) -> bytes:
        shot = await self.call("Page.captureScreenshot", format="png")
        return base64.b64decode(shot["data"])


def _launch(command: list[str], log: Path) -> subprocess.Popen[bytes]:
    with log.open("wb") as out:
        return subprocess.Popen(command, stdout=subprocess.DEVNULL, stderr=out)


def _frame_text(response: dict[str, Any]) -> str:
    if response["opcode"] == 2:  # binary: the terminal's bytes
        return base64.b64decode(response["payloadData"]).decode("utf-8", "replace")
    return str(response["payloadData"])


@contextlib.asynccontextmanager
async def browser(executable: str, folder: Path) -> AsyncIterator[Browser]:
    page = Browser(executable, folder / "chromium-profile")  # a fresh profile each time
    try:
        await page.start()
        yield page
    finally:
        await page.close()


async def _open(page: Browser, url: str) -> None:
    await page.call("Page.navigate", url=url)
    await page.wait_for_text(*NODES)


# --- PNG, enough to look at a screenshot ------------------------------------------------------------------


def png_pixels(data: bytes) -> tuple[int, int, list[bytes]]:
    """(width, height, one bytes object per pixel) of an 8-bit RGB or RGBA PNG, as Chromium writes them."""
    assert data[:8] == b"\x89PNG\r\n\x1a\n", "not a PNG"
    pos, idat = 8, b""
    width = height = channels = 0
    while pos < len(data):
        (length,) = struct.unpack(">I", data[pos : pos + 4])
        kind, body = data[pos + 4 : pos + 8], data[pos + 8 : pos + 8 + length]
        pos += 12 + length
        if kind == b"IHDR":
            width, height, depth, colour, _c, _f, interlace = struct.unpack(">IIBBBBB", body)
            assert depth == 8 and colour in (2, 6) and interlace == 0, (depth, colour, interlace)
            channels = 3 if colour == 2 else 4
        elif kind == b"IDAT":
            idat += body
    raw = zlib.decompress(idat)
    stride = width * channels
    rows: list[bytearray] = []
    previous = bytearray(stride)
    for y in range(height):
        filter_type = raw[y * (stride + 1)]
        row = bytearray(raw[y * (stride + 1) + 1 : (y + 1) * (stride + 1)])
        for i in range(stride):
            left = row[i - channels] if i >= channels else 0
            up = previous[i]
            corner = previous[i - channels] if i >= channels else 0
            if filter_type == 1:
                row[i] = (row[i] + left) & 0xFF
            elif filter_type == 2:
                row[i] = (row[i] + up) & 0xFF
            elif filter_type == 3:
                row[i] = (row[i] + (left + up) // 2) & 0xFF
            elif filter_type == 4:
                p = left + up - corner
                pa, pb, pc = abs(p - left), abs(p - up), abs(p - corner)
                predictor = left if pa <= pb and pa <= pc else up if pb <= pc else corner
                row[i] = (row[i] + predictor) & 0xFF
        rows.append(row)
        previous = row
    pixels = [bytes(row[x : x + 3]) for row in rows for x in range(0, stride, channels)]
    return width, height, pixels


# --- the browser tests -------------------------------------------------------------------------------------


@pytest.mark.slow
async def test_the_kiosk_in_headless_chromium_shows_the_fleet(chromium: str, demo_config: Path, tmp_path: Path) -> None:
    args = ["--kiosk", "--config", str(demo_config), "--token-env", TOKEN_ENV]
    with served(tmp_path / "serve", args, **{TOKEN_ENV: TOKEN}) as server:
        assert "kiosk (read-only, takes no input); access token required" in server.banner
        async with browser(chromium, tmp_path) as page:
            await _open(page, f"{server.url}?token={TOKEN}")
            await page.wait_for_text("sparktui kiosk", "4 up", "tok/s", "memory available", "updated")
            # The token went from the address into a cookie: the address bar no longer shows it.
            assert await page.evaluate("location.href") == server.url
            assert "-first-byte" in await page.evaluate("document.body.className")
            shots: list[bytes] = []

            async def drawn() -> bool:  # the terminal painted: numbers in the tiles, not a blank page
                shots.append(await page.screenshot())
                return _painted(shots[-1])

            await wait_until(drawn, 30, what="the kiosk page painted", interval_s=0.25)
            png = shots[-1]
        assert len(server.dashboards()) == 1

    width, height, pixels = png_pixels(png)
    assert (width, height) == VIEWPORT
    # The tiles share the whole page: something is drawn near its bottom and its right edge.
    counts: dict[bytes, int] = {}
    for pixel in pixels:
        counts[pixel] = counts.get(pixel, 0) + 1
    common = max(counts, key=lambda p: counts[p])
    painted = [i for i, pixel in enumerate(pixels) if pixel != common]
    assert max(i // width for i in painted) >= 0.9 * height, "the tiles stop short of the page's bottom"
    assert max(i % width for i in painted) >= 0.9 * width, "the tiles stop short of the page's right edge"
    (tmp_path / "kiosk-browser.png").write_bytes(png)
    if UPDATE_SCREENSHOTS:
        SCREENSHOT.write_bytes(png)
    assert TOKEN not in server.output()  # neither the banner nor the access log shows it


def _painted(png: bytes) -> bool:
    """A page with content: many colours, and the background under 95 % of the pixels."""
    _, _, pixels = png_pixels(png)
    counts: dict[bytes, int] = {}
    for pixel in pixels:
        counts[pixel] = counts.get(pixel, 0) + 1
    return len(counts) > 50 and max(counts.values()) < 0.95 * len(pixels)


def _with_unlock_key(demo_config: Path, config: Path) -> Path:
    """The demo fleet with an unlock key: once every key has been refused, the unlock key shows that keys
    from the browser do reach the dashboard. An hour per page: the fleet page stays up."""
    config.write_text(demo_config.read_text() + '\n[kiosk]\nunlock_key = "ctrl+u"\nrotate_s = 3600\n')
    return config


@pytest.mark.slow
async def test_keys_sent_through_the_browser_trigger_no_action(
    chromium: str, demo_config: Path, tmp_path: Path
) -> None:
    audit = tmp_path / "audit.log"
    config = _with_unlock_key(demo_config, tmp_path / "kiosk.toml")
    args = ["--kiosk", "--config", str(config)]
    with served(tmp_path / "serve", args, SPARKTUI_AUDIT_LOG=str(audit)) as server:
        async with browser(chromium, tmp_path) as page:
            await _open(page, server.url)
            await page.wait_for_text("sparktui kiosk", "tok/s")
            await _until("the session's dashboard", lambda: len(server.dashboards()) == 1)
            dashboards = server.dashboards()
            assert "--kiosk" in dashboards[0].cmdline()
            await page.evaluate("document.querySelector('.xterm-helper-textarea').focus()")
            mark = len(page.received)
            for letter in "rdkwqtp":
                await page.press(letter, f"Key{letter.upper()}", ord(letter.upper()), text=letter)
            await page.press("?", "Slash", 191, text="?", modifiers=8)
            await page.press("K", "KeyK", ord("K"), text="K", modifiers=8)  # kill workers: shift+k
            for letter in "pqc":  # the command palette, and the quit chords
                await page.press(letter, f"Key{letter.upper()}", ord(letter.upper()), modifiers=2)
            await page.press("Enter", "Enter", 13, text="\r")
            await page.press("Escape", "Escape", 27)
            await page.click(200, 60)  # on spark1's tile
            # The unlock key last: the dashboard takes keys in order, so once its fleet screen shows, every
            # key before it has been handled; whatever they drew came before that screen.
            await page.press("u", "KeyU", 85, modifiers=2)
            await page.wait_for_text("Gen t/s", since=mark, timeout_s=10)

            stdin = {message[1] for message in page.sent if message[0] == "stdin"}
            for sent in ("r", "d", "k", "K", "w", "q", "t", "p", "?", "\x10", "\x11", "\x03", "\r", "\x1b"):
                assert sent in stdin, f"{sent!r} never left the browser: {sorted(stdin)}"
            assert any(s.startswith("\x1b[<0;") for s in stdin), "the click never left the browser"
            before_unlock = page.text(mark).split("Gen t/s", 1)[0]
            for reaction, what in REACTIONS.items():
                assert reaction not in before_unlock, f"a key got through: {what} appeared"
            assert "-closed" not in await page.evaluate("document.body.className")  # the session is up
            assert all(d.is_running() for d in dashboards)  # q, ctrl+q and ctrl+c quit nothing
            # Nothing ran: each action key is audited as refused by the kiosk (every refusal leaves a line,
            # written by a worker of its own: awaited, not read at once).
            actions = {"restart", "drop-caches", "kill-workers", "warmup"}
            await wait_until(
                lambda: {r["action"] for r in _audited(audit)} == actions,
                60,
                what="the four refusals audited",
                detail=lambda: f"audited: {_audited(audit)}; running: {[d.is_running() for d in dashboards]}",
                interval_s=0.1,
            )
            records = _audited(audit)
            assert len(records) == len(actions)
            assert all((r["event"], r["refused_by"], r["command"]) == ("refused", "kiosk", []) for r in records)

            # The same keys do reach the dashboard: after the unlock key, t works.
            mark = len(page.received)
            await page.press("t", "KeyT", 84, text="t")
            await page.wait_for_text("theme:", since=mark, timeout_s=10)
        assert _audited(audit) == records  # t is no action
        assert await asyncio.to_thread(server.stop) == 0
        assert "Traceback" not in server.output()
    _gone, alive = psutil.wait_procs(dashboards, timeout=10)
    assert alive == [], "a dashboard outlived sparktui serve"


def _audited(audit: Path) -> list[dict[str, Any]]:
    return [json.loads(line) for line in audit.read_text().splitlines()] if audit.exists() else []


async def _until(what: str, check: Any, timeout_s: float = 30) -> None:
    await wait_until(check, timeout_s, what=what, interval_s=0.1)


def _ended(process: psutil.Process) -> bool:
    try:
        return not process.is_running() or process.status() == psutil.STATUS_ZOMBIE
    except psutil.NoSuchProcess:
        return True


@pytest.mark.slow
async def test_the_kiosk_page_comes_back_by_itself(chromium: str, demo_config: Path, tmp_path: Path) -> None:
    """A wall screen has nobody to press Restart: the page reopens its session after the dashboard died,
    after the server went silent (a dead network) and after the server restarted."""
    args = ["--kiosk", "--config", str(demo_config)]
    first = Served(tmp_path / "first", args, env=dict(os.environ))
    second: Served | None = None
    try:
        async with browser(chromium, tmp_path) as page:
            await _open(page, first.url + "?stall=3")
            (dashboard,) = first.dashboards()

            # The dashboard dies: the page does not keep its last picture, it opens a new session.
            mark = len(page.received)
            dashboard.kill()
            await page.wait_for_text(*NODES, since=mark, timeout_s=20)
            await _until("a new dashboard", lambda: [d.pid for d in first.dashboards()] not in ([], [dashboard.pid]))
            (dashboard,) = first.dashboards()

            # The server goes silent, as behind a dead network (the socket stays open, nothing comes): after
            # ``stall`` seconds the page gives up on the session, and opens a new one once it is answered.
            first.process.send_signal(signal.SIGSTOP)
            await asyncio.sleep(5)  # the fault's length (longer than ``stall``), not a wait for something
            first.process.send_signal(signal.SIGCONT)
            await _until(
                "a session after the silence", lambda: [d.pid for d in first.dashboards()] not in ([], [dashboard.pid])
            )
            await page.wait_for_text(*NODES, since=len(page.received) - 1, timeout_s=20)
            # The silent session's dashboard is ended (the server reaps it a moment after the socket closes).
            await _until("the silent session's dashboard ended", lambda: _ended(dashboard), timeout_s=20)

            # The server restarts (an upgrade, a reboot of the box): the page waits for it and comes back.
            port = int(first.url.rsplit(":", 1)[1].strip("/"))
            assert await asyncio.to_thread(first.stop) == 0
            mark = len(page.received)
            second = Served(tmp_path / "second", args, env=dict(os.environ), port=port)
            await page.wait_for_text(*NODES, since=mark, timeout_s=20)
            await _until("the session on the restarted server", lambda: len(second.dashboards()) == 1)
    finally:
        first.stop()
        if second is not None:
            assert second.stop() == 0
    assert "Traceback" not in first.output() + (second.output() if second else "")


# --- access: the token, the host and the origin ---------------------------------------------------------------


async def test_the_page_needs_the_token_and_never_logs_it(demo_config: Path, tmp_path: Path) -> None:
    args = ["--kiosk", "--config", str(demo_config), "--token-env", TOKEN_ENV]
    with served(tmp_path / "serve", args, **{TOKEN_ENV: TOKEN}) as server:
        url = server.url
        # unsafe: the jar keeps cookies of IP addresses (127.0.0.1), as a browser does.
        async with aiohttp.ClientSession(cookie_jar=aiohttp.CookieJar(unsafe=True)) as http:
            for path in ("", "static/js/textual.js", "ws", f"?token={TOKEN[:-1]}", f"?token={TOKEN}x"):
                async with http.get(url + path, allow_redirects=False) as answer:
                    assert answer.status == 401, path
                    assert answer.headers["WWW-Authenticate"] == 'Bearer realm="sparktui"'
            async with http.get(url, headers={"Authorization": f"Bearer {TOKEN}x"}) as answer:
                assert answer.status == 401

            async with http.get(f"{url}?fontsize=24&token={TOKEN}", allow_redirects=False) as answer:
                assert answer.status == 303
                assert answer.headers["Location"] == "/?fontsize=24"  # the token leaves the address
                cookie = answer.headers["Set-Cookie"]
                assert "HttpOnly" in cookie and "SameSite=Lax" in cookie
            async with http.get(url + "?fontsize=24") as answer:  # the cookie from here on
                assert answer.status == 200
                page = await answer.text()
                assert 'data-font-size="24"' in page and f'data-session-websocket-url="ws://{url[7:]}ws"' in page
                assert "fonts.googleapis.com" not in page  # a closet network may have no internet
            async with http.get(url + "static/fonts/RobotoMono-VariableFont_wght.ttf") as answer:
                assert answer.status == 200

            # On loopback, a page asked for under another name is refused (DNS rebinding) ...
            async with http.get(url, headers={"Host": "evil.example"}) as answer:
                assert answer.status == 403
            # ... and everywhere, a websocket opened by another site's page. Behind a proxy, the page's
            # host is the one the proxy forwards.
            async with http.get(url + "ws", headers={"Origin": "http://evil.example"}) as answer:
                assert answer.status == 403
            proxied = {"Origin": "https://mon.example", "X-Forwarded-Host": "mon.example"}
            async with http.get(url + "ws", headers=proxied) as answer:
                assert answer.status == 400  # past the origin check: only not a websocket handshake
            async with http.get(url + "ws", headers={**proxied, "X-Forwarded-Host": "evil.example"}) as answer:
                assert answer.status == 403

            async with http.get(url, headers={"Authorization": f"Bearer {TOKEN}"}) as answer:
                assert answer.status == 200  # a script's way in

            async with http.ws_connect(url.replace("http", "ws") + "ws?width=120&height=40") as session:
                received = b""
                deadline = time.monotonic() + 30
                while b"spark1" not in received and time.monotonic() < deadline:
                    message = await session.receive(timeout=30)
                    if message.type == aiohttp.WSMsgType.BINARY:
                        received += message.data
                assert b"spark1" in received
                (dashboard,) = server.dashboards()
                assert "--kiosk" in dashboard.cmdline()
                assert TOKEN_ENV not in dashboard.environ()  # the sessions do not inherit the token
                # What the page may send is checked: anything malformed is dropped, the session goes on.
                for junk in ("not json", "{}", "[]", '["resize", {"width": "x"}]', '["stdin", 3]', '["quit"]'):
                    await session.send_str(junk)
                await session.send_json(["ping", "42"])
                while (message := await session.receive(timeout=10)).type == aiohttp.WSMsgType.BINARY:
                    pass
                assert message.type == aiohttp.WSMsgType.TEXT and json.loads(message.data) == ["pong", "42"]
                assert dashboard.is_running()

                # Stopped with a session open: the session ends, its dashboard with it, cleanly.
                ending = asyncio.create_task(_until_closed(session))
                assert await asyncio.to_thread(server.stop) == 0
                assert await ending in (aiohttp.WSMsgType.CLOSE, aiohttp.WSMsgType.CLOSED)
        assert not dashboard.is_running()
    output = server.output()
    assert '"GET /" 303' in output and '"GET /" 200' in output  # the access log is on: paths, no queries
    assert TOKEN not in output and TOKEN[:-1] not in output
    assert "Traceback" not in output


async def _until_closed(session: aiohttp.ClientWebSocketResponse) -> aiohttp.WSMsgType:
    """The type of the first message of the session that is not the screen's bytes (its close)."""
    while True:
        message = await session.receive(timeout=30)
        if message.type != aiohttp.WSMsgType.BINARY:
            return message.type


async def test_without_a_token_the_page_is_open_on_loopback_and_read_only(demo_config: Path, tmp_path: Path) -> None:
    with served(tmp_path / "serve", ["--config", str(demo_config)]) as server:  # no --read-only: the default
        assert "read-only" in server.banner and "token" not in server.banner
        async with aiohttp.ClientSession() as http, http.get(server.url) as answer:
            assert answer.status == 200
            assert "sparktui" in await answer.text()


# --- the argument logic, without binding anything ------------------------------------------------------------


@pytest.mark.parametrize(
    ("host", "loopback"),
    [
        ("127.0.0.1", True),
        ("127.0.0.2", True),
        ("localhost", True),
        ("::1", True),
        ("[::1]", True),
        ("0.0.0.0", False),
        ("::", False),
        ("", False),
        ("192.168.1.50", False),
        ("spark-mon", False),  # a name is not resolved: it counts as reachable
        ("localhost.evil.example", False),
    ],
)
def test_is_loopback(host: str, loopback: bool) -> None:
    assert is_loopback(host) is loopback


def test_read_only_unless_actions_are_allowed_with_a_token_on_loopback_too() -> None:
    for host in ("0.0.0.0", "192.168.1.50", "spark-mon", "::", "127.0.0.1", "::1", "localhost"):
        access = resolve_access(host, kiosk=False, read_only=False, allow_actions=False, has_token=False)
        assert access == Access(kiosk=False, read_only=True, loopback=is_loopback(host))
        assert access.dashboard_flags() == ["--read-only"]
        with_token = resolve_access(host, kiosk=False, read_only=False, allow_actions=False, has_token=True)
        assert with_token.read_only  # a token alone does not give the actions
        opened = resolve_access(host, kiosk=False, read_only=False, allow_actions=True, has_token=True)
        assert not opened.read_only and opened.dashboard_flags() == []
    kiosk = resolve_access("0.0.0.0", kiosk=True, read_only=False, allow_actions=False, has_token=False)
    assert kiosk.read_only and kiosk.dashboard_flags() == ["--kiosk"]
    command = dashboard_command(Path("fleet.toml"), access, "high-contrast")
    assert command.startswith("exec ") and command.endswith(
        f"-m sparktui --config {Path('fleet.toml').resolve()} --read-only --theme high-contrast"
    )


@pytest.mark.parametrize(
    ("host", "options", "message"),
    [
        ("127.0.0.1", {"kiosk": True, "allow_actions": True}, "--allow-actions and --kiosk"),
        ("0.0.0.0", {"kiosk": True, "allow_actions": True, "has_token": True}, "--allow-actions and --kiosk"),
        ("127.0.0.1", {"read_only": True, "allow_actions": True}, "--allow-actions and --read-only"),
        ("0.0.0.0", {"allow_actions": True}, "needs an access token"),
        ("127.0.0.1", {"allow_actions": True}, "needs an access token .* even on loopback"),
        ("localhost", {"allow_actions": True}, "needs an access token .* even on loopback"),
    ],
)
def test_contradictions_are_refused(host: str, options: dict[str, bool], message: str) -> None:
    values = {"kiosk": False, "read_only": False, "allow_actions": False, "has_token": False, **options}
    with pytest.raises(UsageError, match=message):
        resolve_access(host, **values)


def _cli_like_parser() -> argparse.ArgumentParser:
    """The CLI's global options and its subcommands, with serve added as the CLI adds it."""
    parser = argparse.ArgumentParser(prog="sparktui")
    parser.add_argument("--config", type=Path)
    parser.add_argument("--read-only", action="store_true")
    parser.add_argument("--kiosk", action="store_true")
    parser.add_argument("--theme")
    sub = parser.add_subparsers(dest="command")
    serve_cli.add_parser(sub)
    return parser


def test_the_global_options_work_before_or_after_serve() -> None:
    parser = _cli_like_parser()
    for argv in (["--kiosk", "serve"], ["serve", "--kiosk"]):
        args = parser.parse_args(argv)
        assert args.command == "serve" and args.kiosk is True, argv
    plain = parser.parse_args(["serve"])
    assert plain.kiosk is False and plain.read_only is False and plain.config is None
    assert plain.host == "127.0.0.1" and plain.port == serve_cli.DEFAULT_PORT and not plain.allow_actions
    configured = parser.parse_args(["--config", "a.toml", "serve", "--config", "b.toml", "--theme", "spark-light"])
    assert configured.config == Path("b.toml") and configured.theme == "spark-light"
    with pytest.raises(SystemExit):
        parser.parse_args(["serve", "--token-file", "t", "--token-env", "T"])  # one or the other


def _main(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, str]:
    code = serve.main(_cli_like_parser().parse_args(["serve", *argv]))
    return code, capsys.readouterr().err


def test_main_refuses_what_it_cannot_serve_before_binding(
    capsys: pytest.CaptureFixture[str], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    code, err = _main(capsys, "--kiosk", "--allow-actions")
    assert code == 2 and "contradict" in err
    code, err = _main(capsys, "--host", "0.0.0.0", "--allow-actions")
    assert code == 2 and "needs an access token" in err
    code, err = _main(capsys, "--allow-actions")  # on loopback, the default host
    assert code == 2 and "needs an access token" in err
    code, err = _main(capsys, "--token-file", str(tmp_path / "nope"))
    assert code == 2 and "no such file" in err
    short = tmp_path / "short"
    short.write_text("abc\n")
    code, err = _main(capsys, "--token-file", str(short))
    assert code == 2 and "shorter than 16 characters" in err and "abc" not in err
    monkeypatch.delenv(TOKEN_ENV, raising=False)
    code, err = _main(capsys, "--token-env", TOKEN_ENV)
    assert code == 2 and "not set or empty" in err
    code, err = _main(capsys, "--config", str(tmp_path / "missing.toml"))
    assert code == 2 and "missing.toml" in err
    code, err = _main(capsys, "--demo", "--config", str(tmp_path / "fleet.toml"))
    assert code == 2 and "--demo" in err
    code, err = _main(capsys, "--port", "70000")
    assert code == 2 and "not a port" in err


def test_the_token_is_read_once_and_compared_by_digest(tmp_path: Path) -> None:
    token_file = tmp_path / "token"
    token_file.write_text(TOKEN + "\n")
    token_file.chmod(0o600)
    assert serve.read_token(token_file, None) == TOKEN
    environ = {TOKEN_ENV: f"  {TOKEN} "}
    assert serve.read_token(None, TOKEN_ENV, environ) == TOKEN
    assert TOKEN_ENV not in environ  # gone before any session starts
    assert serve.read_token(None, None) is None
    digest = serve.token_digest(TOKEN)
    assert serve.token_matches(TOKEN, digest)
    for wrong in (None, "", TOKEN[:-1], TOKEN + "x", TOKEN.upper()):
        assert not serve.token_matches(wrong, digest)
