"""The lab's scripts run on a CPU in the smoke profile (`--profile smoke`): a change to the
package code they call shows here, not first on a lent GPU."""

import json

import numpy as np
import pytest
import torch

from lab.fine_tune_batchnorm import fine_tune_batchnorm
from lab.fine_tune_step import first_step_by_layout, profile_fine_tune
from lab.kornia_pipeline_gap import kornia_pipeline_gap
from lab.pipelines_by_workers import pipelines_by_workers
from lab.time_to_accuracy_recipes import sweep_time_to_accuracy
from lab.transfer_held_out_style import transfer_held_out_style
from lab.where_iou_is_lost import where_iou_is_lost
from nailseg_common.pipelines.kornia_pipeline import BatchSlices
from nailseg_common.pipelines.policy import POLICY
from nailseg_common.setup.paths import REPO_ROOT
from nailseg_common.training.run_logs import SHIPPED_MODEL
from nailseg_common.training.unet import grown

LAB = REPO_ROOT / "lab" / "time_to_accuracy_recipes"  # the recipe sweeps' committed runs


@pytest.fixture(autouse=True)
def own_folders(tmp_path, monkeypatch):
    monkeypatch.setenv("NAILSEG_DATA_DIR", str(tmp_path / "data"))
    monkeypatch.setenv("NAILSEG_RUNS_DIR", str(tmp_path / "runs"))


def test_profile_fine_tune_times_whole_starts_both_ways(tmp_path):
    out = tmp_path / "starts.json"
    profile_fine_tune.main(["--profile", "smoke", "--photos", "10", "--starts", "1",
                            "--steps", "2", "--encoders", "resnet18", "--out", str(out)])
    runs = json.loads(out.read_text())["runs"]
    assert set(runs["resnet18"]) == set(profile_fine_tune.DATAMODULES)
    assert all(run[0]["steps"] == 2 and run[0]["seconds"] > 0 for run in runs["resnet18"].values())
    assert runs["plain PyTorch loop"]["steps"] == 2


def test_profile_fine_tune_times_the_notebooks_starts_with_and_without_cuda_graphs(tmp_path):
    out = tmp_path / "graphs.json"
    profile_fine_tune.main(["--profile", "smoke", "--photos", "10", "--starts", "1", "--steps",
                            "2", "--encoders", "resnet18", "--cuda-graphs", "--out", str(out)])
    runs = json.loads(out.read_text())["runs"]["resnet18"]
    notebook = profile_fine_tune.NOTEBOOK_BATCHES
    assert set(runs) == {f"{notebook}, CUDA graphs", notebook}
    assert [run[0]["cuda_graphs"] for run in runs.values()] == [True, False]
    assert all(run[0]["steps"] == 2 for run in runs.values())
    profile_fine_tune.main(["--profile", "smoke", "--photos", "10", "--starts", "1", "--steps",
                            "2", "--encoders", "resnet18", "--cuda-graphs", "--graphs-only",
                            "--host-indices", "--out", str(out)])
    runs = json.loads(out.read_text())["runs"]["resnet18"]
    assert list(runs) == [f"{name}, CUDA graphs" for name in profile_fine_tune.DATAMODULES]


def test_first_step_by_layout_times_the_first_steps_and_traces_the_first():
    result = first_step_by_layout.main(["resnet18", "1", "--device", "cpu", "--size", "32",
                                        "--steps", "7", "--trace"])
    assert len(result["first_steps_s"]) == 3 and all(len(row) == 3 for row in result["first_steps_s"])
    assert result["median_later_ms"] > 0 and result["channels_last"] is True
    assert "aten::" in result["first_step_host_time"]


def test_first_step_by_layout_changes_the_depthwise_layers_each_way():
    for way in first_step_by_layout.WAYS:
        result = first_step_by_layout.main(["mobilenet_v2", "1", "--device", "cpu", "--size",
                                            "32", "--steps", "6", "--depthwise", way])
        assert result["depthwise"] == way and result["depthwise_layers"] == 17


