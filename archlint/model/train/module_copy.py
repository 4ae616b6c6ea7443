"""`copy.deepcopy` of a module tree, the same copy made faster (the memory model's meta copy of the
model, archlint.model.train.memory.to_meta).

deepcopy takes a module through its reduce protocol (`__reduce_ex__`, a `__deepcopy__` looked up on
the instance, which nn.Module's `__getattr__` answers with an exception) and then copies its
`__dict__`, where a dozen empty hook dicts and a set each take the same protocol: the meta copy of
efficientnet_b0 (337 modules) took 15.8 ms of CPU time, a tenth of its --train step; 7.5 ms here at
first, and the whole of to_meta (its meta tensors made too) 4.9 ms, now 3.5 (each state's items in one
loop). A module whose class copies the default way (nn.Module's `__getstate__`, no `__deepcopy__`,
`__reduce_ex__` or `__getnewargs__` of its own) is rebuilt as deepcopy rebuilds it:
`cls.__new__(cls)`, registered in the memo, its state copied, `__setstate__` called (nn.Module's adds
the hook dicts an old pickle lacks: where the state has them all, its `__dict__` is updated alone);
a dict with string keys is copied item by item the same way, an empty dict or set made new; any
other value goes to deepcopy with the same memo. So what is shared stays shared and the copy is
deepcopy's, value for value (tests/model/train/test_train_speed.py, test_train_setup_speed.py).
"""

from __future__ import annotations

import copy
import copyreg
from collections import OrderedDict
from sys import getrefcount
from typing import Any

import torch.nn as nn

_ATOMIC = (type(None), bool, int, float, complex, str, bytes, type)
_ATOMIC_SET = frozenset(_ATOMIC)
_STR = frozenset((str,))
_plain_classes: dict[type, bool] = {}  # module classes (_copy asks only of a module), by _plain


def deepcopy_module(module: nn.Module, memo: dict[int, Any]) -> nn.Module:
    """copy.deepcopy(module, memo), faster for modules that copy the default way."""
    return _copy(module, memo)


def _plain(cls: type) -> bool:
    """Whether deepcopy copies instances of `cls` through the default protocol with nn.Module's
    `__getstate__` (what deepcopy_module repeats); by class, once."""
    plain = _plain_classes.get(cls)
    if plain is None:
        plain = _plain_classes[cls] = (
            getattr(cls, "__deepcopy__", None) is None
            and cls.__reduce_ex__ is object.__reduce_ex__
            and cls.__reduce__ is object.__reduce__
            and getattr(cls, "__getstate__", None) is nn.Module.__getstate__
            and getattr(cls, "__getnewargs_ex__", None) is None
            and getattr(cls, "__getnewargs__", None) is None
        )
        _module_setstate[cls] = getattr(cls, "__setstate__", None) is nn.Module.__setstate__
    return plain


# classes whose `__setstate__` is nn.Module's: it updates `__dict__` and adds the hook dicts an old
# checkpoint lacks; a state that has them all (_MODULE_KEYS) is set by the update alone
_module_setstate: dict[type, bool] = {}
_MODULE_KEYS = frozenset(
    (
        "_forward_pre_hooks",
        "_forward_pre_hooks_with_kwargs",
        "_forward_hooks_with_kwargs",
        "_forward_hooks_always_called",
        "_state_dict_hooks",
        "_state_dict_pre_hooks",
        "_load_state_dict_pre_hooks",
        "_load_state_dict_post_hooks",
        "_non_persistent_buffers_set",
        "_is_full_backward_hook",
        "_backward_pre_hooks",
    )
)


