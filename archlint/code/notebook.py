"""Jupyter notebooks (`.ipynb`), linted as ruff lints them: the code cells, in order, as one Python
text; a finding is located by cell (its position among all the notebook's cells, 1-based, as
Jupyter and VS Code count them) and line within the cell; `--fix` writes back only the code cells'
source, the rest of the file byte for byte.

IPython syntax is not Python: a line magic or shell line (`%time f()`, `!pip install x`,
`x = !ls`) is read as `pass` at its indentation, and a cell magic (`%%bash`) makes its whole cell
comments. Their text is restored as it was when the notebook is written back.

A notebook is linted on its own (the project join reads importable modules; a notebook is not one).
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass, field, replace

from archlint.diagnostics import Diagnostic

SUFFIX = ".ipynb"
# Lines between cells in the Python text: `--fix` splits the fixed text back into cells on them.
BOUNDARY = "# archlint: notebook cell boundary"
_MAGIC = re.compile(r"^(\s*)(?:[!%]|[\w.]+(?:\s*,\s*[\w.]+)*\s*=\s*[!%])")  # `%x`, `!x`, `a = !x`, `a = %x`
_PLACEHOLDER = re.compile(r"^\s*(?:pass  )?# archlint: magic (\d+)$")


# The size limit (max-file-size) counts a notebook's code cells, the Python that is parsed: its
# outputs (a plot as base64, a table) are JSON that is read and never parsed, so the file itself may
# be FILE_FACTOR times the limit (128 MB at the default 2 MB; reading costs about its size again).
FILE_FACTOR = 64


def file_limit(max_code_bytes: int | None) -> int | None:
    return None if max_code_bytes is None else max_code_bytes * FILE_FACTOR


FILE_WHAT = f"of notebook file, outputs included (its limit is {FILE_FACTOR} × max-file-size)"


class NotebookError(ValueError):
    """Not a notebook archlint can read: str() says why."""


def is_notebook(path) -> bool:
    return str(path).endswith(SUFFIX)


@dataclass
class Notebook:
    data: dict
    code_cells: list[int]  # index in data["cells"] of each code cell, in order
    python: str  # the code cells as one Python text, BOUNDARY lines between them
    where: list[
        tuple[int, int]
    ]  # Python line (0-based) → (cell number 1-based, line in cell 1-based); (0, 0) at a BOUNDARY
    magics: list[str] = field(default_factory=list)  # original text of each placeholder line
    layout: dict = field(default_factory=dict)  # json.dumps arguments that give back the file's bytes

    @classmethod
    def parse(cls, raw: bytes) -> Notebook:
        try:
            data = json.loads(raw.decode("utf-8"))
        except (UnicodeDecodeError, json.JSONDecodeError) as exc:
            raise NotebookError(f"not a readable notebook (invalid JSON: {exc})") from None
        except RecursionError:
            raise NotebookError("not a Jupyter notebook (JSON nested too deep to read)") from None
        if not isinstance(data, dict) or not isinstance(data.get("cells"), list):
            raise NotebookError('not a Jupyter notebook (no "cells" list)')
        language = _language(data)
        if language != "python":
            raise NotebookError(f"a {language} notebook: archlint reads Python notebooks only")
        nb = cls(data, [], "", [], layout=_layout(raw, data))
        lines: list[str] = []
        for index, cell in enumerate(data["cells"]):
            if not isinstance(cell, dict) or cell.get("cell_type") != "code":
                continue
            if nb.code_cells:
                lines.append(BOUNDARY)
                nb.where.append((0, 0))
            nb.code_cells.append(index)
            source = _checked_source(cell, index + 1)
            cell_magic = source.lstrip().startswith("%%")
            for n, line in enumerate(source.splitlines(), 1):
                if cell_magic or _MAGIC.match(line):
                    indent = "" if cell_magic else _MAGIC.match(line).group(1)
                    keyword = "" if cell_magic else "pass  "
                    lines.append(f"{indent}{keyword}# archlint: magic {len(nb.magics)}")
                    nb.magics.append(line)
                else:
                    lines.append(line)
                nb.where.append((index + 1, n))
        nb.python = "".join(line + "\n" for line in lines)
        return nb

    def _cell_line(self, line: int) -> tuple[int, int]:
        """(cell number, line in the cell) of a Python-text line; a boundary line counts as the
        next cell's first line; (0, 0) past the end."""
        if not 0 < line <= len(self.where):
            return 0, 0
        cell, n = self.where[line - 1]
        if cell == 0:
            return self.where[line] if line < len(self.where) else (0, 0)
        return cell, n

    def locate(self, d: Diagnostic) -> Diagnostic:
        """The finding at its cell and line in the cell; its fix's edits too, as ruff's JSON gives
        them (each edit is in one cell: fixes never cross a boundary line)."""
        if d.line is None:
            return d
        cell, line = self._cell_line(d.line)
        if cell == 0:
            return d
        end_cell, end_line = self._cell_line(d.end_line) if d.end_line is not None else (0, 0)
        fix = d.fix
        if fix is not None:
            edits = []
            for e in fix.edits:
                (c1, l1), (c2, l2) = self._cell_line(e.start_line), self._cell_line(e.end_line)
                edits.append(replace(e, start_line=l1, end_line=l2) if c1 == c2 == cell else e)
            fix = replace(fix, edits=tuple(edits))
        same = end_cell == cell  # a span across cells ends with its first cell
        return replace(
            d,
            cell=cell,
            line=line,
            end_line=end_line if same else None,
            end_column=d.end_column if same else None,
            fix=fix,
        )

    def rebuild(self, python: str) -> bytes:
        """The notebook's bytes with the code cells' source taken from `python` (a fixed version of
        self.python); everything else as it was. Raises NotebookError when the text no longer
        splits into the same cells."""
        parts = python.split(BOUNDARY + "\n")
        if len(parts) != len(self.code_cells):
            raise NotebookError("the fixes moved a cell boundary")
        data = json.loads(json.dumps(self.data))  # a copy
        for index, text in zip(self.code_cells, parts):
            lines = [self.restored(line) for line in text.splitlines()]
            cell = data["cells"][index]
            old = _source(cell)
            new = "\n".join(lines) + ("\n" if old.endswith("\n") and lines else "")
            if new != old:
                cell["source"] = new.splitlines(keepends=True) if isinstance(cell["source"], list) else new
        return _dumps(data, self.layout)

    def restored(self, line: str) -> str:
        """A line of the Python text as the notebook has it (a magic placeholder → the magic)."""
        placeholder = _PLACEHOLDER.match(line)
        return self.magics[int(placeholder.group(1))] if placeholder else line

    @property
    def writable(self) -> bool:
        """True when writing the unchanged notebook gives back its bytes: then a fix changes only
        the code cells' source. (A layout json cannot reproduce is never written.)"""
        return bool(self.layout)