def test_fine_tune_batchnorm_scores_both_ways_on_every_photo(tmp_path):
    out = tmp_path / "batchnorm.json"
    fine_tune_batchnorm.main(["--profile", "smoke", "--folds", "2", "--out", str(out)])
    report = json.loads(out.read_text())
    assert report["checkpoint"] == SHIPPED_MODEL.name
    photos = report["zero_shot"]["photos"]
    assert report["kept"]["photos"] == report["relearned"]["photos"] == photos > 0
    difference = report["kept_minus_relearned"]
    assert difference["dice"] == pytest.approx(report["kept"]["dice"] - report["relearned"]["dice"],
                                               abs=2e-4)


def test_transfer_held_out_style_scores_each_model_paired_on_the_same_photos(tmp_path):
    out = tmp_path / "transfer.json"
    model = f"{SHIPPED_MODEL}"
    transfer_held_out_style.main(["--profile", "smoke", "--photos", "8", "--folds", "2",
                                  "--model", f"before={model}", "--model", f"after={model}",
                                  "--out", str(out)])
    report = json.loads(out.read_text())
    assert report["style"] == "salon" and report["photos"] == 8
    for scores in report["models"].values():
        assert scores["zero_shot"]["photos"] == scores["fine_tuned"]["photos"] == 8
    assert report["random_start"]["fine_tuned"]["photos"] == 8
    same = report["minus_before"]["after"]  # one model against itself: no difference
    assert same["zero_shot"]["dice"] == same["fine_tuned"]["dice"] == 0.0


def test_transfer_held_out_style_refuses_a_missing_model(tmp_path):
    with pytest.raises(SystemExit, match="NAME=PATH"):
        transfer_held_out_style.main(["--model", f"before={tmp_path / 'none.pt'}",
                                      "--out", str(tmp_path / "out.json")])


def test_notebook_06_draws_the_batches_it_drew_from_the_host_before():
    """Its indices now move to the device once; the batches stay those of the sampler before."""
    images = torch.arange(7, dtype=torch.uint8).view(7, 1, 1, 1).expand(7, 3, 2, 2).contiguous()
    photos = BatchSlices(images, torch.zeros(7, 1, 2, 2, dtype=torch.uint8))
    batches = {name: [batch["image"][:, 0, 0, 0].tolist() for batch in
                      datamodule(photos, range(5), range(5, 7), 3, 6, seed=4).train_dataloader()]
               for name, datamodule in profile_fine_tune.DATAMODULES.items()}
    notebook, host = batches.values()
    assert len(notebook) == 6 and notebook == host


def test_pipelines_by_workers_measures_every_pipeline_against_the_bound_of_the_same_run(tmp_path):
    out = tmp_path / "pipelines.json"
    results = pipelines_by_workers.main(["--profile", "smoke", "--workers", "0,1", "--windows", "1",
                                         "--out", str(out)])
    assert json.loads(out.read_text()) == results
    rows = results["pipelines"]
    assert {"albumentations_w0", "albumentations_w1", "kornia"} <= set(rows)
    assert all(row["ratio to bound"] == row["train img/s"] / results["bound"]["img_s"] for row in rows.values())
    assert rows["albumentations_w1"]["loader img/s"] > 0 and "loader img/s" not in rows["kornia"]


def albumentations_row(workers, ratio, loader):
    return {"family": "albumentations", "workers": workers, "ratio to bound": ratio, "loader img/s": loader}


def test_workers_to_reach_reads_the_curve_and_extrapolates_only_the_loader():
    rows = {"a2": albumentations_row(2, 0.5, 200.0), "a4": albumentations_row(4, 0.92, 400.0),
            "k": {"family": "kornia", "workers": 2, "ratio to bound": 0.95}}
    assert pipelines_by_workers.workers_to_reach(rows, 1000.0, 0.9) == {
        "ratio": 0.9, "measured": 4, "extrapolated_from_loader": 9.0}
    below = pipelines_by_workers.workers_to_reach({"a2": albumentations_row(2, 0.5, 200.0)}, 1000.0, 0.9)
    assert below["measured"] is None and below["extrapolated_from_loader"] == 9.0


