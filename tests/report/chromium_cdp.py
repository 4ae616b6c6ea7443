"""Headless Chromium driven over the DevTools protocol on a pipe (--remote-debugging-pipe:
commands on fd 3, replies on fd 4, NUL-terminated JSON), so the tests need no websocket client.

`open_page(path)` loads a file and records what the tests assert on: console errors, uncaught
exceptions, and every request the page makes (a file:// page that is self-contained makes none
besides its own URL).
"""

from __future__ import annotations

import base64
import json
import os
import select
import shutil
import signal
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path

FLAGS = [
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--disable-extensions",
    "--disable-default-apps",
    "--mute-audio",
    "--hide-scrollbars",
    "--remote-debugging-pipe",
]


def find_chromium() -> str | None:
    for name in ("chromium", "chromium-browser", "google-chrome", "google-chrome-stable"):
        path = shutil.which(name)
        if path:
            return path
    return None


def _wait(pid: int, timeout: float) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        done, _ = os.waitpid(pid, os.WNOHANG)
        if done:
            return
        time.sleep(0.05)
    os.kill(pid, signal.SIGKILL)
    os.waitpid(pid, 0)


@dataclass
class PageLog:
    errors: list[str] = field(default_factory=list)  # console errors and uncaught exceptions
    requests: list[str] = field(default_factory=list)  # every URL the page asked for


class Chromium:
    def __init__(self, binary: str, width: int = 1400, height: int = 1000):
        self._profile = tempfile.mkdtemp(prefix="archlint-chromium-")
        cmd_r, self._cmd_w = os.pipe()
        self._resp_r, resp_w = os.pipe()
        argv = [binary, *FLAGS, f"--user-data-dir={self._profile}", f"--window-size={width},{height}", "about:blank"]
        # posix_spawn's dup2 puts the pipe ends on the protocol's fixed descriptors (3 = commands
        # in, 4 = replies out) and clears close-on-exec on exactly those two.
        self.pid = os.posix_spawn(
            binary,
            argv,
            os.environ,
            file_actions=[
                (os.POSIX_SPAWN_OPEN, 0, os.devnull, os.O_RDONLY, 0),
                (os.POSIX_SPAWN_OPEN, 1, os.devnull, os.O_WRONLY, 0),
                (os.POSIX_SPAWN_OPEN, 2, os.devnull, os.O_WRONLY, 0),
                (os.POSIX_SPAWN_DUP2, cmd_r, 3),
                (os.POSIX_SPAWN_DUP2, resp_w, 4),
            ],
        )
        os.close(cmd_r)
        os.close(resp_w)
        self._buf = b""
        self._next_id = 0
        self.events: list[dict] = []
        self.width, self.height = width, height

    # -- protocol
    def send(self, method: str, params: dict | None = None, session: str | None = None, timeout: float = 30) -> dict:
        self._next_id += 1
        msg = {"id": self._next_id, "method": method, "params": params or {}}
        if session:
            msg["sessionId"] = session
        os.write(self._cmd_w, json.dumps(msg).encode() + b"\0")
        deadline = time.monotonic() + timeout
        while True:
            reply = self._read(deadline)
            if reply.get("id") == self._next_id:
                if "error" in reply:
                    raise RuntimeError(f"{method}: {reply['error']}")
                return reply.get("result", {})
            self.events.append(reply)

    def _read(self, deadline: float) -> dict:
        while b"\0" not in self._buf:
            if time.monotonic() > deadline:
                raise TimeoutError("no reply from Chromium")
            ready, _, _ = select.select([self._resp_r], [], [], 0.5)
            if ready:
                chunk = os.read(self._resp_r, 1 << 20)
                if not chunk:
                    raise RuntimeError("Chromium exited")
                self._buf += chunk
        raw, self._buf = self._buf.split(b"\0", 1)
        return json.loads(raw)

    def wait_event(self, method: str, session: str, timeout: float = 30) -> dict:
        deadline = time.monotonic() + timeout
        while True:
            for ev in self.events:
                if ev.get("method") == method and ev.get("sessionId") == session:
                    self.events.remove(ev)
                    return ev
            self.events.append(self._read(deadline))

    def close(self) -> None:
        try:
            self.send("Browser.close", timeout=5)
        except (RuntimeError, TimeoutError, OSError):
            os.kill(self.pid, signal.SIGKILL)  # it did not close itself: end the process we started
        try:
            _wait(self.pid, timeout=10)
        finally:
            os.close(self._cmd_w)
            os.close(self._resp_r)
            shutil.rmtree(self._profile, ignore_errors=True)

    # -- a page
    def open_page(
        self, path: Path, ready_js: str = "window.__archlint && window.__archlint.ready", timeout: float = 60
    ):
        target = self.send("Target.createTarget", {"url": "about:blank"})["targetId"]
        session = self.send("Target.attachToTarget", {"targetId": target, "flatten": True})["sessionId"]
        for domain in ("Page", "Runtime", "Network", "Log"):
            self.send(f"{domain}.enable", session=session)
        self.send(
            "Emulation.setDeviceMetricsOverride",
            {"width": self.width, "height": self.height, "deviceScaleFactor": 1, "mobile": False},
            session=session,
        )
        self.events.clear()
        started = time.monotonic()
        self.send("Page.navigate", {"url": path.resolve().as_uri()}, session=session)
        self.wait_event("Page.loadEventFired", session, timeout)
        deadline = time.monotonic() + timeout
        while not self.evaluate(session, f"Boolean({ready_js})"):
            if time.monotonic() > deadline:
                errors = Page(self, session, 0.0).log().errors
                raise TimeoutError(f"the page never became ready ({ready_js}); errors: {errors}")
            time.sleep(0.05)
        wall = time.monotonic() - started
        return Page(self, session, wall)

    def evaluate(self, session: str, expression: str):
        result = self.send("Runtime.evaluate", {"expression": expression, "returnByValue": True}, session=session)
        if "exceptionDetails" in result:
            raise RuntimeError(f"{expression}: {result['exceptionDetails']}")
        return result["result"].get("value")


