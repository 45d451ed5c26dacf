"""A path as the course prints it: never this machine's folders."""

from pathlib import Path

from nailseg_common.setup.paths import REPO_ROOT, shown


def test_a_path_is_shown_relative_to_the_repository_the_data_folder_or_home(tmp_path, monkeypatch):
    monkeypatch.setenv("HOME", str(tmp_path / "home"))
    monkeypatch.setenv("NAILSEG_DATA_DIR", str(tmp_path / "data"))
    monkeypatch.delenv("NAILSEG_RUNS_DIR", raising=False)
    assert shown(REPO_ROOT / "runs" / "gpu" / "metrics.csv") == str(Path("runs/gpu/metrics.csv"))
    assert shown(tmp_path / "data" / "synthetic-60") == str(Path("<data-dir>/synthetic-60"))
    assert shown(tmp_path / "home" / "nails") == str(Path("~/nails"))
    assert shown("~/nails") == str(Path("~/nails"))
    assert shown(tmp_path / "elsewhere") == str((tmp_path / "elsewhere").resolve())
