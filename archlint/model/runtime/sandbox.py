"""Running the user's model code without letting it end, hang or change the run.

- `user_code`: a `sys.exit()` (or a KeyboardInterrupt the user did not press) while a model file
  is imported, built or run becomes a usage error (exit 2) instead of ending archlint with the
  model's code and no report; `timeout` seconds bound it (an endless loop at import, a forward that
  never returns). The alarm raises into the model's code; where that code swallows it (a bare
  `except:` in a loop) or never returns to Python (a blocking C call), a watchdog thread ends the
  process GRACE_S later with a one-line error and exit code 2: no model code can outlive it.
  An `os._exit()` in the model's code becomes a usage error too (it would end archlint with no report
  and exit code 0: a CI gate that passes); what the code prints goes to stderr (stdout may be a JSON
  report); the process state it changes (random generators, grad mode, default dtype, working
  directory) is put back.
- `preserved`: every parameter and buffer is put back as it was after a capture or a measurement
  (a forward that counts its steps, BatchNorm statistics in train mode), and each module's
  attributes (a counter, a cache, an attribute set in forward that would keep an fx Proxy, a
  constant fx adds as `_tensor_constant0`, a submodule created in forward).
- `quiet_torch_logs`: torch's export and tracing loggers say nothing during a capture (a
  data-dependent model makes them print tracebacks for failures archlint handles); `--debug` keeps them.
"""

from __future__ import annotations

import contextlib
import dataclasses
import io
import logging
import operator
import os
import signal
import sys
import threading

import torch
from torch import nn

from archlint.errors import UsageError
from archlint.model.runtime.state import global_state

PROCESS_EXIT = os._exit  # the real one: `_no_hard_exit` swaps os._exit while model code runs
GRACE_S = 5.0  # after --timeout, how long the model's code has to unwind before the process ends


class _Expired(BaseException):
    """Raised into the user's code by the alarm; a BaseException so `except Exception` in a model
    file does not swallow it."""


class _HardExit(BaseException):
    """What `os._exit(code)` raises while the user's code runs."""

    def __init__(self, code) -> None:
        super().__init__(code)
        self.code = code


@contextlib.contextmanager
def _no_hard_exit():
    real, pid = os._exit, os.getpid()

    def hard_exit(code):
        if os.getpid() != pid:  # a process the model's code forked ends as it asked
            real(code)
        raise _HardExit(code)

    os._exit = hard_exit
    try:
        yield
    finally:
        os._exit = real