def _source(cell: dict) -> str:
    source = cell.get("source", "")
    return "".join(source) if isinstance(source, list) else str(source)


def _language(data: dict) -> str:
    """metadata.language_info.name, "python" when not given; NotebookError when the metadata is not
    nbformat's shape (a list, a string: valid JSON, not a notebook archlint can trust)."""
    metadata = data.get("metadata", {})
    if not isinstance(metadata, dict):
        raise NotebookError(f'not a Jupyter notebook (its "metadata" is a {_json_type(metadata)}, not an object)')
    info = metadata.get("language_info", {})
    if not isinstance(info, dict):
        raise NotebookError(f"not a Jupyter notebook (metadata.language_info is a {_json_type(info)}, not an object)")
    name = info.get("name", "python")
    return name if isinstance(name, str) else repr(name)


def _checked_source(cell: dict, number: int) -> str:
    """A code cell's source: a string or a list of strings (nbformat), text that UTF-8 can hold."""
    source = cell.get("source", "")
    if isinstance(source, list) and all(isinstance(part, str) for part in source):
        source = "".join(source)
    if not isinstance(source, str):
        raise NotebookError(f'cell {number}: its "source" is not text (a string or a list of strings)')
    try:
        source.encode("utf-8")
    except UnicodeEncodeError as exc:  # a lone surrogate (`"\\ud800"` in the JSON): no Python file holds it
        raise NotebookError(
            f"cell {number}: its source holds {source[exc.start : exc.end]!a}, a lone surrogate that is not text"
        ) from None
    return source


def _json_type(value) -> str:
    return {list: "list", str: "string", int: "number", float: "number", bool: "boolean"}.get(type(value), "value")


def _layout(raw: bytes, data: dict) -> dict:
    """The json.dumps arguments that reproduce `raw` exactly (nbformat writes indent=1, non-ASCII
    as is, a final newline); {} when none of the usual ones does."""
    for indent in (1, 2, 4, None):
        for ensure_ascii in (False, True):
            for newline in ("\n", ""):
                layout = {"indent": indent, "ensure_ascii": ensure_ascii, "newline": newline}
                try:
                    if _dumps(data, layout) == raw:
                        return layout
                except UnicodeEncodeError:  # a lone surrogate in an output: only an escaped layout holds it
                    continue
    return {}


def _dumps(data: dict, layout: dict) -> bytes:
    text = json.dumps(data, indent=layout["indent"], ensure_ascii=layout["ensure_ascii"])
    return (text + layout["newline"]).encode("utf-8")
