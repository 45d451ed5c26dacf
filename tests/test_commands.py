"""The installed commands as a user's shell or script starts them: each entry point goes
through ``command_line.launch`` and exits 0 after a run that succeeds, without a word on
stderr that reads as an error. Tiny inputs in the smoke profile; data and runs in a fresh
folder."""

import os
import subprocess
import sys
import tomllib
from pathlib import Path

import numpy as np
import pytest
from PIL import Image

from nailseg_common.commands import command_line, train
from nailseg_common.setup.paths import REPO_ROOT

SCRIPTS = tomllib.loads((REPO_ROOT / "pyproject.toml").read_text())["project"]["scripts"]


def test_every_entry_point_is_launched_by_command_line(monkeypatch):
    """Each target is a function of ``command_line`` that returns ``launch(<its module>)``,
    so Ctrl-C while importing is one line and the script's exit status is an ``int``."""
    monkeypatch.setattr(command_line, "launch", lambda module: f"launched {module}")
    for script, target in SCRIPTS.items():
        module, function = target.split(":")
        assert module == command_line.__name__, script
        assert getattr(command_line, function)().startswith("launched "), script


@pytest.fixture(scope="module")
def folders(tmp_path_factory) -> Path:
    """Six tiny photos with masks (flat layout) and the fresh data and runs folders."""
    root = tmp_path_factory.mktemp("commands")
    for folder in ("Images", "Masks"):
        (root / "nails" / folder).mkdir(parents=True)
    rng = np.random.default_rng(0)
    for index in range(6):
        mask = np.zeros((48, 40), np.uint8)
        mask[10 + index:30 + index, 8:24] = 255
        photo = rng.integers(0, 120, (48, 40, 3), dtype=np.uint8)
        photo[mask > 0] = (220, 120, 140)
        Image.fromarray(photo).save(root / "nails" / "Images" / f"nail{index}.jpg")
        Image.fromarray(mask).save(root / "nails" / "Masks" / f"nail{index}.png")
    return root


TINY = ["--profile", "smoke", "--image-size", "32", "--device", "cpu"]
RUNS = {
    "nailseg-prepare": lambda root: ["--profile", "smoke"],
    "nailseg-predict": lambda root: [root / "nails" / "Images", root / "masks", *TINY],
    "nailseg-fine-tune": lambda root: [root / "nails", root / "tuned", *TINY,
                                      "--no-cross-validation"],
    "nailseg-bench": lambda root: ["--profile", "smoke", "--steps", "1", "--repeats", "2", "--workers", "0",
                                   "--out", root / "bench" / "results.json"],
}
"""Each installed command's smallest run that succeeds; ``nailseg-train``'s are notebook
08's, which launches the installed script (below) and stops on an exit status other than 0."""


def test_every_installed_command_is_run_to_success():
    assert sorted([*RUNS, "nailseg-train"]) == sorted(SCRIPTS)


def test_notebook_08_launches_the_installed_nailseg_train(tmp_path, monkeypatch):
    launched = []

    def ran(command, **options):
        launched.append(command)
        (tmp_path / "r.json").write_text("{}")
        return subprocess.CompletedProcess(command, 0, stdout="")
    monkeypatch.setattr(train.subprocess, "run", ran)
    assert train.launch_training(tmp_path / "r.json", "--profile", "smoke") == {}
    assert launched[0][0] == str(Path(sys.executable).with_name("nailseg-train"))
    assert launched[0][-3:] == ["--out", str(tmp_path / "r.json"), "--force"]


@pytest.mark.parametrize("script", RUNS)
def test_each_installed_command_exits_0_after_a_run_that_succeeds(folders, script):
    command = [str(Path(sys.executable).with_name(script)), *map(str, RUNS[script](folders))]
    env = {**os.environ, "NO_ALBUMENTATIONS_UPDATE": "1", "NAILSEG_DATA_DIR": str(folders / "data"),
           "NAILSEG_RUNS_DIR": str(folders / "runs")}
    done = subprocess.run(command, env=env, capture_output=True, text=True, timeout=300,
                          check=False)
    assert done.returncode == 0, done.stderr[-2000:]
    assert "error" not in done.stderr.lower() and "{" not in done.stderr  # no dict printed


def test_the_options_commands_share_are_declared_once():
    """--profile: one declaration, in setup.profiles, for every command line of the package;
    --checkpoint: one, in command_line, for the commands."""
    import re
    from pathlib import Path

    owners = {"profile": "profiles.py", "checkpoint": "command_line.py"}
    for path in (Path(__file__).resolve().parents[1] / "nailseg_common").rglob("*.py"):
        for option, owner in owners.items():
            declared = re.search(rf"""add(?:_argument)?\(\s*["']--{option}["']""", path.read_text())
            assert (path.name == owner) == bool(declared), f"--{option} in {path.name}"
