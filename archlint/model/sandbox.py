"""Running the user's model code without letting it end, hang or change the run.

- `user_code`: a `sys.exit()` (or a KeyboardInterrupt the user did not press) while a model file
  is imported, built or run becomes a usage error (exit 2) instead of ending archlint with the
  model's code and no report; `timeout` seconds bound it (an endless loop at import, a forward that
  never returns). The alarm raises into the model's code; where that code swallows it (a bare
  `except:` in a loop) or never returns to Python (a blocking C call), a watchdog thread ends the
  process GRACE_S later with a one-line error and exit code 2: no model code can outlive it.
- `preserved`: every parameter and buffer is put back as it was after a capture or a measurement
  (a forward that counts its steps, BatchNorm statistics in train mode).
"""

from __future__ import annotations

import contextlib
import os
import signal
import sys
import threading

import torch
from torch import nn

from archlint.errors import UsageError


GRACE_S = 5.0  # after --timeout, how long the model's code has to unwind before the process ends


class _Expired(BaseException):
    """Raised into the user's code by the alarm; a BaseException so `except Exception` in a model
    file does not swallow it."""


class Guard:
    """What the guarded code is doing now, for the messages ("importing", "capturing", ...)."""

    def __init__(self, target: str, timeout: float | None) -> None:
        self.target, self.timeout, self.doing = target, timeout, "importing or building it"
        self.pressed = False  # Ctrl-C seen by our handler: a real interrupt, passed on


@contextlib.contextmanager
def user_code(target: str, timeout: float | None = None):
    guard = Guard(target, timeout)
    on_main = threading.current_thread() is threading.main_thread()
    old_int = old_alarm = None
    if on_main:
        def pressed(signum, frame):
            guard.pressed = True
            raise KeyboardInterrupt

        old_int = signal.signal(signal.SIGINT, pressed)
    if timeout is not None:
        if not (on_main and hasattr(signal, "setitimer")):
            raise UsageError("--timeout needs a Unix system and archlint on the main thread")

        def expired(signum, frame):
            raise _Expired

        old_alarm = signal.signal(signal.SIGALRM, expired)
        signal.setitimer(signal.ITIMER_REAL, timeout)
    watchdog = _watchdog(guard, timeout + GRACE_S) if timeout is not None else None
    try:
        yield guard
    except SystemExit as exc:
        hint = ("keep script code under `if __name__ == \"__main__\":`" if guard.doing.startswith("importing")
                else "remove the exit from the model's code")
        raise UsageError(
            f"{target}: the model's code called sys.exit({exc.code!r}) while {guard.doing}; "
            f"archlint stopped it: {hint}"
        ) from None
    except KeyboardInterrupt:
        if guard.pressed or not on_main:
            raise
        raise UsageError(
            f"{target}: the model's code raised KeyboardInterrupt while {guard.doing} (no key was pressed); "
            "fix the code"
        ) from None
    except _Expired:
        if timeout is None:  # an outer guard's alarm: its own message
            raise
        raise UsageError(
            f"{target}: still {guard.doing} after --timeout {timeout:g} s (an endless loop at import, "
            "in the constructor or in forward?); fix the code or raise --timeout"
        ) from None
    finally:
        if watchdog is not None:
            watchdog.cancel()
        if timeout is not None:
            signal.setitimer(signal.ITIMER_REAL, 0)
            signal.signal(signal.SIGALRM, old_alarm)
        if on_main:
            signal.signal(signal.SIGINT, old_int)


def _watchdog(guard: Guard, seconds: float) -> threading.Timer:
    """A daemon timer that ends the process if the guarded block is still running after `seconds`."""

    def end() -> None:
        try:
            sys.stdout.flush()
        except (OSError, ValueError):  # a closed or broken stdout: the message below still goes out
            pass
        os.write(2, (
            f"archlint: error: {guard.target}: still {guard.doing} {GRACE_S:g} s after --timeout {guard.timeout:g} s: "
            "the model's code did not stop when told to (a bare `except:` that swallows it, or a call that "
            "blocks outside Python); archlint exits without a report; fix the code or raise --timeout\n"
        ).encode("utf-8", "replace"))
        os._exit(2)

    timer = threading.Timer(seconds, end)
    timer.daemon = True
    timer.start()
    return timer


@contextlib.contextmanager
def preserved(model: nn.Module):
    """Put every parameter and buffer back after the block: the same tensor objects in the same
    slots, with their values (a copy of each real one is kept for the block's duration; meta
    tensors hold no values and cost nothing)."""
    saved = []
    for module in model.modules():
        for slots in (module._parameters, module._buffers):
            for name, tensor in slots.items():
                copy = None
                if tensor is not None and tensor.device.type != "meta":
                    copy = tensor.detach().clone()
                saved.append((slots, name, tensor, copy, tensor._version if tensor is not None else 0))
    try:
        yield
    finally:
        with torch.no_grad():
            for slots, name, tensor, copy, version in saved:
                slots[name] = tensor  # rebinding (`self.step = self.step + 1`) undone
                if copy is not None and tensor._version != version:
                    tensor.copy_(copy)  # in-place change (`self.step += 1`) undone
