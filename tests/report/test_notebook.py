"""The example notebook runs end to end, and the report it renders opens cleanly in Chromium."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

pytest.importorskip("torch")
nbformat = pytest.importorskip("nbformat")
nbclient = pytest.importorskip("nbclient")

from chromium_cdp import Chromium, find_chromium  # noqa: E402

EXAMPLES = Path(__file__).resolve().parents[2] / "examples"


@pytest.fixture(scope="module")
def executed(tmp_path_factory) -> tuple[Path, nbformat.NotebookNode]:
    folder = tmp_path_factory.mktemp("notebook")
    for name in ("notebook.ipynb", "nets.py"):
        shutil.copy(EXAMPLES / name, folder / name)
    notebook = nbformat.read(folder / "notebook.ipynb", as_version=4)
    nbclient.NotebookClient(
        notebook, timeout=300, kernel_name="python3", resources={"metadata": {"path": str(folder)}}
    ).execute()
    return folder, notebook


def test_notebook_runs_and_renders_a_report(executed):
    folder, notebook = executed
    outputs = [o for cell in notebook.cells if cell.cell_type == "code" for o in cell.outputs]
    assert not [o for o in outputs if o.output_type == "error"]
    shown = next(o for o in outputs if "text/html" in o.get("data", {}))
    assert "class='archlint-report'" in shown["data"]["text/html"] and "TinyNet" in shown["data"]["text/html"]
    assert (folder / "tinynet-report.html").stat().st_size > 10_000


def test_rendered_reports_open_in_chromium(executed, tmp_path):
    binary = find_chromium()
    if binary is None:
        pytest.skip("Chromium is not installed (apt-get install chromium); .ci/run installs it")
    folder, notebook = executed
    cell_html = next(
        o["data"]["text/html"]
        for cell in notebook.cells
        if cell.cell_type == "code"
        for o in cell.outputs
        if "text/html" in o.get("data", {})
    )
    page_file = tmp_path / "cell.html"
    page_file.write_text(f"<!DOCTYPE html><html><head><meta charset='utf-8'></head><body>{cell_html}</body></html>")
    browser = Chromium(binary)
    try:
        for path, ready in ((page_file, "document.readyState === 'complete'"), (folder / "tinynet-report.html", None)):
            page = browser.open_page(path, **({"ready_js": ready} if ready else {}))
            log = page.log()
            assert log.errors == [] and log.requests == [path.resolve().as_uri()]
            assert page.evaluate("document.body.innerText").count("TinyNet") >= 1
    finally:
        browser.close()
