"""The code linter's cache files (`.archlint_cache/` or `cache-dir`): JSON, signed, written whole.

- JSON, not pickle: loading a pickle from a cloned repository could run code.
- Signed with a key kept in this user's own cache folder (never in the project): a cache file is
  data lying in the project, and a committed or hand-edited one (an entry `[]` for a file hides
  its findings) must not be believed. A file this user's archlint did not write is ignored, with
  a warning, and every file is linted again. Entries are keyed by the file's content, archlint's
  version and the settings that change findings (`fingerprint`), and checked for shape when read.
- Written through the one writer (archlint/outputs.py: a temporary file renamed over the old one,
  never through a link), merged under a lock with what another run wrote meanwhile, so concurrent
  runs keep each other's entries.
- The folder: archlint writes a `.gitignore` of `*` only into a folder it has just created (never
  into an existing one: `cache-dir = "."` must not hide the project from git), and opens every
  file in it without following links (a dangling link must not make it create a file elsewhere).
"""

from __future__ import annotations

import contextlib
import functools
import hashlib
import hmac
import json
import os
import re
import secrets
import stat
import sys
from pathlib import Path

from archlint import __version__
from archlint.config import Settings
from archlint.diagnostics import Applicability, Diagnostic, Edit, Fix, Severity
from archlint.errors import UsageError
from archlint.outputs import write_bytes

CODE_FILE = "code-v1.json"  # each file's own findings, by content key
# v4: the facts' entries are project_facts' records (NamedTuples, written as lists of every field:
# a step's on_param is null, not absent), and a pin to resolve is a PinRef; v3 caches are ignored
PROJECT_FILE = "project-v4.json"
LIMIT = 50_000  # entries; beyond it only this run's are kept
_HEADER = re.compile(rb'\A\{"archlint_cache":1,"mac":"([0-9a-f]{64})","entries":')
_NOFOLLOW = getattr(os, "O_NOFOLLOW", 0) | getattr(os, "O_CLOEXEC", 0)  # POSIX; Windows has no links to follow here


def folder(settings: Settings) -> Path:
    return settings.cache_dir or settings.root / ".archlint_cache"


@functools.cache
def _key() -> bytes | None:
    """This user's signing key (created on first use), or None when it cannot be kept (said once:
    the cache is then not used)."""
    home = Path(
        os.environ.get("ARCHLINT_CACHE_DIR")  # where the roofline cache lives too
        or Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache") / "archlint"
    )
    path = home / "cache-key"
    try:
        home.mkdir(parents=True, exist_ok=True)
        if not os.path.lexists(path):  # written whole, then linked in: a run beside us never reads half a key
            with contextlib.suppress(FileExistsError):  # another run made it first: theirs is the key
                write_bytes(path, secrets.token_hex(32).encode("ascii"), "the cache's key", mode=0o600, replace=False)
        key = bytes.fromhex(_read(path).decode("ascii").strip())
        if len(key) < 16:
            raise ValueError("too short")
        return key
    except (OSError, ValueError, UsageError) as exc:
        print(
            f"archlint: warning: cannot keep the cache's key in {path} ({getattr(exc, 'strerror', None) or exc}); "
            "the cache is not used this run",
            file=sys.stderr,
        )
        return None


def _mac(key: bytes, payload: bytes) -> str:
    return hashlib.blake2b(payload, key=key[:64], digest_size=32).hexdigest()


def dump(entries: dict) -> bytes | None:
    """The signed file's bytes (None without a key): still one JSON object."""
    key = _key()
    if key is None:
        return None
    payload = json.dumps(entries, separators=(",", ":")).encode()
    return b'{"archlint_cache":1,"mac":"' + _mac(key, payload).encode() + b'","entries":' + payload + b"}"


def _read(path: Path) -> bytes:
    """A regular file's bytes, never through a link (ELOOP) and never blocking on a FIFO."""
    fd = os.open(path, os.O_RDONLY | getattr(os, "O_NONBLOCK", 0) | _NOFOLLOW)
    try:
        if not stat.S_ISREG(os.fstat(fd).st_mode):
            raise OSError("not a regular file")
        with os.fdopen(os.dup(fd), "rb") as f:
            return f.read()
    finally:
        os.close(fd)


