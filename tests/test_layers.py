"""The package's layers import only downward (the order is ``nailseg_common.LAYERS``); tools
sit above the package; each lab folder is a record that imports nothing of another or of
tools, and nothing that has moved."""

import ast
from pathlib import Path

import pytest

from nailseg_common import LAYERS

ROOT = Path(__file__).resolve().parents[1]
PACKAGE = ROOT / "nailseg_common"


def imported_modules(path: Path) -> list[str]:
    """Every absolute module ``path`` imports, at any depth (``from a import b`` gives ``a.b``
    too, as ``b`` may be a module)."""
    found = []
    for node in ast.walk(ast.parse(path.read_text(), filename=str(path))):
        if isinstance(node, ast.Import):
            found += [alias.name for alias in node.names]
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            found.append(node.module)
            found += [f"{node.module}.{alias.name}" for alias in node.names]
    return found


def layer_of(module: str) -> int | None:
    """The rank in ``LAYERS`` of a ``nailseg_common`` module; None for the package itself."""
    parts = module.split(".")
    if parts[0] != "nailseg_common" or len(parts) == 1:
        return None
    return LAYERS.index(parts[1]) if parts[1] in LAYERS else None


def upward_imports(path: Path, own: int) -> list[str]:
    """The modules ``path``, in layer ``own``, imports from a later layer."""
    return [module for module in imported_modules(path)
            if (rank := layer_of(module)) is not None and rank > own]


def test_every_package_module_is_in_a_layer():
    outside = [p.relative_to(PACKAGE).as_posix() for p in PACKAGE.rglob("*.py")
               if p.parent != PACKAGE and p.relative_to(PACKAGE).parts[0] not in LAYERS]
    top = [p.stem for p in PACKAGE.glob("*.py") if p.stem not in ("__init__", *LAYERS)]
    assert outside == [] and top == []


def test_no_package_module_imports_upward():
    found = []
    for path in PACKAGE.rglob("*.py"):
        relative = path.relative_to(PACKAGE)
        if relative.as_posix() == "__init__.py":
            continue
        own = LAYERS.index(relative.parts[0].removesuffix(".py"))
        found += [f"{relative} ({LAYERS[own]}) imports {module}"
                  for module in upward_imports(path, own)]
    assert found == []


def test_an_upward_import_is_caught(tmp_path):
    module = tmp_path / "trainer.py"
    module.write_text("import nailseg_common.core.clock\n"
                      "def f():\n    from nailseg_common.measure import plots\n")
    assert upward_imports(module, LAYERS.index("training")) == [
        "nailseg_common.measure", "nailseg_common.measure.plots"]


def test_tools_import_no_lab():
    found = [f"{p.relative_to(ROOT)} imports {m}" for p in (ROOT / "tools").rglob("*.py")
             for m in imported_modules(p) if m.split(".")[0] == "lab"]
    assert found == []


@pytest.mark.parametrize("folder", sorted({p.parent.name for p in (ROOT / "lab").glob("*/*.py")}))
def test_a_lab_folder_imports_no_other_folder_and_no_tools(folder):
    found = []
    for path in (ROOT / "lab" / folder).rglob("*.py"):
        for module in imported_modules(path):
            parts = module.split(".")
            if parts[0] == "tools" or (parts[0] == "lab" and parts[1:2] not in ([folder], [])):
                found.append(f"{path.relative_to(ROOT)} imports {module}")
    assert found == []


def repository_module(module: str) -> Path | None:
    """The file of a module of this repository (``a.b``: ``a/b.py`` or ``a/b/__init__.py``)."""
    base = ROOT.joinpath(*module.split("."))
    return next((p for p in (base.with_suffix(".py"), base / "__init__.py") if p.exists()), None)


def defined_names(path: Path) -> set[str]:
    """Every name ``path`` defines or imports, at any depth."""
    names = set()
    for node in ast.walk(ast.parse(path.read_text(), filename=str(path))):
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            names.add(node.name)
        elif isinstance(node, (ast.Import, ast.ImportFrom)):
            names |= {(alias.asname or alias.name).split(".")[0] for alias in node.names}
        elif isinstance(node, (ast.Assign, ast.AnnAssign)):
            targets = node.targets if isinstance(node, ast.Assign) else [node.target]
            names |= {n.id for t in targets for n in ast.walk(t) if isinstance(n, ast.Name)}
    return names


def missing_imports(path: Path) -> list[str]:
    """The course modules and names ``path`` imports that do not exist."""
    missing = []
    for node in ast.walk(ast.parse(path.read_text(), filename=str(path))):
        if isinstance(node, ast.Import):
            missing += [alias.name for alias in node.names if alias.name.split(".")[0]
                        in ("nailseg_common", "lab") and repository_module(alias.name) is None]
        elif (isinstance(node, ast.ImportFrom) and node.level == 0 and node.module
              and node.module.split(".")[0] in ("nailseg_common", "lab")):
            if (file := repository_module(node.module)) is None:
                missing.append(node.module)
                continue
            names = defined_names(file)
            missing += [f"{node.module}.{alias.name}" for alias in node.names if alias.name not in names
                        and repository_module(f"{node.module}.{alias.name}") is None]
    return missing


def test_a_missing_import_is_caught(tmp_path):
    script = tmp_path / "record.py"
    script.write_text("from nailseg_common.core.errors import DataError, Gone\nimport nailseg_common.moved\n")
    assert sorted(missing_imports(script)) == ["nailseg_common.core.errors.Gone", "nailseg_common.moved"]


@pytest.mark.parametrize("folder", sorted({p.parent.name for p in (ROOT / "lab").glob("*/*.py")}))
def test_a_lab_record_imports_only_what_exists(folder):
    """A frozen record runs at today's code, or leaves its script to git history (its README
    names the commit): it never keeps an import of something that has moved."""
    found = [f"{p.relative_to(ROOT)}: {m}" for p in (ROOT / "lab" / folder).rglob("*.py")
             for m in missing_imports(p)]
    assert found == []
