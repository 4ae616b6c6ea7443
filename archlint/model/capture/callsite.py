"""Where in the user's code the fx tracer creates each op, read off the live Python frames.

torch's `Tracer.record_stack_traces` symbolizes and formats the whole stack of every node (frame
summaries, each source line from linecache, then text) and graph.user_frame parsed that text back
into [file, line]: half the trace's time. `CallSites` walks the frames instead and names the same
frame: torch keeps the stack from its outermost frame named `forward` inward (none such: no stack
trace), leaving out its own uninteresting files; user_frame then takes the innermost of those whose
file is the user's (graph.user_file) and whose line is known.

The raw stack of each node (CapturedTraceback.extract: a C walk, no symbols) is kept too, so the
text torch would have recorded is there when something quotes it (fx's Interpreter puts a failing
node's stack trace in its error, which the report's details show): `stack_trace`.
"""

from __future__ import annotations

import dis
import functools
import os
import traceback
from types import FrameType
from typing import Any

import torch
import torch.fx as fx
from torch.utils._traceback import CapturedTraceback

from archlint.model.capture.graph import user_file, user_frame

SITE = "archlint_call_site"  # node.meta key: (file, line) of the user's call, or None
STACK = "archlint_stack"  # node.meta key: the node's raw stack (a CapturedTraceback, not symbolized)
_KINDS = ("call_function", "call_method")  # the ops whose call site a report shows (modules: where created)
_TORCH_AS_IMPORTED = os.path.dirname(torch.__file__) + os.sep  # may differ from the resolved path user_file skips


class CallSites:
    """The call-site search for one trace. `top` is the frame that called the tracer: the frames
    from it outward are the same for every node, so they are read once here."""

    def __init__(self, top: FrameType | None):
        self.top = top
        self._user: dict[str, bool] = {}
        self._outer: tuple[bool, tuple[str, int] | None] | None = None

    def outer(self) -> tuple[bool, tuple[str, int] | None]:
        """Whether a frame from `top` outward is named `forward`, and the innermost user frame
        there at or inside the outermost such: the site of a node without a user frame of its own
        inside the trace. Read at the first need, when `top` is at its call of the tracer."""
        if self._outer is None:
            frames = []
            f = self.top
            while f is not None:
                frames.append(f)
                f = f.f_back
            forward = max((i for i, f in enumerate(frames) if f.f_code.co_name == "forward"), default=None)
            site = next((s for f in frames[: (forward or 0) + 1] if (s := self._site(f))), None)
            self._outer = (forward is not None, site)
        return self._outer

    def record(self, node: fx.Node, frame: FrameType) -> None:
        """Keep `node`'s raw stack and, for a function or method call, its user call site; `frame`:
        the tracer's create_node, called from torch's create_proxy (or from trace, for the output)."""
        # skip: this frame and the tracer's create_node (stack_trace puts torch's in their place)
        node.meta[STACK] = CapturedTraceback.extract(skip=2)  # type: ignore[no-untyped-call]
        if node.op in _KINDS:
            node.meta[SITE] = self.find(frame)

    def find(self, frame: FrameType | None) -> tuple[str, int] | None:
        """The innermost user frame from `frame` outward, when a frame named `forward` is at or
        outside it; where the trace holds none, the one outside the tracer (`outer`)."""
        found = None
        f = frame
        while f is not None and f is not self.top:
            if found is None:
                found = self._site(f)
            if found is not None and f.f_code.co_name == "forward":
                return found
            f = f.f_back
        has_forward, site = self.outer()
        return (found or site) if has_forward else None

    def _site(self, f: FrameType) -> tuple[str, int] | None:
        file = f.f_code.co_filename
        user = self._user.get(file)
        if user is None:
            user = self._user[file] = _user_file(file)
        line = f.f_lineno
        return (file, line) if user and line is not None else None


def _user_file(file: str) -> bool:
    """graph.user_file, as the text path applied it: user_frame's pattern needs a file name without
    a quote, and torch had already left out its uninteresting files (a torch installed under a link
    has frames outside the resolved folder user_file skips)."""
    if not file or '"' in file or not user_file(file):
        return False
    if file.startswith(_TORCH_AS_IMPORTED):
        from torch.fx.experimental.symbolic_shapes import uninteresting_files

        return file not in uninteresting_files()
    return True


def call_site(node: fx.Node) -> list[Any] | None:
    """[file, line] of the user's code that called `node`'s function or method (graph.user_frame's
    answer on the stack trace torch would have recorded), None when unknown."""
    if node.stack_trace:  # set from preserved node meta (torch.fx.traceback): torch kept it as is
        return user_frame(node.stack_trace)
    site = node.meta.get(SITE)
    return list(site) if site else None


def stack_trace(node: fx.Node) -> str | None:
    """The stack trace torch's `record_stack_traces` would have given `node`, as text. (A node made
    inside one of the tracer's own hooks, fx._Tracer.getattr or a proxy's unpacking, shows that
    hook's frame where torch's stood; the user's frames, outermost first, are the same.)"""
    if node.stack_trace:
        return node.stack_trace
    raw = node.meta.get(STACK)
    line = _record_line()
    if raw is None or line is None:
        return None
    frames = raw.summary()  # outermost first; it ends at the frame that called create_node
    # torch takes the stack inside TracerBase.create_node: its frame is the innermost
    code = fx.proxy.TracerBase.create_node.__code__
    frames.append(traceback.FrameSummary(code.co_filename, line, code.co_name))
    kept = fx.Tracer()._filter_traceback_frames(frames)
    return "".join(kept.format()).strip() if kept else None


@functools.cache
def _record_line() -> int | None:
    """The line of TracerBase.create_node that takes the stack (`CapturedTraceback.extract()`)."""
    code = fx.proxy.TracerBase.create_node.__code__
    at = [i.offset for i in dis.get_instructions(code) if i.argval == "extract"]
    lines = {line for start, end, line in code.co_lines() for offset in at if start <= offset < end}
    return lines.pop() if len(lines) == 1 else None
