"""The package's layers import only downward (the order is ``nailseg_common.LAYERS``); tools
sit above the package; each lab folder is a record that imports nothing of another or of tools."""

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
