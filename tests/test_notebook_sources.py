"""Every course notebook is committed clean, opens the same way, owns the code it teaches,
and matches its text copy and its exported modules."""

import ast
import json
import subprocess
import sys
from pathlib import Path

import jupytext
import nbformat
import pytest

from nailseg_common.setup.profiles import SETTABLE_FIELDS
from tools.publishing import export

ROOT = Path(__file__).resolve().parents[1]
NOTEBOOKS = sorted((ROOT / "notebooks").glob("[0-9][0-9]_*.ipynb"))
PROFILE_FIELDS = set(SETTABLE_FIELDS)


def test_the_notebooks_exist():
    assert [nb.name[:2] for nb in NOTEBOOKS] == ["01", "02", "03", "04", "05", "06", "07", "08"]


@pytest.fixture(params=NOTEBOOKS, ids=lambda p: p.name)
def path(request):
    return request.param


@pytest.fixture
def notebook(path):
    return nbformat.read(path, as_version=4)


def code_cells(notebook):
    return [c for c in notebook.cells if c.cell_type == "code"]


def parameters_cell(notebook):
    cells = [c for c in notebook.cells if "parameters" in c.metadata.get("tags", [])]
    assert len(cells) == 1, "exactly one cell tagged `parameters`"
    return cells[0]


def test_committed_without_outputs(path):
    for cell in json.loads(path.read_text())["cells"]:
        if cell["cell_type"] == "code":
            assert not cell["outputs"] and cell["execution_count"] is None


def test_common_opening_and_closing(notebook):
    text = [c.source for c in notebook.cells]
    assert notebook.cells[0].cell_type == "markdown" and text[0].startswith("# ")
    assert "What you'll learn" in text[0]
    assert "profile =" in parameters_cell(notebook).source
    setup = [c.source for c in code_cells(notebook) if "start(" in c.source]
    assert setup and "from nailseg_common.course import start" in setup[0], \
        "one set-up call, `cfg, data = start(globals())`, after the parameters"
    assert any("## Summary" in t for t in text)
    assert any("## Exercises" in t for t in text)
    assert not any("sys.path" in t for t in text), "import the installed package, no sys.path"


def test_papermill_reads_every_parameter(notebook, capsys):
    """papermill parses each line (a quote in a comment makes it skip the line, and then
    refuse the parameter as unknown)."""
    from papermill.translators import PythonTranslator

    source = parameters_cell(notebook).source
    names = [p.name for p in PythonTranslator.inspect({"source": source})]
    assignments = [line for line in source.splitlines() if line.strip()
                   and not line.strip().startswith("#")]
    assert len(names) == len(assignments), capsys.readouterr()


MAX_CODE_LINES, MAX_CELL_LINES = 350, 40


def test_read_in_one_sitting(notebook):
    """At most 350 code lines a notebook and cells that fit on a screen (non-blank lines)."""
    lengths = [sum(1 for line in c.source.splitlines() if line.strip())
               for c in code_cells(notebook)]
    assert sum(lengths) <= MAX_CODE_LINES and max(lengths) <= MAX_CELL_LINES, \
        f"{sum(lengths)} code lines (at most {MAX_CODE_LINES}), longest cell {max(lengths)}"


def test_blog_metadata(notebook):
    blog = notebook.metadata["blog"]
    assert "title" not in blog, "the title is the notebook's first heading, written once"
    assert blog["description"] and blog["categories"] and len(blog["date"]) == 10


def test_text_copy_matches_the_notebook(path, notebook):
    """The py:percent copy (what ruff, grep and `duplicates` read) says what the notebook says."""
    paired = jupytext.read(path.with_suffix(".py"))
    strip = lambda nb: [(c.cell_type, c.source, c.metadata.get("tags", [])) for c in nb.cells]
    assert strip(paired) == strip(notebook), f"run `make export` to sync {path.name} and its .py"


# A profile field a notebook offers under a parameter that says more (none today).
OFFERED_AS: dict[str, str] = {}


def test_every_parameter_is_used_and_every_profile_field_used_is_a_parameter(notebook):
    params = ast.parse(parameters_cell(notebook).source)
    offered = {t.id for node in params.body if isinstance(node, ast.Assign) for t in node.targets}
    rest = ast.parse("\n".join(c.source for c in code_cells(notebook)
                               if c is not parameters_cell(notebook)
                               and not c.source.startswith(export.DIRECTIVE)))
    starts = [n for n in ast.walk(rest) if isinstance(n, ast.Call) and getattr(n.func, "id", "") == "start"]
    assert starts and "globals()" in ast.unparse(starts[0].args[0]), "start(globals()) reads the parameters"
    read_by_start = {p for p in offered if p in PROFILE_FIELDS or p in ("profile", "data_root")}
    used = {n.id for n in ast.walk(rest) if isinstance(n, ast.Name)} | read_by_start
    assert offered <= used, f"parameters the notebook ignores: {sorted(offered - used)}"
    read = {n.attr for n in ast.walk(rest) if isinstance(n, ast.Attribute)
            and getattr(n.value, "id", "") == "cfg" and n.attr in PROFILE_FIELDS}
    aliased = {field for field, alias in OFFERED_AS.items() if alias in offered}
    assert read <= offered | aliased, f"profile fields used but not offered: {sorted(read - offered)}"


def test_exported_modules_match_their_notebooks():
    modules = export.collect(NOTEBOOKS)
    assert {"data.split", "pipelines.policy", "pipelines.albumentations_pipeline",
            "training.unet", "training.trainer", "pipelines.kornia_pipeline",
            "pipelines.dali_pipeline", "measure.timing", "training.fine_tuning",
            "training.fast_training", "training.multi_gpu"} <= set(modules)
    assert export.stale_modules(modules) == [], "run `make export`"


def test_the_package_has_no_import_cycle():
    package = ROOT / "nailseg_common"
    graph = {}
    for path in package.rglob("*.py"):
        name = ".".join(path.relative_to(ROOT).with_suffix("").parts).removesuffix(".__init__")
        deps = set()
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.ImportFrom) and node.module:
                base = node.module if not node.level else (
                    ".".join(name.split(".")[: -node.level] + [node.module]))
                deps |= {base} | {f"{base}.{a.name}" for a in node.names}
            elif isinstance(node, ast.Import):
                deps |= {a.name for a in node.names}
        graph[name] = deps
    graph = {k: {d for d in v if d in graph and d != k and d != "nailseg_common"}
             for k, v in graph.items()}

    def reaches(start, goal, seen):
        return any(d == goal or (d not in seen and reaches(d, goal, seen | {d}))
                   for d in graph[start])

    cycles = sorted(m for m in graph if reaches(m, m, {m}))
    assert not cycles, f"modules in an import cycle: {cycles}"


def test_ruff_finds_nothing():
    result = subprocess.run([sys.executable, "-m", "ruff", "check", "--quiet", str(ROOT)],
                            capture_output=True, text=True, check=False)
    assert result.returncode == 0, result.stdout + result.stderr