def square(size=12, side=4, at=4):
    mask = torch.zeros(1, 1, size, size)
    mask[..., at:at + side, at:at + side] = 1.0
    return mask


def test_error_split_corrects_the_outline_and_the_objects_separately():
    label = square()
    predicted = grown(label, 1)  # an outline one pixel off ...
    predicted[..., 0, 11] = 1.0  # ... and a false nail far from it
    split = {key: value.item() for key, value in where_iou_is_lost.error_split(predicted, label, 2).items()}
    assert split["iou"] == pytest.approx(16 / 37)
    assert split["iou_outline_fixed"] == pytest.approx(16 / 17)  # the false nail is left
    assert split["iou_objects_fixed"] == pytest.approx(16 / 36)  # the outline is left
    assert split["outline_error_share"] == pytest.approx(20 / 21)


def test_where_iou_is_lost_scores_every_validation_image_by_type_and_size(tmp_path):
    out, predictions = tmp_path / "lost.json", tmp_path / "predictions.npz"
    results = where_iou_is_lost.main(["--profile", "smoke", "--out", str(out),
                                      "--predictions", str(predictions)])
    assert json.loads(out.read_text()) == json.loads(json.dumps(results))
    for name in ("plain", "flip_averaged"):
        scores = results[name]
        assert scores["iou_outline_fixed"] >= scores["iou"] and scores["iou_objects_fixed"] >= scores["iou"]
        assert sum(group["images"] for group in scores["by_type"].values()) == \
            sum(group["images"] for group in scores["by_size"].values()) > 0
    assert results["steps"] == 2 and results["history"]
    saved = np.load(predictions)
    assert np.unpackbits(saved["plain"]).size >= np.prod(saved["shape"])


def test_committed_bilinear_gain_follows_from_its_runs():
    results = json.loads((LAB / "time_to_accuracy_bilinear_h100.json").read_text())
    best = {(run["name"], run["seed"]): run["best_iou"] for run in results["runs"]}
    summary = results["summary"]["paired_gain_bilinear_both_over_base384"]
    gains = [best["bilinear_both", seed] - best["base384", seed] for seed in summary["seeds"]]
    assert summary["gains"] == pytest.approx(gains, abs=1e-4)
    assert summary["mean"] == pytest.approx(np.mean(gains), abs=1e-4)
    assert summary["standard_error"] == pytest.approx(np.std(gains, ddof=1) / np.sqrt(len(gains)), abs=1e-4)
    assert results["summary"]["reached_iou_085"] == sum(run["reached_iou_085"] for run in results["runs"])


def test_where_iou_is_lost_rescores_saved_predictions_against_the_cache(tmp_path):
    predictions = tmp_path / "predictions.npz"
    trained = where_iou_is_lost.main(["--profile", "smoke", "--out", str(tmp_path / "a.json"),
                                      "--predictions", str(predictions)])
    again = where_iou_is_lost.main(["--rescore", str(predictions), "--num-images", "48",
                                    "--out", str(tmp_path / "b.json")])
    for name in ("plain", "flip_averaged"):
        assert again[name]["iou"] == pytest.approx(trained[name]["iou"])
        for kind, group in trained[name]["by_type"].items():
            assert again[name]["by_type"][kind] == pytest.approx(group)


