"""File discovery, the cache, noqa comments and rule selection."""

from __future__ import annotations

import os

from archlint.code import cache as cache_files
from archlint.code import engine, lint, workers
from archlint.code.discover import discover
from archlint.config import Settings

FINDING = "import torch\nx = torch.zeros(3).cuda()\n"


def names(files, root):
    return sorted(os.path.relpath(f, root) for f in files)


def test_discovery_skips_vcs_venvs_build_and_gitignored(tmp_path):
    for rel in [
        "a.py",
        "pkg/b.py",
        ".git/c.py",
        "build/d.py",
        "env/lib/e.py",
        "node_modules/f.py",
        "logs/g.py",
        "pkg/gen_h.py",
        "pkg/keep_gen.py",
        "notes.txt",
        "pkg/__pycache__/i.py",
    ]:
        path = tmp_path / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text("x = 1\n")
    (tmp_path / "env" / "pyvenv.cfg").write_text("home = /usr\n")
    (tmp_path / ".gitignore").write_text("/logs/\ngen_*.py\n")
    (tmp_path / "pkg" / ".gitignore").write_text("!keep_gen.py\n")
    assert names(discover([tmp_path]), tmp_path) == ["a.py", "pkg/b.py", "pkg/keep_gen.py"]
    assert names(discover([tmp_path / "logs" / "g.py"]), tmp_path) == ["logs/g.py"]  # named: linted


def test_cache_reuses_results_and_is_keyed_by_content(tmp_path, monkeypatch):
    (tmp_path / "a.py").write_text(FINDING)
    (tmp_path / "b.py").write_text("import torch\n")
    settings = Settings(root=tmp_path)
    first = lint.lint_paths([tmp_path], settings).diagnostics
    assert (tmp_path / ".archlint_cache" / cache_files.CODE_FILE).is_file()

    calls = []
    real = lint._work
    monkeypatch.setattr(lint, "_work", lambda item: calls.append(item[0]) or real(item))
    second = lint.lint_paths([tmp_path], settings).diagnostics
    assert calls == [] and [d.to_dict() for d in second] == [d.to_dict() for d in first]

    (tmp_path / "b.py").write_text(FINDING + "y = 1\n")
    third = lint.lint_paths([tmp_path], settings).diagnostics
    assert [os.path.basename(c) for c in calls] == ["b.py"]
    assert len(third) == 2
    lint.lint_paths([tmp_path], Settings(root=tmp_path, cache=False))
    assert len(calls) == 3  # --no-cache parses every file


def test_cache_key_includes_version(tmp_path, monkeypatch):
    (tmp_path / "a.py").write_text(FINDING)
    lint.lint_paths([tmp_path], Settings(root=tmp_path))
    calls = []
    real = lint._work
    monkeypatch.setattr(lint, "_work", lambda item: calls.append(item[0]) or real(item))
    monkeypatch.setattr(cache_files, "__version__", "9.9.9")
    lint.lint_paths([tmp_path], Settings(root=tmp_path))
    assert len(calls) == 1


def test_parallel_matches_serial(tmp_path):
    for i in range(workers.PARALLEL_MIN_FILES + 2):
        (tmp_path / f"f{i}.py").write_text(FINDING * (i % 3 + 1))
    serial = lint.lint_paths([tmp_path], Settings(root=tmp_path, cache=False, jobs=1)).diagnostics
    parallel = lint.lint_paths([tmp_path], Settings(root=tmp_path, cache=False, jobs=2)).diagnostics
    assert [d.to_dict() for d in serial] == [d.to_dict() for d in parallel]


def codes(src):
    return [(d.line, d.code) for d in engine.lint_text(src, "t.py")]


def test_noqa_line_and_file():
    base = "import torch\nx = torch.zeros(3).cuda(){}\nopt.zero_grad(set_to_none=False)\n"
    assert codes(base.format("")) == [(2, "AL402"), (3, "AL407")]
    assert codes(base.format("  # noqa: AL402")) == [(3, "AL407")]
    assert codes(base.format("  # noqa:AL407,AL402")) == [(3, "AL407")]
    assert codes(base.format("  # noqa: AL301")) == [(2, "AL402"), (3, "AL407")]
    assert codes(base.format("  # noqa")) == [(3, "AL407")]
    assert codes("# archlint: noqa\n" + base.format("")) == []
    assert codes("# archlint: noqa: AL407\n" + base.format("")) == [(3, "AL402")]


def test_select_ignore_and_per_file_ignores(tmp_path):
    (tmp_path / "a.py").write_text(FINDING + "opt.zero_grad(set_to_none=False)\n")

    def run(**kw):
        found = lint.lint_paths([tmp_path / "a.py"], Settings(root=tmp_path, cache=False, **kw)).diagnostics
        return sorted(d.code for d in found)

    assert run() == ["AL402", "AL407"]
    assert run(select=["AL3"]) == []
    assert run(select=["AL40"], ignore=["AL407"]) == ["AL402"]
    assert run(select=["AL3"], extend_select=["AL402"]) == ["AL402"]
    assert run(per_file_ignores={"a.py": ["AL4"]}) == []


def test_cache_is_json_and_survives_corruption(tmp_path, capsys):
    (tmp_path / "a.py").write_text(FINDING)
    settings = Settings(root=tmp_path)
    first = lint.lint_paths([tmp_path], settings).diagnostics
    path = tmp_path / ".archlint_cache" / cache_files.CODE_FILE
    import json

    data = json.loads(path.read_text())  # JSON: loading it can never run code
    assert len(data["entries"]) == 1
    path.write_text("{not json")
    again = lint.lint_paths([tmp_path], settings).diagnostics
    assert [d.to_dict() for d in again] == [d.to_dict() for d in first]
    assert "ignoring unreadable cache" in capsys.readouterr().err
