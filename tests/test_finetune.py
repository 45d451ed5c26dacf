"""Notebook 06's fine-tuning code: the checkpoint it finds, the starts it builds, the scores
per photo, and the advice drawn from them. Tiny models (the course's U-Net at 32 px) on 8 photos."""

import json
import math
import os
from pathlib import Path
from types import SimpleNamespace

import pandas as pd
import pytest
import torch
from scipy import stats

from nailseg_common.core.errors import DataError
from nailseg_common.core.files import copy_keeping_paths
from nailseg_common.core.statistics import mean_spread
from nailseg_common.data import synthetic
from nailseg_common.data.preparation import ensure_prepared, read_split
from nailseg_common.data.synthetic import generate_synthetic_dataset, photos_or_standin
from nailseg_common.measure import own_photos_report
from nailseg_common.measure.own_photos_report import advice_in_words, available_starts
from nailseg_common.pipelines.albumentations_pipeline import NailDataModule
from nailseg_common.pipelines.kornia_pipeline import POLICY
from nailseg_common.setup.profiles import select_profile
from nailseg_common.training import checkpoints, fine_tuning
from nailseg_common.training.checkpoints import (
    SHIPPED_MODEL,
    choose_checkpoint,
    find_checkpoint,
    load_weights,
    read_checkpoint,
    save_weights,
)
from nailseg_common.training.fine_tuning import (
    PhotosOnDevice,
    compare_starts,
    cross_validate,
    fine_tune,
    k_folds,
    photos_on_device,
    predict_logits,
    recommend_start,
    score_photos,
    start_model,
)
from nailseg_common.training.trainer import make_trainer
from nailseg_common.training.unet import LitNailSegmentation

ENCODER = "tu-efficientnet_lite0"


def tiny_profile():
    return select_profile("smoke", image_size=32, batch_size=2, max_steps=2, fine_tune_steps=2,
                          encoder=ENCODER, num_workers=0, max_train_batches=2,
                          max_valid_batches=0)


@pytest.fixture(scope="module")
def trained(tmp_path_factory):
    """8 photos prepared, and a 2-step run logged as notebook 02's (its best checkpoint)."""
    root = tmp_path_factory.mktemp("finetune")
    with pytest.MonkeyPatch.context() as patch:
        patch.setenv("NAILSEG_DATA_DIR", str(root / "data"))
        patch.setenv("NAILSEG_RUNS_DIR", str(root / "runs"))
        profile = tiny_profile()
        photos = generate_synthetic_dataset(root / "photos", 8, seed=1, progress=False)
        data = ensure_prepared(profile, photos, progress=False)
        trainer = make_trainer(profile, "02_lightning_baseline", enable_progress_bar=False)
        trainer.fit(start_model("random", ENCODER, 1e-3, 2),
                    datamodule=NailDataModule(data, profile))
        yield SimpleNamespace(profile=profile, data=data, trainer=trainer,
                              best=Path(trainer.checkpoint_callback.best_model_path))


def _touch(path: Path, mtime: float) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(b"")
    os.utime(path, (mtime, mtime))
    return path


def test_find_checkpoint_takes_the_newest_best_of_notebook_02_or_04(tmp_path, monkeypatch):
    monkeypatch.setenv("NAILSEG_RUNS_DIR", str(tmp_path))
    _touch(tmp_path / "smoke/02_lightning_baseline/version_0/checkpoints/best-a.ckpt", 100)
    newest = _touch(tmp_path / "smoke/04_dali/version_1/checkpoints/best-b.ckpt", 200)
    _touch(tmp_path / "smoke/04_dali/version_1/checkpoints/last.ckpt", 300)  # not a best
    _touch(tmp_path / "smoke/03_kornia/version_0/checkpoints/best-c.ckpt", 400)  # another run
    _touch(tmp_path / "cpu/02_lightning_baseline/version_0/checkpoints/best-d.ckpt", 500)
    assert find_checkpoint("smoke") == newest


def test_without_a_checkpoint_the_shipped_model_is_taken_and_a_wrong_path_is_refused(
        tmp_path, monkeypatch):
    monkeypatch.setenv("NAILSEG_RUNS_DIR", str(tmp_path / "empty"))
    assert find_checkpoint("smoke") is None
    assert choose_checkpoint("", "smoke").path == SHIPPED_MODEL
    monkeypatch.setattr(checkpoints, "SHIPPED_MODEL", tmp_path / "not_shipped.pt")
    assert choose_checkpoint("", "smoke") is None
    with pytest.raises(DataError, match="missing.ckpt is not a file: pass a best-"):
        choose_checkpoint(tmp_path / "missing.ckpt", "smoke")


