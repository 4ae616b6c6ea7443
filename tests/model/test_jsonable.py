"""opgraph's attributes made JSON-ready: the fast path by exact type (issue 45) gives what the
isinstance checks give, subclasses (an IntEnum, a str enum) included."""

from __future__ import annotations

import enum

import torch

from archlint.model.opgraph import _jsonable


class _Mode(enum.IntEnum):
    A = 1


class _Name(str, enum.Enum):
    B = "b"


def test_values_of_every_kind():
    value = {
        "i": 1,
        "f": 0.5,
        "b": True,
        "s": "x",
        "n": None,
        "t": (1, (2, 3)),
        "l": [torch.float16, torch.channels_last],
        3: {"inner": [None, 2.0]},
        "e": _Mode.A,
        "se": _Name.B,
        "size": torch.Size([1, 2]),
    }
    got = _jsonable(value)
    assert got == {
        "i": 1,
        "f": 0.5,
        "b": True,
        "s": "x",
        "n": None,
        "t": [1, [2, 3]],
        "l": ["torch.float16", "torch.channels_last"],
        "3": {"inner": [None, 2.0]},
        "e": _Mode.A,
        "se": _Name.B,
        "size": [1, 2],
    }
    assert type(got["e"]) is _Mode and type(got["se"]) is _Name