def _copy(value: Any, memo: dict[int, Any]) -> Any:
    found = memo.get(id(value), memo)
    if found is not memo:
        return found
    kind: Any = type(value)
    if kind in _ATOMIC_SET:
        return value
    # (deepcopy also keeps each original alive in the memo, so that no id is reused while it copies;
    # these are the model's own, alive throughout)
    if kind is dict or (kind is OrderedDict and not vars(value)):
        if not value:  # most: a module's hook dicts
            fresh: dict = kind()
            memo[id(value)] = fresh
            return fresh
        if set(map(type, value)) <= _STR:  # (map and set: no Python frame a key)
            items: dict = kind()
            memo[id(value)] = items
            for key, item in value.items():
                items[key] = item if type(item) in _ATOMIC_SET else _copy(item, memo)
            return items
    elif kind is set and not value:
        empty: set = set()
        memo[id(value)] = empty
        return empty
    elif (
        isinstance(value, nn.Module)
        and _plain(kind)
        and kind not in copyreg.dispatch_table
        and "__deepcopy__" not in vars(value)
    ):
        return _copy_module(value, kind, memo)
    elif kind is tuple and set(map(type, value)) <= _ATOMIC_SET:
        return value  # deepcopy's own answer (a kernel size, a stride), with no memo entry, as it leaves none
    return copy.deepcopy(value, memo)


def _copy_module(value: nn.Module, kind: Any, memo: dict[int, Any]) -> nn.Module:
    """A plain module (_plain) rebuilt as deepcopy rebuilds it; its state's empty hook dicts and
    sets, most of what it holds, made here rather than through _copy (a call each), and with no
    memo entry where nothing but the module refers to them (_alone)."""
    new = kind.__new__(kind)
    memo[id(value)] = new
    state = value.__getstate__()
    fresh: Any
    for key in state:  # (each value read as _alone reads it, for its reference count)
        item = state[key]
        t = type(item)
        if t in _ATOMIC_SET:
            continue
        if (t is OrderedDict and not item.__dict__ or t is dict or t is set) and not item:
            if getrefcount(item) == _ALONE:
                fresh = t()
            else:
                fresh = memo.get(id(item))
                if fresh is None:
                    fresh = memo[id(item)] = t()
        elif t is dict and getrefcount(item) == _ALONE and _STR.issuperset(map(type, item)):
            fresh = {}  # (its parameters, buffers, submodules: _copy's copy of the dict, less the memo entry)
            for name in item:
                part = item[name]
                # _copy's own steps, less its call: a tensor copied before (most), a submodule of a
                # class it found plain; a tenth of the copy's time (measured on this project's 2-core test machine)
                copied = memo.get(id(part), memo)
                if copied is memo:
                    part_kind = type(part)
                    if part_kind in _ATOMIC_SET:
                        copied = part
                    elif (
                        _plain_classes.get(part_kind)
                        and part_kind not in copyreg.dispatch_table
                        and "__deepcopy__" not in part.__dict__
                    ):
                        copied = _copy_module(part, part_kind, memo)
                    else:
                        copied = _copy(part, memo)
                fresh[name] = copied
        elif t is tuple and _ATOMIC_SET.issuperset(map(type, item)):
            continue  # _copy's answer (a kernel size, a stride: the tuple itself), less its call
        else:
            fresh = _copy(item, memo)
        state[key] = fresh  # the state is __getstate__'s own copy of __dict__: replaced in place
    if _module_setstate[kind] and _MODULE_KEYS <= state.keys():
        new.__dict__.update(state)
    else:
        new.__setstate__(state)
    return new


def _alone() -> int:
    """The reference count _copy_module reads for a value of a module's state that nothing else
    refers to (the module's `__dict__`, the state's copy of it, the loop's variable, the call's
    argument: 4 on CPython 3.10-3.13), read here the same way from a bare module's hook dict. Such a
    value is reached by no other path of the copy, so its copy needs no memo entry: a quarter of
    the copy's time went to the memo's entries for the dozen empty hook dicts of each module (an id
    made and a large dict grown for each). A value referred to from anywhere else counts more and is
    copied through the memo, as deepcopy copies it; where the count cannot be read here, -1: none is
    taken to be alone."""
    bare = nn.Module()
    state = bare.__getstate__()
    for key in state:
        item = state[key]
        if type(item) is OrderedDict and not item:
            return getrefcount(item)
    return -1


_ALONE = _alone()
