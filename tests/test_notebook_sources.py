"""Every course notebook is committed clean and opens the same way."""

import json
from pathlib import Path

import pytest

NOTEBOOKS = sorted((Path(__file__).resolve().parents[1] / "notebooks").glob("[0-9][0-9]_*.ipynb"))


def test_the_five_notebooks_exist():
    assert [nb.name[:2] for nb in NOTEBOOKS] == ["01", "02", "03", "04", "05"]


@pytest.fixture(params=NOTEBOOKS, ids=lambda p: p.name)
def notebook(request):
    return json.loads(request.param.read_text())


def test_committed_without_outputs(notebook):
    for cell in notebook["cells"]:
        if cell["cell_type"] == "code":
            assert not cell["outputs"] and cell["execution_count"] is None


def test_common_opening_and_closing(notebook):
    cells = notebook["cells"]
    text = ["".join(c["source"]) for c in cells]
    assert cells[0]["cell_type"] == "markdown" and text[0].startswith("# ")
    assert "What you'll learn" in text[0]
    params = [c for c in cells if "parameters" in c.get("metadata", {}).get("tags", [])]
    assert len(params) == 1, "exactly one cell tagged `parameters`"
    assert "profile =" in "".join(params[0]["source"])
    assert any("environment_report(" in t for t in text)
    assert any("ensure_prepared(" in t for t in text)
    assert any(t.startswith("## Summary") for t in text)
    assert any(t.startswith("## Exercises") for t in text)
    assert not any("sys.path" in t for t in text), "import the installed package, no sys.path"


def test_blog_metadata(notebook):
    blog = notebook["metadata"]["blog"]
    assert blog["title"] and blog["description"] and blog["categories"]
    assert len(blog["date"]) == 10
