"""Notebook 04's report, without DALI: its tables and lines from stand-in resizes, loaders and runs."""

import matplotlib
import numpy as np
import pandas as pd
import torch

from nailseg_common.measure import dali_report
from nailseg_common.pipelines.dali_pipeline import SAMPLE_ID_BYTES
from nailseg_common.setup.profiles import select_profile

matplotlib.use("Agg")


def test_interpolation_table_counts_the_rim_a_linear_resize_leaves():
    nearest = np.array([[0, 0, 1, 1]] * 4)

    def resized(name, as_float):
        masks = nearest.astype(np.float32) if as_float else (nearest * 255).astype(np.uint8)
        if name == "INTERP_LINEAR":  # one column blended between nail and background
            masks[:, 1] = 0.5 if as_float else 128
        return masks

    table = dali_report.interpolation_table(resized)
    assert table["mask dtype"].tolist() == ["float32", "float32", "uint8", "uint8"]
    assert table["interpolation"].tolist() == ["INTERP_LINEAR", "INTERP_NN"] * 2
    assert table["pixels neither label"].tolist() == [4, 0, 4, 0]
    assert table["pixels unlike nearest"].tolist() == [4, 0, 4, 0]
    assert table["share"].tolist() == ["25.00%", "0.00%"] * 2


def test_batch_not_dividing_leaves_a_partial_last_batch():
    assert dali_report.batch_not_dividing(10, 4) == 4
    assert dali_report.batch_not_dividing(8, 8) == 7
    assert dali_report.batch_not_dividing(5, 8) == 4
    assert dali_report.batch_not_dividing(12, 4) == 13  # 4, 3 and 2 divide 12: one partial batch
    assert dali_report.batch_not_dividing(2, 8) == 3


class Threshold(torch.nn.Module):
    """Logits from the first channel of uint8 images: positive above 127."""

    def forward(self, images):
        return images[:, :1].float() - 127.5


def batch(values):
    images = torch.tensor(values, dtype=torch.uint8).view(-1, 1, 1, 1).expand(-1, 3, 2, 2).contiguous()
    return {"image": images, "label": (images[:, :1] > 127).to(torch.uint8)}


def test_last_batch_table_counts_the_padded_copies():
    partial = [batch([10, 200]), batch([30])]
    fill = [batch([10, 200]), batch([30, 30])]  # the last image padded in
    table = dali_report.last_batch_table(Threshold(), {"FILL": fill, "PARTIAL": partial}, torch.device("cpu"))
    assert table["images scored"].to_dict() == {"FILL": 4, "PARTIAL": 3}
    assert table["duplicates"].to_dict() == {"FILL": 1, "PARTIAL": 0}
    assert table["hard Dice"].tolist() == [1.0, 1.0]


def names_batch(paths):
    rows = np.zeros((len(paths), SAMPLE_ID_BYTES), dtype=np.uint8)
    for row, path in zip(rows, paths):
        row[: len(path)] = np.frombuffer(path.encode(), dtype=np.uint8)
    return {"sample_id": torch.from_numpy(rows)}


def test_shard_check_says_whether_the_shards_cover_the_set_once():
    shards = [[names_batch(["/d/a.jpg", "/d/b.jpg"])], [names_batch(["/d/c.jpg"])]]
    assert dali_report.shard_check(shards, 3) == ("images per shard: [2, 1] | together the validation set, "
                                                  "each image once: True")
    overlapping = [[names_batch(["/d/a.jpg"])], [names_batch(["/d/a.jpg"])]]
    assert dali_report.shard_check(overlapping, 2).endswith("each image once: False")


class Loader(list):
    batch_size = 2


def test_epochs_line_gives_the_sizes_of_one_validation_epoch():
    valid = Loader([{"image": torch.zeros(2)}, {"image": torch.zeros(1)}])
    line = dali_report.epochs_line([{}] * 2, valid, ["t"] * 5, ["v"] * 3)
    assert line == "validation: 3 images, batch 2: 2 batches of [2, 1]; training: 5 images, 2 full batches"


def test_bound_of_puts_the_first_batches_on_the_device(monkeypatch):
    seen = {}
    monkeypatch.setattr(dali_report, "bound_speed",
                        lambda profile, make_model, batches, steps: seen.update(batches=batches, steps=steps))
    loader = [{"image": torch.full((1,), float(i))} for i in range(6)]
    dali_report.bound_of(select_profile("smoke"), loader, 10, count=3)
    assert [b["image"].item() for b in seen["batches"]] == [0.0, 1.0, 2.0] and seen["steps"] == 10


def metrics(dice):
    return pd.DataFrame({"train_loss": [0.5, 0.4], "val_loss": [0.6, 0.5], "val_dice": [dice - 0.1, dice],
                         "val_iou": [0.5, 0.6], "epoch_s": [2.0, 1.0]}, index=pd.Index([0, 1], name="epoch"))


def test_against_baseline_shows_the_runs_and_the_verdict(monkeypatch, tmp_path, capsys):
    monkeypatch.setenv("NAILSEG_RUNS_DIR", str(tmp_path))
    profile = select_profile("smoke")
    dice = torch.tensor([0.8, 0.9, 0.85])
    dali_report.against_baseline(profile, {}, None)
    assert "No finished run of notebook 02" in capsys.readouterr().out
    log = tmp_path / profile.name / "02_lightning_baseline" / "version_0" / "metrics.csv"
    log.parent.mkdir(parents=True)
    metrics(0.85).reset_index().assign(step=[1, 2]).to_csv(log, index=False)
    dali_report.against_baseline(profile, {"DALI": metrics(0.8)}, dice)
    out = capsys.readouterr().out
    assert "notebook 02's log" in out and "DALI" in out and "hard Dice" in out