def load(path: Path, quiet: bool = False) -> dict:
    """The entries of a cache file archlint wrote for this user; {} (with a warning unless quiet)
    for a missing, unreadable, unsigned or altered one."""

    def ignored(why: str) -> dict:
        if not quiet:
            print(f"archlint: warning: ignoring {why}; linting every file", file=sys.stderr)
        return {}

    try:
        data = _read(path)
    except FileNotFoundError:
        return {}
    except OSError as exc:
        return ignored(f"unreadable cache {path} ({exc.strerror or exc})")
    found = _HEADER.match(data)
    if not found or not data.endswith(b"}"):
        return ignored(f"unreadable cache {path} (not a cache file this archlint writes)")
    key = _key()
    if key is None:
        return {}
    payload = data[found.end() : -1]
    if not hmac.compare_digest(_mac(key, payload), found.group(1).decode()):
        return ignored(f"cache {path}: not written by archlint for this user (copied, committed or edited)")
    try:
        entries = json.loads(payload)
    except ValueError as exc:
        return ignored(f"unreadable cache {path} ({exc})")
    if not isinstance(entries, dict):
        return ignored(f"unreadable cache {path} (not a JSON object)")
    return entries


def save(path: Path, entries: dict, fresh: set[str] | None = None) -> None:
    """Merge `entries` into the file under a lock and write it atomically. `fresh` are this run's
    keys, kept first when the merged cache is over the limit."""
    try:
        _prepare(path.parent)
        with locked(path.with_suffix(".lock")):
            merged = {**load(path, quiet=True), **entries}
            if len(merged) > LIMIT:
                merged = {k: v for k, v in entries.items() if fresh is None or k in fresh}
            data = dump(merged)
            if data is None:
                return
            write_bytes(path, data, "the lint cache", mode=0o644)  # the one writer: whole, never through a link
    except (OSError, UsageError) as exc:
        print(
            f"archlint: warning: cannot write the cache at {path} ({getattr(exc, 'strerror', None) or exc}); "
            "next run lints every file again",
            file=sys.stderr,
        )


def _prepare(where: Path) -> None:
    """Create the cache folder; only a folder created now gets the `.gitignore` that hides it."""
    where.parent.mkdir(parents=True, exist_ok=True)
    try:
        os.mkdir(where)
    except FileExistsError:
        return  # the user's folder (or one made by an earlier run, which wrote the .gitignore)
    write_bytes(
        where / ".gitignore", b"# Created by archlint\n*\n", "the cache folder's .gitignore", mode=0o644, replace=False
    )


@contextlib.contextmanager
def locked(path: Path):
    """An exclusive lock on `path` (created if missing, never through a link) for the block; none
    where fcntl is missing."""
    try:
        import fcntl
    except ImportError:  # pragma: no cover - Windows: last writer wins
        yield
        return
    fd = os.open(path, os.O_RDWR | os.O_CREAT | _NOFOLLOW, 0o644)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX)
        yield
    finally:
        os.close(fd)  # releases the lock


# keys ---------------------------------------------------------------------------------------------
@functools.cache
def linter_source_digest() -> str:
    """A digest of the code linter's own source: a cache written by other linter code (an editable
    install, an upgrade that kept the version number) is never read as if this code had written it."""
    h = hashlib.blake2b(digest_size=8)
    package = Path(__file__).parent
    for path in sorted(package.rglob("*.py")):
        h.update(path.relative_to(package).as_posix().encode() + b"\0" + path.read_bytes())
    return h.hexdigest()


def fingerprint(settings: Settings) -> bytes:
    """What besides a file's text decides its findings: archlint's version and source, and the
    options of the code rules. Every cache key starts with it."""
    options = {k: v for k, v in settings.rule_options.items() if k.startswith(("AL3", "AL4"))}
    return f"{__version__}|{linter_source_digest()}|{json.dumps(options, sort_keys=True, default=str)}|".encode()


def content_key(prefix: bytes, data: bytes, extra: str = "") -> str:
    """The key of a file's entry: the fingerprint, its bytes and (for findings in context) its context."""
    return hashlib.blake2b(prefix + data + extra.encode(), digest_size=16).hexdigest()