@contextlib.contextmanager
def _stdout_to_stderr():
    """The model's prints go to stderr; stdout carries only archlint's report."""
    with contextlib.suppress(Exception):
        sys.stdout.flush()
    with contextlib.redirect_stdout(sys.stderr):
        yield


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
        with global_state(), _no_hard_exit(), _stdout_to_stderr():
            yield guard
    except _HardExit as exc:
        raise UsageError(
            f"{target}: the model's code called os._exit({exc.code!r}) while {guard.doing}; archlint stopped it "
            "(it would have ended the run with no report): remove the exit from the model's code"
        ) from None
    except SystemExit as exc:
        hint = (
            'keep script code under `if __name__ == "__main__":`'
            if guard.doing.startswith("importing")
            else "remove the exit from the model's code"
        )
        raise UsageError(
            f"{target}: the model's code called sys.exit({exc.code!r}) while {guard.doing}; archlint stopped it: {hint}"
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
        os.write(
            2,
            (
                f"archlint: error: {guard.target}: still {guard.doing} {GRACE_S:g} s after --timeout {guard.timeout:g} s: "
                "the model's code did not stop when told to (a bare `except:` that swallows it, or a call that "
                "blocks outside Python); archlint exits without a report; fix the code or raise --timeout\n"
            ).encode("utf-8", "replace"),
        )
        PROCESS_EXIT(2)  # not os._exit: inside the guarded block that one raises into this thread

    timer = threading.Timer(seconds, end)
    timer.daemon = True
    timer.start()
    return timer


@dataclasses.dataclass
class Kept:
    """What `preserved` could not put back: parameters changed in place whose values it did not copy
    (`parameter_values=False`), by their path; empty when everything was restored."""

    unrestored: list[str] = dataclasses.field(default_factory=list)


@contextlib.contextmanager
def preserved(model: nn.Module, parameter_values: bool = True):
    """Put every parameter, buffer and module attribute back after the block: the same tensor
    objects in the same slots, with their values (a copy of each real one is kept for the block's duration; meta
    tensors hold no values and cost nothing).

    `parameter_values=False` keeps no copy of the parameters' values (buffers still are copied): for
    a block that never does arithmetic on them (the fx capture: the tracer hands out a Proxy for
    every parameter a forward reads, and shapes are propagated on meta copies). Copying a ViT-B's
    344 MB of weights took half of its analysis. A parameter changed in place all the same is
    listed in the yielded Kept.unrestored, for the caller to say."""
    saved = []
    kept_record = Kept()
    attributes = []
    for path, module in model.named_modules():  # one walk of the module tree for both
        attributes.append(_Attributes(module))
        for slots in (module._parameters, module._buffers):
            copy_values = parameter_values or slots is module._buffers
            for name, tensor in slots.items():
                copy = None
                if copy_values and tensor is not None and tensor.device.type != "meta" and not _uninitialized(tensor):
                    copy = tensor.detach().clone()
                saved.append((slots, name, tensor, copy, tensor._version if tensor is not None else 0, path))
    try:
        yield kept_record
    finally:
        with torch.no_grad():
            for slots, name, tensor, copy, version, path in saved:
                slots[name] = tensor  # rebinding (`self.step = self.step + 1`) undone
                if tensor is not None and tensor._version != version:
                    where = f"{path}.{name}" if path else name
                    if copy is not None:
                        tensor.copy_(copy)  # in-place change (`self.step += 1`) undone
                    elif tensor.device.type != "meta" and where not in kept_record.unrestored:
                        kept_record.unrestored.append(where)
        for kept in attributes:
            kept.restore()


def _uninitialized(tensor: torch.Tensor) -> bool:
    """A lazy module's parameter before its first forward: no values to keep (the slot is put back)."""
    return isinstance(tensor, nn.parameter.UninitializedTensorMixin)


class _Attributes:
    """A module's attributes as they were: the same objects under the same names (and the same
    class: a lazy module becomes its concrete class when first run), and the contents of its
    dicts, lists and sets (parameter, buffer, submodule and hook tables, a user's cache)."""

    __slots__ = ("module", "cls", "items", "contents")

    def __init__(self, module: nn.Module) -> None:
        self.module, self.cls, self.items = module, type(module), dict(module.__dict__)
        # (the container, a copy of what it held): the empty ones, most hook tables, as None
        kinds = _CONTAINER_TYPES  # (by type, as _is_container: its call a value was a fifth of this)
        self.contents = [
            (value, _snapshot(value) if value else None)
            for value in self.items.values()
            if kinds.get(type(value)) or (type(value) not in kinds and _is_container(type(value)))
        ]

    def restore(self) -> None:
        module = self.module
        if type(module) is not self.cls:
            module.__class__ = self.cls
        now, items = module.__dict__, self.items
        if not _same_items(now, items):
            now.clear()
            now.update(items)
        for value, was in self.contents:
            if was is None:
                if value:  # was empty
                    value.clear()
            elif _changed(value, was):
                value.clear()
                (value.extend if isinstance(value, list) else value.update)(was)


def _same_items(now: dict, was: dict) -> bool:
    """The same keys holding the same objects, in the same order, by identity (an equal key that is
    another string object counts as a change: harmless, the items are put back as they were)."""
    return (
        len(now) == len(was) and all(map(operator.is_, now, was)) and all(map(operator.is_, now.values(), was.values()))
    )


_CONTAINER_TYPES: dict[type, bool] = {}


def _is_container(cls: type) -> bool:
    """A dict, list or set, or one of collections' dicts (OrderedDict, defaultdict): the kinds
    whose contents are kept (by type, once)."""
    found = _CONTAINER_TYPES.get(cls)
    if found is None:
        found = _CONTAINER_TYPES[cls] = cls in (dict, list, set) or (
            issubclass(cls, dict) and cls.__module__ == "collections"
        )
    return found


def _snapshot(value):
    """A plain container of the same items, in the same order: what `_changed` compares and
    `restore` puts back (copy.copy of an OrderedDict goes through __reduce_ex__ and copyreg, three
    times slower: 5,000 of them, a module's parameter, buffer and hook tables, on a DenseNet)."""
    if isinstance(value, dict):
        return dict(value)
    return list(value) if isinstance(value, list) else set(value)


def _changed(now, was) -> bool:
    """By identity: a container of tensors has no usable `==`."""
    if len(now) != len(was):
        return True
    if isinstance(now, dict):
        return not _same_items(now, was)
    if isinstance(now, list):
        return not all(map(operator.is_, now, was))
    return {id(x) for x in now} != {id(x) for x in was}


TORCH_LOGGERS = (
    "torch._dynamo",
    "torch._export",
    "torch.export",
    "torch._subclasses",
    "torch.fx",
    "torch._functorch",
    "torch._utils_internal",
)


# torch.compile's (--what-if compile): inductor, and the C++ toolchain probe it runs ("No CUDA
# runtime is found" on a CPU machine), which wrote to stderr under -q too
COMPILE_LOGGERS = (
    "torch._dynamo",
    "torch._inductor",
    "torch.utils.cpp_extension",
    "torch._functorch",
    "torch.fx",
    "torch._utils_internal",
)


class _Held(logging.Filter):
    """Drops the records of `prefixes`' loggers; keeps the first line of each warning in `kept`."""

    def __init__(self, prefixes: tuple[str, ...], kept: list[str] | None) -> None:
        super().__init__()
        self.prefixes, self.kept = prefixes, kept

    def filter(self, record: logging.LogRecord) -> bool:
        if not record.name.startswith(self.prefixes):
            return True
        if self.kept is not None and record.levelno >= logging.WARNING:
            self.kept.append(f"{record.name}: {(record.getMessage().strip().splitlines() or [''])[0][:200]}")
        return False


@contextlib.contextmanager
def quiet_torch_logs(debug: bool = False, prefixes: tuple[str, ...] = TORCH_LOGGERS, kept: list[str] | None = None):
    """torch's capture loggers are off for the block (a failed export is a note in archlint's report).
    Their records are dropped where they are written (the handlers of torch's loggers and of the
    root), so a logger created mid-capture that writes through them is covered too. With `kept`,
    the warnings among them are collected there (for notes) instead of lost."""
    if debug:
        yield
        return
    _from_capture = _Held(prefixes, kept)
    loggers = [logging.getLogger(), logging.getLogger("torch")] + [
        lg
        for name, lg in list(logging.root.manager.loggerDict.items())
        if name.startswith("torch") and isinstance(lg, logging.Logger)  # torch gives each its own handler
    ]
    handlers = {h for lg in loggers for h in lg.handlers} | {logging.lastResort}
    handlers.discard(None)
    for handler in handlers:
        handler.addFilter(_from_capture)
    try:
        yield
    finally:
        for handler in handlers:
            handler.removeFilter(_from_capture)


@contextlib.contextmanager
def quiet_export(debug: bool = False):
    """torch.export prints the partial graph of an export it gives up on (a data-dependent forward)
    to stderr; archlint falls back to another capture and says so in a note. What is written to
    stderr meanwhile is passed on only when the export worked; `--debug` passes everything."""
    if debug:
        yield
        return
    buffer = io.StringIO()
    with contextlib.redirect_stderr(buffer):
        yield
    sys.stderr.write(buffer.getvalue())