def test_kornia_pipeline_gap_measures_every_variant_against_the_bound_of_the_same_run(tmp_path):
    out = tmp_path / "gap.json"
    results = kornia_pipeline_gap.main(["--profile", "smoke", "--windows", "1", "--out", str(out)])
    assert json.loads(out.read_text()) == results
    rows = results["pipelines"]
    assert next(iter(rows)) == "bound" and rows["bound"]["ratio_to_bound"] == 1.0
    assert {"cache (pinned, workers) + policy", "cache on the GPU + compiled policy"} <= set(rows)
    assert all(row["ratio_to_bound"] == row["img_s"] / rows["bound"]["img_s"] for row in rows.values())
    assert all(ms > 0 for ms in results["policy_alone_ms_per_batch"].values())
    assert set(results["each_op_alone_ms_per_batch"]) == set(POLICY)


def test_sweep_trains_on_shrunk_batches_until_side_until_and_validates_at_full_size(monkeypatch, tmp_path):
    seen = []
    forward = sweep_time_to_accuracy.Recipe.forward

    def recording(self, image):
        seen.append((self.training, self.trainer.global_step, image.shape[-1]))
        return forward(self, image)

    monkeypatch.setattr(sweep_time_to_accuracy.Recipe, "forward", recording)
    sweep_time_to_accuracy.main(["--profile", "smoke", "--configs", "test_side", "--out", str(tmp_path / "s.jsonl")])
    side, until = (sweep_time_to_accuracy.CONFIGS["test_side"][key] for key in ("side", "side_until"))
    full = {size for training, _, size in seen if not training}
    assert len(full) == 1 and side < min(full)
    assert [size for training, step, size in seen if training] == [
        side if step < until else min(full) for training, step, _ in seen if training]
    assert {step for training, step, _ in seen if training} == set(range(4))


def test_committed_progressive_resizing_summary_follows_from_its_runs():
    results = json.loads((LAB / "time_to_accuracy_progressive_h100.json").read_text())
    for run in results["runs"]:
        row = results["summary"][f"{run['name']} seed {run['seed']}"]
        curve = list(run["val_iou_by_step"].values())
        assert row["final_iou"] == curve[-1] and row["steps"] == int(list(run["val_iou_by_step"])[-1])
        assert row["best_iou"] is None or row["best_iou"] == pytest.approx(max(curve), abs=1e-4)
        assert not run["reached_iou_085"] and max(curve) < 0.85


def test_real_photos_recipe_cross_validates_by_hand_and_scores_flips(tmp_path):
    from lab.real_photos_recipe import real_photos_recipe
    folds = real_photos_recipe.hand_folds(["a_1.jpg", "a_2.jpg", "b_1.jpg", "b_2.jpg", "c_1.jpg"], 2)
    hands_held = [{name[0] for name in np.array(["a", "a", "b", "b", "c"])[held]} for _, held in folds]
    assert not hands_held[0] & hands_held[1]  # a hand's shots are held out together
    out = tmp_path / "runs.jsonl"
    real_photos_recipe.main(["--data-root", "", "--profile", "smoke", "--recipes", "smoke",
                             "--folds", "2", "--seeds", "2", "--out", str(out)])
    row = json.loads(out.read_text())
    assert row["folds"] == 2 and row["fine_tuned_dice"]["n"] == row["photos"]
    assert len(row["seed_means"]) == 2 and len(row["photo_dice"]) == row["photos"]
    assert 0 <= row["fine_tuned_dice_flips"]["mean"] <= 1 and row["seconds_all_folds"] > 0


def test_windows_cut_image_and_label_at_the_same_random_place():
    from lab.real_photos_recipe.real_photos_recipe import Windows
    from nailseg_common.pipelines.kornia_pipeline import BatchSlices
    images = torch.randint(0, 256, (3, 3, 8, 8), dtype=torch.uint8)
    windows = Windows(BatchSlices(images, images[:, :1].clone()), crop=4, seed=0)
    batch = windows[[2, 0]]
    assert batch["image"].shape == (2, 3, 4, 4) and torch.equal(batch["label"], batch["image"][:, :1])
    places = [(top, left) for top in range(5) for left in range(5)
              if torch.equal(images[[2, 0], :, top:top + 4, left:left + 4], batch["image"])]
    assert places  # one window of the whole photos, the same for every photo of the batch