def test_a_given_checkpoint_wins_and_a_trained_one_is_found(trained, monkeypatch):
    monkeypatch.setenv("NAILSEG_RUNS_DIR", str(trained.best.parents[4]))
    assert trained.best.name.startswith("best-")
    assert find_checkpoint(trained.profile.name) == trained.best
    assert choose_checkpoint(str(trained.best), "smoke").path == trained.best
    assert read_checkpoint(trained.best).encoder == ENCODER


def test_the_synthetic_start_holds_every_weight_of_the_checkpoint(trained):
    saved = torch.load(trained.best, map_location="cpu", weights_only=True)["state_dict"]
    synthetic = start_model("synthetic", ENCODER, 1e-3, 5,
                            read_checkpoint(trained.best)).state_dict()
    random = start_model("random", ENCODER, 1e-3, 5).state_dict()
    assert saved.keys() == synthetic.keys()
    assert all(torch.equal(saved[name], synthetic[name]) for name in saved)
    assert not all(torch.equal(saved[name], random[name]) for name in saved)


def test_of_a_local_checkpoint_and_the_shipped_model_the_better_recorded_dice_wins(
        trained, monkeypatch):
    monkeypatch.setenv("NAILSEG_RUNS_DIR", str(trained.best.parents[4]))
    score = float(trained.best.stem.split("val_dice=")[1])
    assert read_checkpoint(trained.best).recorded_dice == pytest.approx(score, abs=5e-4)
    provenance = json.loads(SHIPPED_MODEL.with_suffix(".json").read_text())
    assert read_checkpoint(SHIPPED_MODEL).recorded_dice == provenance["synthetic_valid"]["dice"] > 0.85
    assert choose_checkpoint("", trained.profile.name).path == SHIPPED_MODEL  # 2 steps lose
    monkeypatch.setattr(checkpoints, "best_score",
                        lambda saved, path: 0.95 if path == trained.best else 0.88)
    assert choose_checkpoint("", trained.profile.name).path == trained.best


def test_a_checkpoint_of_another_encoder_is_refused(trained):
    with pytest.raises(ValueError, match="encoder='tu-efficientnet_lite0'"):
        load_weights(LitNailSegmentation("resnet18", encoder_weights=None), trained.best)


def test_starts_are_checked():
    with pytest.raises(ValueError, match="one of"):
        start_model("pretrained", ENCODER, 1e-3, 5)
    with pytest.raises(ValueError, match="needs a checkpoint"):
        start_model("synthetic", ENCODER, 1e-3, 5)


def test_one_row_per_held_out_photo_and_their_mean_is_val_dice(trained):
    frame, photos_set = photos_on_device(trained.data, trained.profile)
    valid = read_split(trained.data, "valid")
    held_out = list(range(len(frame) - len(valid), len(frame)))  # the splits in order
    model = load_weights(LitNailSegmentation(ENCODER), trained.best)
    logits = predict_logits(model, photos_set.images[held_out], batch_size=3, flips=False)
    table = score_photos(logits, photos_set.labels[held_out], frame.loc[held_out])
    assert list(table["photo"]) == [Path(image).name for image in valid["image"]]
    assert table["dice"].between(0, 1).all() and table["iou"].between(0, 1).all()
    assert (table["iou"] <= table["dice"] + 1e-6).all()
    trainer = make_trainer(trained.profile, "06_test_validate", enable_progress_bar=False)
    logged = trainer.validate(model, datamodule=NailDataModule(trained.data, trained.profile),
                              verbose=False)[0]
    assert table["dice"].mean() == pytest.approx(logged["val_dice"], abs=1e-5)
    assert table["iou"].mean() == pytest.approx(logged["val_iou"], abs=1e-5)


def test_test_time_flips_average_the_mirror_images_logits(trained):
    _, photos_set = photos_on_device(trained.data, trained.profile)
    images = photos_set.images[:5]
    model = load_weights(LitNailSegmentation(ENCODER), trained.best)
    plain, mirrored = (predict_logits(model, batch, batch_size=2, flips=False)
                       for batch in (images, images.flip(-1)))
    flipped = predict_logits(model, images, batch_size=2)
    assert not torch.allclose(plain, mirrored.flip(-1), atol=1e-3), "the model is not symmetric"
    assert torch.allclose(flipped, 0.5 * (plain + mirrored.flip(-1)), atol=1e-5)