# findings as JSON records -------------------------------------------------------------------------
def to_record(d: Diagnostic) -> list:
    return [
        d.code,
        d.message,
        d.severity.value,
        d.line,
        d.column,
        d.end_line,
        d.end_column,
        d.fix.to_dict() if d.fix else None,
    ]


def _check_record(record) -> None:
    """Raise ValueError unless the record has the shape to_record writes (a cache edited by hand or
    by another version must not reach the reporters: a string line number broke the SARIF writer)."""
    if not isinstance(record, list) or len(record) != 8:
        raise ValueError("not a list of 8 fields")
    code, message, _severity, *positions, fix = record
    if not (isinstance(code, str) and isinstance(message, str)):
        raise ValueError("code and message must be strings")
    if not all(p is None or (isinstance(p, int) and not isinstance(p, bool) and p >= 0) for p in positions):
        raise ValueError("line and column must be non-negative integers")
    if fix is not None:
        edits = fix.get("edits") if isinstance(fix, dict) else None
        if not isinstance(edits, list) or not isinstance(fix.get("message"), str):
            raise ValueError("malformed fix")
        for e in edits:
            points = (
                e["location"]["row"],
                e["location"]["column"],
                e["end_location"]["row"],
                e["end_location"]["column"],
            )
            if not all(isinstance(v, int) and not isinstance(v, bool) and v >= 1 for v in points) or not isinstance(
                e["content"], str
            ):
                raise ValueError("malformed fix edit")


def from_record(record: list, file: str) -> Diagnostic:
    """The finding a record holds; ValueError, KeyError or TypeError for a malformed one."""
    _check_record(record)
    code, message, severity, line, column, end_line, end_column, fix = record
    if fix is not None:
        edits = tuple(
            Edit(
                e["location"]["row"],
                e["location"]["column"],
                e["end_location"]["row"],
                e["end_location"]["column"],
                e["content"],
            )
            for e in fix["edits"]
        )
        fix = Fix(fix["message"], Applicability(fix["applicability"]), edits)
    return Diagnostic(
        code,
        message,
        Severity(severity),
        file=file,
        line=line,
        column=column,
        end_line=end_line,
        end_column=end_column,
        fix=fix,
    )


# the project join's cache -------------------------------------------------------------------------
class ProjectStore:
    """The project join's cache (project.py): files' facts by content key, and findings in context
    by content + context key."""

    def __init__(self, settings: Settings) -> None:
        self.enabled = settings.cache
        self.prefix = fingerprint(settings)  # what every key starts with (the linter and its options)
        self.path = folder(settings) / PROJECT_FILE
        data = load(self.path) if self.enabled else {}
        self.facts: dict = data.get("facts", {}) if isinstance(data.get("facts"), dict) else {}
        self.lint: dict = data.get("lint", {}) if isinstance(data.get("lint"), dict) else {}
        self.used: set[str] = set()
        self.loaded = set(self.facts)  # read from the cache: suspects when the join fails
        self.dirty = False

    def key(self, data: bytes, extra: str = "") -> str:
        """The content key of a file's bytes (with `extra`: of something derived from them)."""
        return content_key(self.prefix, data, extra)

    def summary(self, key: str):
        if key in self.facts:
            self.used.add(key)
            return self.facts[key]
        return None

    def put_summary(self, key: str, summary: dict | None) -> None:
        self.facts[key] = summary
        self.used.add(key)
        self.dirty = True

    def put_findings(self, key: str, diagnostics: list[Diagnostic]) -> None:
        self.lint[key] = [to_record(d) for d in diagnostics]
        self.used.add(key)
        self.dirty = True

    def evict(self) -> int:
        """Forget the facts this run read from the cache (they are extracted again); how many."""
        stale = self.used & self.loaded
        for key in stale:
            self.facts.pop(key, None)
        self.loaded -= stale
        self.dirty = True
        return len(stale)

    def save(self) -> None:
        if not self.enabled or not self.dirty:
            return
        facts, lint = self.facts, self.lint
        if len(facts) + len(lint) > LIMIT:
            facts = {k: v for k, v in facts.items() if k in self.used}
            lint = {k: v for k, v in lint.items() if k in self.used}
        save(self.path, {"facts": facts, "lint": lint})