def test_cpu_step_cost_times_every_head_and_cached_part(tmp_path):
    from lab.real_photos_recipe import cpu_step_cost
    out = tmp_path / "cost.json"
    cpu_step_cost.main(["--batch", "1", "--side", "64", "--steps", "2", "--warmup", "0",
                        "--rounds", "1", "--out", str(out)])
    rows = json.loads(out.read_text())["rows"]
    assert {(row["head"], row["cached_modules"]) for row in rows} == {
        (head, cached) for head in ("full", "half") for cached in cpu_step_cost.CACHED}
    assert all(0 < row["min_s"] <= row["median_s"] <= row["max_s"] and row["steps"] == 2
               for row in rows)
    from nailseg_common.training.unet import create_model
    encoder = create_model("mobilenet_v2").encoder  # five skip features, one a stride
    assert len(cpu_step_cost.returned_modules(encoder, torch.rand(1, 3, 64, 64))) == 5


def test_zero_shot_by_side_scores_every_photo_at_every_side_through_predict(tmp_path):
    from PIL import Image

    from lab.zero_shot_by_side import zero_shot_by_side
    rng = np.random.default_rng(0)
    for name in ("a", "b"):
        for folder, array in (("Images", rng.integers(0, 255, (40, 50, 3), np.uint8)),
                              ("Masks", (rng.random((40, 50)) > 0.7).astype(np.uint8) * 255)):
            (tmp_path / folder / "1").mkdir(parents=True, exist_ok=True)
            Image.fromarray(array).save(tmp_path / folder / "1" / f"{name}.png")
    out = tmp_path / "result.json"
    zero_shot_by_side.main([str(tmp_path), "--sides", "32,64", "--out", str(out)])
    rows = json.loads(out.read_text())["rows"]
    assert [(row["side"], row["flips"]) for row in rows] == [
        (32, False), (32, True), (64, False), (64, True)]
    assert all(row["photos"] == 2 and 0 <= row["dice"] <= 1 for row in rows)


def test_photo_dice_of_masks_at_the_photos_size():
    from lab.zero_shot_by_side.zero_shot_by_side import photo_dice
    mask = np.zeros((4, 6), np.uint8)
    mask[:2] = 1
    predicted = np.zeros((4, 6), np.uint8)
    predicted[:1] = 255
    assert photo_dice(predicted, mask) == pytest.approx(2 * 6 / (6 + 12))
    assert photo_dice(np.zeros((4, 6), np.uint8), np.zeros((4, 6), np.uint8)) == 1.0


def test_wide_pretraining_pairs_every_model_with_the_first_on_the_same_photos(tmp_path):
    from PIL import Image

    from lab.wide_pretraining import wide_pretraining
    from nailseg_common.training.run_logs import SHIPPED_MODEL
    rng = np.random.default_rng(1)
    for name in ("a", "b", "c"):
        for folder, array in (("Images", rng.integers(0, 255, (40, 50, 3), np.uint8)),
                              ("Masks", (rng.random((40, 50)) > 0.7).astype(np.uint8) * 255)):
            (tmp_path / folder / "1").mkdir(parents=True, exist_ok=True)
            Image.fromarray(array).save(tmp_path / folder / "1" / f"{name}.png")
    out = tmp_path / "result.json"
    wide_pretraining.main([str(tmp_path), "--model", f"one={SHIPPED_MODEL}",
                           "--model", f"same={SHIPPED_MODEL}", "--sides", "32", "--out", str(out)])
    rows = json.loads(out.read_text())["rows"]
    assert [(row["model"], row["side"]) for row in rows] == [("one", 32), ("same", 32)]
    assert rows[0]["dice"]["n"] == 3 and "minus_one" not in rows[0]
    assert rows[0]["precision"] == rows[1]["precision"] and 0 <= rows[0]["recall"]["mean"] <= 1
    assert rows[1]["minus_one"] == {"gain": 0.0, "gain_se": 0.0, "wins": 0, "loses": 0}