def test_k_folds_hold_every_photo_out_once_and_never_train_on_it():
    folds = k_folds(11, 3, seed=2)
    held = sorted(int(i) for _, held_out in folds for i in held_out)
    assert held == list(range(11))
    assert all(not set(train) & set(held_out) and len(train) + len(held_out) == 11
               for train, held_out in folds)
    assert [list(t) for t, _ in folds] == [list(t) for t, _ in k_folds(11, 3, seed=2)]
    with pytest.raises(ValueError, match="folds=12"):
        k_folds(11, 12)


def test_the_same_seed_trains_the_same_weights_without_writing_checkpoints(trained):
    _, photos_set = photos_on_device(trained.data, trained.profile)
    runs = [fine_tune(start_model("random", ENCODER, 1e-3, 2),
                      PhotosOnDevice(photos_set, range(6), range(6, 8), 2, steps=2),
                      trained.profile, f"06_seed_{n}") for n in range(2)]
    first, second = (run.lightning_module.state_dict() for run in runs)
    assert all(torch.equal(first[name], second[name]) for name in first)
    assert all(run.global_step == 2 for run in runs)
    assert all(run.checkpoint_callback is None for run in runs)
    assert not list(Path(runs[0].log_dir).rglob("*.ckpt"))
    assert runs[0].lightning_module.gpu_augmentation.policy == POLICY  # the course's by default


def test_an_empty_policy_trains_on_the_photos_as_they_are(trained):
    _, photos_set = photos_on_device(trained.data, trained.profile)
    model = start_model("random", ENCODER, 1e-3, 1)
    fine_tune(model, PhotosOnDevice(photos_set, range(6), range(6, 8), 2, steps=1),
              trained.profile, "06_no_augmentation", policy={})
    images, labels = model.gpu_augmentation(photos_set.images[:2], photos_set.labels[:2])
    assert torch.allclose(images, photos_set.images[:2].float() / 255)
    assert torch.equal(labels, photos_set.labels[:2].float())


def _batchnorm_statistics(model) -> dict[str, torch.Tensor]:
    return {name: value.clone() for name, value in model.state_dict().items()
            if name.endswith(("running_mean", "running_var"))}


def test_a_trained_start_keeps_its_batchnorm_statistics_and_a_random_one_learns_them(trained):
    _, photos_set = photos_on_device(trained.data, trained.profile)
    for start, kept in (("synthetic", True), ("random", False)):
        model = start_model(start, ENCODER, 1e-2, 3, trained.best)
        before = _batchnorm_statistics(model)
        weights = {name: value.clone() for name, value in model.model.named_parameters()}
        fine_tune(model, PhotosOnDevice(photos_set, range(6), range(6, 8), 2, steps=3),
                  trained.profile, f"06_statistics_{start}")
        after = _batchnorm_statistics(model.cpu())
        assert all(torch.equal(before[name], after[name]) for name in before) == kept, start
        assert not all(torch.equal(weights[name], value.detach())
                       for name, value in model.model.named_parameters()), start


def test_only_the_starts_that_can_be_had_are_fine_tuned():
    available, skipped = available_starts(fine_tuning.STARTS, None)
    assert available == ["random", "imagenet"]
    assert skipped == {"synthetic": "no checkpoint (see above)"}
    assert available_starts(fine_tuning.STARTS, Path("best.ckpt")) == (list(fine_tuning.STARTS), {})


def test_one_epoch_holds_every_step_and_each_pass_shows_every_photo_once(trained):
    profile = trained.profile
    _, photos_set = photos_on_device(trained.data, profile)
    train = [5, 0, 3, 6]
    photos = PhotosOnDevice(photos_set, train, [1, 2, 4], profile.batch_size, steps=7, seed=3)
    batches = list(photos.train_dataloader())
    assert len(batches) == 7 and all(b["image"].shape[0] == profile.batch_size for b in batches)
    assert all(b["image"].dtype == torch.uint8 and b["image"].device == profile.device
               for b in batches)
    images = photos_set.images
    drawn = [int((images == image).flatten(1).all(1).nonzero()[0]) for b in batches
             for image in b["image"]]
    for start in range(0, len(drawn) - len(train) + 1, len(train)):
        assert sorted(drawn[start:start + len(train)]) == sorted(train)
    again = [b["image"] for b in PhotosOnDevice(photos_set, train, [1, 2, 4], profile.batch_size,
                                                7, seed=3).train_dataloader()]
    assert all(torch.equal(a["image"], b) for a, b in zip(batches, again))
    assert len(photos.val_dataloader()) == math.ceil(3 / profile.batch_size)


