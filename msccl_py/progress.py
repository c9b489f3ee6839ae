"""One line of progress on stderr for long work, shown only where a person watches it.

The line appears when stderr is a terminal and the work has run for half a
second, is redrawn in place, and is erased when the work ends, so logs and
pipes never see it. ``$MSCCL_PY_PROGRESS=0`` turns it off; ``1`` shows it
at once on any stream (for scripts and tests that want to see it).

>>> with Progress("timing", total=3) as p:   # stderr is not a terminal here: silent
...     for call in range(3):
...         p.update(call + 1)
"""

from __future__ import annotations

import os
import shutil
import sys
import threading
import time

ENV = "MSCCL_PY_PROGRESS"
#: seconds of work before the line first appears, and between redraws
DELAY, INTERVAL = 0.5, 0.1


class Progress:
    """``label: done/total detail (elapsed)`` on one line; a context manager.

    ``update(done, detail)`` reports a step; ``ticker=True`` also redraws the
    elapsed time from a thread, for work that cannot report steps (a
    compiler run). Callable as ``p(done, total, detail)`` so code below can
    take it as a plain callback.
    """

    def __init__(self, label: str, total: int | None = None, stream=None,
                 ticker: bool = False):
        self.label, self.total = label, total
        self.stream = sys.stderr if stream is None else stream
        setting = os.environ.get(ENV, "")
        tty = getattr(self.stream, "isatty", lambda: False)()
        self.enabled = setting == "1" or (setting != "0" and tty)
        self.delay = 0.0 if setting == "1" else DELAY
        self.done, self.detail = 0, ""
        self.start = time.monotonic()
        self._last = -1.0
        self._shown = 0           # characters on the line now
        self._lock = threading.Lock()
        self._stop = threading.Event()
        self._thread = None
        if self.enabled and ticker:
            self._thread = threading.Thread(target=self._tick, daemon=True)

    def __enter__(self) -> "Progress":
        if self._thread is not None:
            self._thread.start()
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    def __call__(self, done: int, total: int | None = None, detail: str = "") -> None:
        if total is not None:
            self.total = total
        self.update(done, detail)

    def update(self, done: int | None = None, detail: str = "") -> None:
        """Record progress; the line is redrawn at most every :data:`INTERVAL` seconds."""
        if done is not None:
            self.done = done
        self.detail = detail or self.detail
        if self.enabled:
            self._draw(force=False)

    def close(self) -> None:
        """Erase the line (and stop the ticker)."""
        self._stop.set()
        if self._thread is not None and self._thread.is_alive():
            self._thread.join()
        with self._lock:
            if self._shown:
                self.stream.write("\r" + " " * self._shown + "\r")
                self.stream.flush()
                self._shown = 0

    def text(self) -> str:
        """The line as it would be drawn now."""
        parts = [f"{self.label}:"]
        if self.total:
            parts.append(f"{self.done}/{self.total}")
        if self.detail:
            parts.append(self.detail)
        parts.append(f"({time.monotonic() - self.start:.0f} s)")
        return " ".join(parts)

    def _draw(self, force: bool) -> None:
        now = time.monotonic()
        if now - self.start < self.delay or (not force and now - self._last < INTERVAL):
            return
        with self._lock:
            if self._stop.is_set():
                return
            self._last = now
            width = shutil.get_terminal_size((100, 20)).columns - 1
            line = self.text()[:width]
            pad = max(0, self._shown - len(line))
            self.stream.write("\r" + line + " " * pad)
            self.stream.flush()
            self._shown = len(line)

    def _tick(self) -> None:
        while not self._stop.wait(INTERVAL):
            self._draw(force=True)