@dataclass
class Page:
    browser: Chromium
    session: str
    load_s: float  # navigation start to the page saying it is ready, seen from outside

    def evaluate(self, expression: str):
        return self.browser.evaluate(self.session, expression)

    def log(self) -> PageLog:
        """Console errors, exceptions and requests seen so far on this page."""
        self.evaluate("0")  # a round trip: events sent before it are in
        log = PageLog()
        for ev in self.browser.events:
            if ev.get("sessionId") != self.session:
                continue
            method, p = ev.get("method"), ev.get("params", {})
            if method == "Runtime.exceptionThrown":
                d = p["exceptionDetails"]
                log.errors.append(d.get("exception", {}).get("description") or d.get("text", "exception"))
            elif method == "Runtime.consoleAPICalled" and p.get("type") in ("error", "assert"):
                log.errors.append(" ".join(str(a.get("value", a.get("description", ""))) for a in p.get("args", [])))
            elif method == "Log.entryAdded" and p["entry"].get("level") == "error":
                log.errors.append(p["entry"].get("text", ""))
            elif method == "Network.requestWillBeSent":
                log.requests.append(p["request"]["url"])
        return log

    def screenshot(self, path: Path, full_page: bool = True) -> None:
        params: dict = {"format": "png"}
        if full_page:
            width = self.evaluate("document.documentElement.scrollWidth")
            height = self.evaluate("document.documentElement.scrollHeight")
            params.update(
                captureBeyondViewport=True, clip={"x": 0, "y": 0, "width": width, "height": height, "scale": 1}
            )
        data = self.browser.send("Page.captureScreenshot", params, session=self.session)["data"]
        path.write_bytes(base64.b64decode(data))