def test_wide_pretraining_scores_tell_missed_nails_from_skin_taken_for_nail():
    from lab.wide_pretraining.wide_pretraining import scores
    mask = np.zeros((4, 6), np.uint8)
    mask[:2] = 1  # 12 nail pixels
    predicted = np.zeros((4, 6), np.uint8)
    predicted[1:3] = 255  # 6 of them found, 6 skin pixels taken for nail
    assert scores(predicted, mask) == pytest.approx({"dice": 0.5, "precision": 0.5, "recall": 0.5})
    assert scores(np.zeros((4, 6), np.uint8), mask)["precision"] == 1.0


def test_adapt_statistics_replaces_the_running_statistics_and_scores_both_ways(tmp_path):
    from PIL import Image

    from lab.adapt_statistics import adapt_statistics
    from nailseg_common.predict import load_model
    rng = np.random.default_rng(2)
    for name in ("h1_1", "h1_2", "h2_1", "h3_1"):  # three hands: <hand>_<shot>
        for folder, array in (("Images", rng.integers(0, 255, (40, 50, 3), np.uint8)),
                              ("Masks", (rng.random((40, 50)) > 0.7).astype(np.uint8) * 255)):
            (tmp_path / folder / "1").mkdir(parents=True, exist_ok=True)
            Image.fromarray(array).save(tmp_path / folder / "1" / f"{name}.png")
    photos = [np.asarray(Image.open(p)) for p in sorted((tmp_path / "Images").rglob("*.png"))]
    norm = next(m for m in load_model(SHIPPED_MODEL).modules() if isinstance(m, torch.nn.BatchNorm2d))
    adapted = next(m for m in adapt_statistics.adapt_statistics(load_model(SHIPPED_MODEL), photos, 64)
                   .modules() if isinstance(m, torch.nn.BatchNorm2d))
    assert not torch.allclose(norm.running_mean, adapted.running_mean) and not adapted.training
    out = tmp_path / "result.json"
    adapt_statistics.main([str(tmp_path), "--model", str(SHIPPED_MODEL), "--sides", "64",
                           "--out", str(out)])
    result = json.loads(out.read_text())
    row = result["rows"][0]
    assert result["hands"] == 3 and row["as_is"]["dice"]["n"] == 4
    assert row["statistics_of_all_photos"]["dice"]["n"] == 4
    assert 0 < row["statistics_of_other_hands"]["dice"]["n"] < 4  # scored on hands it did not see
    assert row["as_is"]["minus_as_is"] == {"gain": 0.0, "gain_se": 0.0, "wins": 0, "loses": 0}


def test_sweep_rebuilds_the_unet_with_the_decoder_widths_it_is_given():
    widths = (32, 16, 8, 8, 4)
    recipe = sweep_time_to_accuracy.Recipe(encoder="resnet18", decoder_channels=widths, lr=1e-3,
                                           max_steps=2)
    convs = [m for m in recipe.model.decoder.modules() if isinstance(m, torch.nn.Conv2d)]
    assert convs[-1].out_channels == widths[-1]
    assert sum(p.numel() for p in recipe.parameters()) < sum(
        p.numel() for p in sweep_time_to_accuracy.Recipe(encoder="resnet18", lr=1e-3,
                                                         max_steps=2).parameters())


