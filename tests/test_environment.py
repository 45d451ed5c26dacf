"""The environment files agree: pyproject.toml holds every pin, environment.yml follows it."""

import re
import tomllib
from pathlib import Path

import yaml

ROOT = Path(__file__).resolve().parents[1]


def pyproject():
    return tomllib.loads((ROOT / "pyproject.toml").read_text())


def pins():
    """name -> version for every `name==version` requirement in pyproject.toml."""
    project = pyproject()["project"]
    reqs = project["dependencies"] + [r for extra in project["optional-dependencies"].values()
                                      for r in extra]
    found = {}
    for req in reqs:
        match = re.fullmatch(r"([A-Za-z0-9_.\-]+)==([^;\s]+)\s*(;.*)?", req)
        assert match, f"pyproject.toml: {req!r} is not pinned with =="
        found[match[1].lower()] = match[2]
    return found


def test_course_stack_is_pinned():
    expected = {"torch": "2.14.1", "torchvision": "0.29.1", "kornia": "0.9.0",
                "albumentations": "2.0.8", "segmentation-models-pytorch": "0.6.0",
                "nvidia-dali-cuda120": "2.4.0"}
    assert {k: pins().get(k) for k in expected} == expected
    for name in ("pytorch-lightning", "papermill", "nbmake", "jupyterlab", "ipykernel",
                 "matplotlib", "pandas", "pytest", "ruff"):
        assert name in pins(), f"{name} missing from pyproject.toml"


def test_dali_only_on_linux_x86_64():
    dali = [r for r in pyproject()["project"]["dependencies"] if r.startswith("nvidia-dali")]
    assert dali and "platform_system == 'Linux'" in dali[0] and "x86_64" in dali[0]


def test_environment_yml_installs_the_package_and_agrees_on_python():
    env = yaml.safe_load((ROOT / "environment.yml").read_text())
    deps = env["dependencies"]
    pip_section = next(d["pip"] for d in deps if isinstance(d, dict) and "pip" in d)
    assert "-e .[dev]" in pip_section, "environment.yml must install the package with pip"
    python = next(d for d in deps if isinstance(d, str) and d.startswith("python="))
    major_minor = python.split("=")[1]
    lower, upper = re.findall(r"(\d+\.\d+)", pyproject()["project"]["requires-python"])
    as_tuple = lambda v: tuple(map(int, v.split(".")))
    assert as_tuple(lower) <= as_tuple(major_minor) < as_tuple(upper)


def test_environment_yml_repeats_no_pin_differently():
    """Any package environment.yml names with a version must carry pyproject's version."""
    env = yaml.safe_load((ROOT / "environment.yml").read_text())
    entries = [d for d in env["dependencies"] if isinstance(d, str)]
    entries += [e for d in env["dependencies"] if isinstance(d, dict) for e in d.get("pip", [])]
    for entry in entries:
        match = re.fullmatch(r"([A-Za-z0-9_.\-]+)\s*=?=\s*([\w.]+)", entry)
        if match and match[1].lower() not in ("python", "pip"):
            assert pins().get(match[1].lower()) == match[2], f"environment.yml: {entry} drifts"


def test_a_profile_leaves_stderr_clean():
    """torch.profiler's tracer prints its start, stop and a missing GPU to stderr unless the
    package quiets it (07 and 08 profile a step in view)."""
    import os
    import subprocess
    import sys

    env = {k: v for k, v in os.environ.items() if k != "KINETO_LOG_LEVEL"}  # as a fresh shell has it
    script = ("import nailseg_common, torch\n"
              "from torch.profiler import profile\n"
              "with profile():\n    torch.ones(4) @ torch.ones(4)\n")
    run = subprocess.run([sys.executable, "-c", script], check=False, capture_output=True, text=True,
                         timeout=120, env=env)
    assert run.returncode == 0 and "profiler_start" not in run.stderr and "ERROR" not in run.stderr


def test_results_files_take_their_head_from_one_function():
    """When, on what and with which versions a results file was measured: ``provenance()``,
    built once, so every file the course writes has the same head."""
    root = Path(__file__).resolve().parents[1]
    owner = root / "nailseg_common" / "setup" / "environment.py"
    found = [str(p.relative_to(root)) for folder in ("nailseg_common", "tools") for p in (root / folder).rglob("*.py")
             if p != owner and re.search(r"library_versions\(\)|python_version\(\)", p.read_text())]
    assert found == []
