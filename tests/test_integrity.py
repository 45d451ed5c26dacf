"""File records: cheap enough for every run, and they notice each kind of damage."""

import numpy as np
import pytest

from nailseg_common.core.files import SAMPLE, file_records, verify_records
from nailseg_common.setup.paths import data_location

NAMES = ["train_images.npy", "valid_images.npy", "sub/small.npy"]


@pytest.fixture
def folder(tmp_path):
    """A cache-like folder: two large arrays and a small one in a sub-folder."""
    rng = np.random.default_rng(0)
    (tmp_path / "sub").mkdir()
    np.save(tmp_path / "train_images.npy", rng.integers(0, 256, (6, 3, 40, 40), np.uint8))
    np.save(tmp_path / "valid_images.npy", rng.integers(0, 256, (2, 3, 40, 40), np.uint8))
    np.save(tmp_path / "sub" / "small.npy", np.arange(10, dtype=np.uint8))
    return tmp_path


def test_intact_files_verify(folder):
    records = file_records(folder, NAMES)
    assert set(records) == set(NAMES)
    assert records["sub/small.npy"]["size"] == (folder / "sub" / "small.npy").stat().st_size
    assert verify_records(folder, records) == []


@pytest.mark.parametrize("damage,problem", [
    (lambda p: p.unlink(), "train_images.npy is missing"),
    (lambda p: p.write_bytes(p.read_bytes()[:SAMPLE]), "train_images.npy has 4096 bytes, expected"),
    (lambda p: np.save(p, np.zeros((6, 3, 40, 40), np.uint8).reshape(6, 40, 3, 40)),
     "train_images.npy has other content"),  # another shape, the same size
    (lambda p: np.save(p, np.load(p)[::-1]), "train_images.npy has other content"),
])
def test_each_damage_is_named(folder, damage, problem):
    records = file_records(folder, NAMES)
    damage(folder / "train_images.npy")
    problems = verify_records(folder, records)
    assert len(problems) == 1 and problems[0].startswith(problem)


def test_prepared_folders_are_keyed_by_the_full_path(tmp_path, monkeypatch):
    monkeypatch.setenv("NAILSEG_DATA_DIR", str(tmp_path / "data"))
    one, two = data_location(8, tmp_path / "a" / "nails"), data_location(8, tmp_path / "b" / "nails")
    assert one.prepared.parent == two.prepared.parent == tmp_path / "data" / "prepared"
    assert one.prepared != two.prepared
    assert one.prepared.name.startswith("nails-") and len(one.prepared.name) == len("nails-") + 8
    assert data_location(8, tmp_path / "a" / "x" / ".." / "nails") == one
    monkeypatch.delenv("NAILSEG_DATA_ROOT", raising=False)
    assert data_location(8).prepared.name == "synthetic-8"