def test_real_photo_errors_tells_outlines_from_missed_nails_and_blobs_on_skin():
    from lab.real_photo_errors.real_photo_errors import errors, match
    mask = np.zeros((20, 30), np.uint8)
    mask[2:8, 2:8] = 1  # a nail found, drawn 1 px too large
    mask[12:18, 2:8] = 1  # a nail missed
    predicted = np.zeros((20, 30), np.uint8)
    predicted[1:9, 1:9] = 255
    predicted[12:16, 20:26] = 255  # a blob on skin
    found = errors(match(predicted, mask))
    assert (found["nails"], found["missed"], found["extra"]) == (2, 1, 1)
    assert found["extra_share"] == pytest.approx(24 / (24 + 28))
    assert found["dice_objects_fixed"] == pytest.approx(2 * 72 / (100 + 72))  # the outline error left
    assert found["dice_outline_fixed"] == pytest.approx(2 * 36 / (60 + 72))  # nail missed, blob left


def test_real_photo_errors_measures_how_far_a_found_nail_reaches_past_its_mask():
    from lab.real_photo_errors.real_photo_errors import match, outline_reach
    mask = np.zeros((30, 30), np.uint8)
    mask[10:20, 5:11] = 1  # a nail 10 rows high, 6 wide
    mask[10:20, 20:26] = 1  # a nail the prediction misses
    predicted = np.zeros((30, 30), np.uint8)
    predicted[8:17, 4:12] = 255  # 2 rows further up, 3 rows short at the bottom, 2 px wider
    assert outline_reach(match(predicted, mask)) == [{"tip": 2, "base": -3, "width": 2.0}]


def test_sweep_half_resolution_head_predicts_full_size_logits_from_the_block_before():
    recipe = sweep_time_to_accuracy.Recipe(encoder="resnet18", decoder_channels=(32, 16, 8, 8, 4),
                                           half_resolution_head=True, lr=1e-3, max_steps=2)
    assert recipe(torch.rand(2, 3, 64, 64)).shape == (2, 1, 64, 64)
    assert recipe.model.segmentation_head[0].in_channels == 8  # the widths' last but one
    features = torch.rand(1, 4, 8, 8)
    assert torch.equal(recipe.model.decoder.blocks[-1](features, 16, 16), features)


@pytest.mark.parametrize("filename", ["time_to_accuracy_t83_seeds_h100.json", "time_to_accuracy_t83_levers_h100.json"])
def test_committed_seeds_summary_follows_from_its_runs(filename):
    results = json.loads((LAB / filename).read_text())
    summary = sweep_time_to_accuracy.seeds_summary(results["runs"])
    assert summary.keys() == results["summary"].keys()
    for name, row in results["summary"].items():
        assert {key: value for key, value in row.items() if key != "step_img_s_alone"} == summary[name]
        runs = [run for run in results["runs"] if run["name"] == name]
        reached = [run for run in runs if run["reached"]]
        assert row["seeds"] == sorted(run["seed"] for run in runs) and row["reached"] == len(reached)
        assert all(run["history"][-1]["val_iou"] >= 0.83 for run in reached)
        assert all(max(h["val_iou"] for h in run["history"]) < 0.83 for run in runs if not run["reached"])
        if reached:
            assert row["seconds_to_level"]["median"] == pytest.approx(np.median([run["seconds"] for run in reached]))


def test_pretraining_scale_trains_on_every_set_and_validates_on_the_first(tmp_path):
    from lab.pretraining_scale import pretraining_scale
    from nailseg_common.predict import load_model
    pretraining_scale.main(["--profile", "smoke", "--sets", "2", "--set-images", "12", "--steps",
                            "2", "--batch", "4", "--side", "64", "--name", "tiny",
                            "--out", str(tmp_path / "out")])
    result = json.loads((tmp_path / "out" / "tiny.json").read_text())
    assert result["generator_seeds"] == [0, 1] and result["steps"] == 2
    assert result["training_images"] + result["valid_images"] * 2 == 2 * 12  # both sets' splits
    assert 0 <= result["synthetic_valid_dice"] <= 1
    model = load_model(tmp_path / "out" / "tiny.pt")  # as predict --checkpoint reads it
    assert model(torch.zeros(1, 3, 64, 64, dtype=torch.uint8)).shape == (1, 1, 64, 64)