def test_cross_validation_scores_every_photo_once_with_the_model_of_its_fold(trained):
    frame, photos_set = photos_on_device(trained.data, trained.profile)
    folds = k_folds(len(frame), 2)
    result = cross_validate(lambda name: start_model(name, ENCODER, 1e-3, 2), ["random"],
                            frame, photos_set, folds, trained.profile, train_size=3)
    table = result.tables["random"]
    assert list(table.index) == list(frame.index) and table["dice"].between(0, 1).all()
    assert list(result.runs["photos"]) == [3, 3] and list(result.runs["fold"]) == [0, 1]
    last = predict_logits(result.models["random"], photos_set.images[folds[-1][1]])
    assert torch.allclose(result.logits["random"][folds[-1][1]], last)
    one_fold = cross_validate(lambda name: start_model(name, ENCODER, 1e-3, 2), ["random"],
                              frame, photos_set, folds[:1], trained.profile, train_size=3)
    assert list(one_fold.tables["random"].index) == sorted(folds[0][1])  # only photos scored


def test_saved_weights_load_into_a_new_model_with_their_image_size(trained, tmp_path):
    model = load_weights(LitNailSegmentation(ENCODER), trained.best)
    path = save_weights(model, tmp_path / "models" / "chosen.pt", image_size=96)
    assert read_checkpoint(path).encoder == ENCODER
    assert torch.load(path, weights_only=True)["image_size"] == 96
    copy = load_weights(LitNailSegmentation(ENCODER), path)
    assert all(torch.equal(value, copy.state_dict()[name])
               for name, value in model.state_dict().items())


def _table(dice):
    return pd.DataFrame({"photo": [f"{i}.png" for i in range(len(dice))], "type": 1,
                         "dice": dice, "iou": [d / 2 for d in dice]})


def test_the_advice_ranks_by_mean_dice_and_measures_the_gain_on_the_same_photos():
    tables = {"random": _table([0.5, 0.6, 0.7]), "synthetic": _table([0.9, 0.8, 0.7])}
    assert list(compare_starts(tables).index) == ["synthetic", "random"]
    advice = recommend_start(tables)
    assert advice["best"] == "synthetic" and advice["runner_up"] == "random"
    assert advice["gain"] == pytest.approx(0.2)
    assert advice["gain_se"] == pytest.approx(0.2 / math.sqrt(3))  # gains 0.4, 0.2, 0: sd 0.2
    assert advice["gain_spread"] == pytest.approx(stats.t.ppf(0.975, 2) * 0.2 / math.sqrt(3))
    assert advice["lead_se"] == pytest.approx(math.sqrt(3))
    assert (advice["wins"], advice["loses"], advice["photos"]) == (2, 0, 3)
    assert recommend_start({"random": _table([0.4])})["runner_up"] is None


def test_the_advice_in_words_follows_the_lead_in_standard_errors():
    clear = {"random": _table([0.5, 0.6, 0.7, 0.6]), "synthetic": _table([0.9, 0.8, 0.9, 0.85])}
    close = {"random": _table([0.8, 0.9, 0.7]), "zero-shot": _table([0.9, 0.8, 0.75])}
    assert advice_in_words(recommend_start(clear), clear, "zero-shot")[-1].startswith(
        "-> use the synthetic start")
    verdict = advice_in_words(recommend_start(close), close, "zero-shot")[-1]
    assert "within the noise" in verdict and "did not beat the checkpoint" in verdict
    alone = {"random": _table([0.4, 0.5])}
    lines = advice_in_words(recommend_start(alone), alone, "zero-shot")
    assert len(lines) == 2 and "only one start" in lines[1] and "0.450" in lines[0]



def test_the_learning_curve_has_a_row_per_size_and_start_with_the_mean_and_its_spread():
    by_size = {2: {"random": _table([0.2, 0.4]), "synthetic": _table([0.6, 0.8])},
               8: {"random": _table([0.5, 0.7, 0.6])}}
    curve = own_photos_report.learning_curve(by_size)
    assert curve[["start", "photos"]].values.tolist() == [["random", 2], ["synthetic", 2], ["random", 8]]
    assert curve["dice"].round(6).tolist() == [0.3, 0.7, 0.6]
    assert curve["±"].iloc[2] == pytest.approx(mean_spread(pd.Series([0.5, 0.7, 0.6])))


def test_the_scores_and_the_checkpoint_are_put_in_words(tmp_path):
    line = own_photos_report.scores_in_words("zero-shot", _table([0.5, 0.7]))
    assert line == "zero-shot, mean over all 2 photos: hard Dice 0.600, IoU 0.300"
    assert "going on without the synthetic start" in own_photos_report.checkpoint_in_words(None, "cpu", "x")
    found = checkpoints.Checkpoint(tmp_path / "best.ckpt", {"encoder": "x"}, {}, 32, 0.9, None)
    assert own_photos_report.checkpoint_in_words(found, "cpu", "x").endswith(
        "(synthetic validation hard Dice 0.900); every start's encoder: x")


def test_photos_are_copied_at_their_relative_paths_into_an_emptied_folder(tmp_path):
    root, folder = tmp_path / "raw", tmp_path / "copy"
    for name in ("Images/a/1.jpg", "Images/b/2.png"):
        (root / name).parent.mkdir(parents=True, exist_ok=True)
        (root / name).write_bytes(name.encode())
    (folder / "old.jpg").parent.mkdir(parents=True)
    (folder / "old.jpg").write_bytes(b"an earlier run's")
    assert copy_keeping_paths([root / "Images/a/1.jpg", str(root / "Images/b/2.png")], root, folder) == folder
    assert sorted(p.relative_to(folder).as_posix() for p in folder.rglob("*.*")) == ["Images/a/1.jpg",
                                                                                   "Images/b/2.png"]
    assert (folder / "Images/b/2.png").read_bytes() == b"Images/b/2.png"


@pytest.mark.skipif(not torch.cuda.is_available(), reason="CUDA graphs need a GPU")
def test_cuda_graphs_train_the_weights_and_statistics_an_eager_run_trains(trained):
    """The same seed and batches with and without GraphedUNet: the same step, so the weights
    and BatchNorm statistics move the same way (bf16 rounding aside)."""
    profile = select_profile("gpu", image_size=32, batch_size=4, fine_tune_steps=6,
                             encoder=ENCODER, fine_tune_keep_statistics=False)
    _, photos_set = photos_on_device(trained.data, profile)
    initial = start_model("random", ENCODER, 1e-3, 6)
    moved = []
    for graphs in (False, True):
        model = start_model("random", ENCODER, 1e-3, 6)
        fine_tune(model, PhotosOnDevice(photos_set, range(6), range(6, 8), 4, steps=6),
                  profile, f"06_graphs_{graphs}", cuda_graphs=graphs)
        after = model.cpu().state_dict()
        moved.append(torch.cat([(after[name].float() - value.float()).flatten()
                                for name, value in initial.state_dict().items()
                                if value.is_floating_point()]))
    eager, graphed = moved
    assert eager.norm() > 0 and (graphed - eager).norm() < 0.05 * eager.norm()


def test_your_photos_are_used_as_they_are_and_the_standin_is_sized_by_the_profile(
        tmp_path, monkeypatch):
    monkeypatch.delenv("NAILSEG_DATA_ROOT", raising=False)
    monkeypatch.setenv("NAILSEG_DATA_DIR", str(tmp_path / "data"))
    made = []
    monkeypatch.setattr(synthetic, "ensure_synthetic_dataset",
                        lambda root, count, style, photo_side:
                        made.append((root, count, style, photo_side)) or root)
    mine = tmp_path / "mine"
    assert photos_or_standin("smoke", str(mine)) == mine.resolve() and not made
    standin = photos_or_standin("smoke")
    smoke = select_profile("smoke")
    count = min(smoke.num_images // 2, synthetic.STANDIN_MAX_IMAGES)
    assert made == [(tmp_path / "data" / f"standin-{count}", count, "photo", smoke.photo_side)] == [
        (standin, count, "photo", 256)]  # the stand-in's photos at the profile's side
    assert photos_or_standin("smoke", "", 7).name == "standin-7"
