"""Notebook 07's faster training: the warm-up meets a run's shapes through the Trainer and
leaves no trace, the clock that stops a run at its target, and the kernel profile."""

import dataclasses

import pytest
import pytorch_lightning as pl
import torch
from torch.utils.data import DataLoader, Dataset
from torch.utils.flop_counter import FlopCounterMode

from nailseg_common.measure.benchmark import profile_step, reuse
from nailseg_common.measure.timing import resident_batches
from nailseg_common.setup.profiles import select_profile
from nailseg_common.training import run_logs
from nailseg_common.training.fast_training import (
    AccuracyClock,
    AverageWeights,
    FastNailSegmentation,
    common_level,
    mask_iou,
    seconds_to_level,
    training_flops_per_image,
    warm_up,
)
from nailseg_common.training.trainer import make_trainer
from nailseg_common.training.unet import LitNailSegmentation, grown

SMOKE = dataclasses.replace(select_profile("smoke"), encoder="tu-efficientnet_lite0", image_size=64,
                            batch_size=4, max_train_batches=None, max_valid_batches=None)


def smoke_model(max_steps: int = 10) -> FastNailSegmentation:
    torch.manual_seed(0)
    return FastNailSegmentation(encoder=SMOKE.encoder, lr=1e-2, max_steps=max_steps)


class RandomBatches(Dataset):
    """``count`` image/mask pairs of the batch contract (uint8 CHW), fixed by a seed."""

    def __init__(self, count: int, size: int):
        generator = torch.Generator().manual_seed(0)
        self.images = torch.randint(0, 256, (count, 3, size, size), dtype=torch.uint8,
                                    generator=generator)
        self.labels = (torch.rand(count, 1, size, size, generator=generator) > 0.5).to(torch.uint8)

    def __len__(self) -> int:
        return len(self.images)

    def __getitem__(self, index: int) -> dict:
        return {"image": self.images[index], "label": self.labels[index]}


@pytest.mark.parametrize(("target", "steps", "validations"), [(0.0, 2, 1), (1.1, 6, 3)])
def test_accuracy_clock_stops_at_the_first_validation_that_reaches_the_target(
        tmp_path, monkeypatch, target, steps, validations):
    """Two batches per epoch, validation every epoch, six steps at most: a target of 0 stops
    the fit after the first validation, an unreachable one lets it run to the end."""
    monkeypatch.setenv("NAILSEG_RUNS_DIR", str(tmp_path))
    profile = dataclasses.replace(SMOKE, max_steps=6)
    loader = DataLoader(RandomBatches(8, profile.image_size), batch_size=4)
    clock = AccuracyClock(target)
    trainer = make_trainer(profile, "clock", enable_checkpointing=False,
                           enable_progress_bar=False, callbacks=[clock])
    trainer.fit(smoke_model(profile.max_steps), train_dataloaders=loader, val_dataloaders=loader)
    assert trainer.global_step == steps and len(clock.history) == validations
    assert clock.fit_s >= clock.history[-1]["seconds"] > 0
    assert [row["step"] for row in clock.history] == [2, 4, 6][:validations]
    if target <= 0:
        assert clock.reached == clock.history[0]
    else:
        assert clock.reached is None


class WeightProbe(pl.Callback):
    """The first parameter of the module after every step and at every validation batch."""

    def __init__(self):
        self.trained, self.validated = [], []

    def on_train_batch_end(self, trainer, pl_module, outputs, batch, batch_idx):
        self.trained.append(next(pl_module.parameters()).detach().clone())

    def on_validation_batch_start(self, trainer, pl_module, batch, batch_idx, dataloader_idx=0):
        self.validated.append(next(pl_module.parameters()).detach().clone())


def test_average_weights_validates_the_warm_started_average_and_trains_on_the_weights(tmp_path, monkeypatch):
    """Two steps an epoch, a validation after each epoch: what each validation sees is the
    average of the weights after every step so far, with the decay min(0.9, (1+s)/(10+s));
    after it, and at the end, the model holds the trained weights."""
    monkeypatch.setenv("NAILSEG_RUNS_DIR", str(tmp_path))
    profile = dataclasses.replace(SMOKE, max_steps=4)
    loader = DataLoader(RandomBatches(8, profile.image_size), batch_size=4)
    model, probe = smoke_model(profile.max_steps), WeightProbe()
    initial = next(model.parameters()).detach().clone()
    trainer = make_trainer(profile, "average", enable_checkpointing=False, enable_progress_bar=False,
                           num_sanity_val_steps=1, callbacks=[AverageWeights(0.9), probe])
    trainer.fit(model, train_dataloaders=loader, val_dataloaders=loader)
    average, expected = initial, []
    for step, trained in enumerate(probe.trained, start=1):
        decay = min(0.9, (1 + step) / (10 + step))
        average = decay * average + (1 - decay) * trained
        expected.append(average)
    sanity, validated = probe.validated[0], probe.validated[1:]
    assert torch.equal(sanity, initial)  # the sanity check, before training: the weights as they are
    assert len(probe.trained) == 4 and len(validated) == 4  # two validations of two batches
    for seen, step in zip(validated, (2, 2, 4, 4), strict=True):
        assert torch.allclose(seen, expected[step - 1], atol=1e-6)
        assert not torch.allclose(seen, probe.trained[step - 1])
    assert torch.equal(next(model.parameters()).detach(), probe.trained[-1])


def test_flip_average_predicts_the_mirror_image_of_the_mirror_images_prediction():
    image = torch.rand(2, 3, SMOKE.image_size, SMOKE.image_size)
    torch.manual_seed(0)
    averaged = FastNailSegmentation(encoder=SMOKE.encoder, flip_average=True).eval()
    torch.manual_seed(0)
    plain = FastNailSegmentation(encoder=SMOKE.encoder).eval()
    with torch.no_grad():
        mirrored = averaged(image.flip(-1)).flip(-1)
        assert torch.allclose(averaged(image), mirrored, atol=1e-5)
        assert not torch.allclose(plain(image), plain(image.flip(-1)).flip(-1), atol=1e-5)
        assert torch.allclose(averaged(image), 0.5 * (plain(image) + plain(image.flip(-1)).flip(-1)), atol=1e-6)
    averaged.train()
    assert torch.equal(averaged(image), plain.train()(image))  # training sees each image once


def test_predictions_outside_training_run_the_compiled_unet_uncompiled():
    graphs = []

    def counting_backend(graph, example_inputs):  # a torch.compile back end that runs eagerly
        graphs.append(graph)
        return graph.forward

    model = smoke_model()
    model.model = torch.nn.Conv2d(3, 1, 1)  # a U-Net's place, small enough to trace at once
    model.model.compile(backend=counting_backend)
    image = torch.rand(2, 3, SMOKE.image_size, SMOKE.image_size)
    try:
        with torch.no_grad():
            model.eval()(image)
        assert graphs == []
        model.train()(image)
        assert len(graphs) >= 1
    finally:
        torch.compiler.reset()


def test_flops_are_counted_on_the_meta_device_as_on_the_cpu():
    torch.manual_seed(0)
    model, image = smoke_model(), torch.rand(1, 3, SMOKE.image_size, SMOKE.image_size)
    with FlopCounterMode(display=False) as on_cpu, torch.no_grad():
        model(image)
    counted = training_flops_per_image(model, SMOKE.image_size)
    assert counted["forward"] == on_cpu.get_total_flops() > 0
    assert counted["training"] > 2 * counted["forward"]  # the backward costs about twice the forward
    assert next(model.parameters()).device.type == "meta"


def test_reuse_hands_back_the_same_model_with_the_pipelines_augmentation():
    model = smoke_model()
    make_model = reuse(model)
    augmentation = torch.nn.Identity()
    assert make_model(encoder="ignored", lr=1.0, max_steps=1, gpu_augmentation=augmentation) is model
    assert model.gpu_augmentation is augmentation
    assert make_model(gpu_augmentation=None) is model and model.gpu_augmentation is None


@pytest.mark.parametrize("name", ["smoke", "cpu", "gpu"])
def test_every_profile_holds_the_faster_recipe(name, monkeypatch):
    monkeypatch.setattr("nailseg_common.setup.profiles.gpu_available", lambda: True)
    profile = select_profile(name)
    assert profile.fast_batch_size >= 1 and profile.fast_lr > 0 and profile.fast_max_steps >= 1
    assert 0 <= profile.warmup_steps < profile.fast_max_steps or profile.warmup_steps == 0
    assert profile.val_every_n_epochs >= 1 and profile.ddp_max_steps >= 1
    assert profile.compile_model == (profile.accelerator == "gpu")


class RandomData(pl.LightningDataModule):
    """Eight training and five validation pairs (a last validation batch of one)."""

    def train_dataloader(self):
        return DataLoader(RandomBatches(8, SMOKE.image_size), batch_size=SMOKE.batch_size)

    def val_dataloader(self):
        return DataLoader(RandomBatches(5, SMOKE.image_size), batch_size=SMOKE.batch_size)


class ValidationShapes(pl.Callback):
    def __init__(self):
        self.training, self.validation = [], []

    def on_train_batch_start(self, trainer, pl_module, batch, batch_idx):
        self.training.append(len(batch["image"]))

    def on_validation_batch_start(self, trainer, pl_module, batch, batch_idx, dataloader_idx=0):
        self.validation.append(len(batch["image"]))


def with_callback(extra: pl.Callback):
    """``run_logs.course_callbacks`` that also adds ``extra`` to every course Trainer."""
    original = run_logs.course_callbacks

    def course_callbacks(profile, run_name, overrides):
        callbacks, logger = original(profile, run_name, overrides)
        return [*callbacks, extra], logger
    return course_callbacks


def test_warm_up_meets_every_shape_through_the_trainer_and_restores_every_weight(tmp_path, monkeypatch):
    monkeypatch.setenv("NAILSEG_RUNS_DIR", str(tmp_path))
    model = smoke_model()
    before = {key: value.clone() for key, value in model.state_dict().items()}
    assert any("running_mean" in key for key in before), "batch norm statistics are checked too"
    shapes = ValidationShapes()
    monkeypatch.setattr(run_logs, "course_callbacks", with_callback(shapes))
    seconds = warm_up(model, RandomData(), SMOKE)
    assert seconds > 0 and shapes.training == [4, 4] and shapes.validation == [4, 1]
    after = model.state_dict()
    assert after.keys() == before.keys()
    assert [key for key in before if not torch.equal(before[key], after[key])] == []


def test_profile_step_times_the_steps_after_the_first(tmp_path, monkeypatch):
    monkeypatch.setenv("NAILSEG_RUNS_DIR", str(tmp_path))
    resident = resident_batches(RandomData().train_dataloader(), torch.device("cpu"))
    kernels = profile_step(smoke_model(), SMOKE, resident, steps=2)
    assert list(kernels.columns) == ["ms per step"] and (kernels["ms per step"] > 0).all()
    assert "convolutions and matrix products" in kernels.index


def test_the_gpu_recipes_batch_divides_the_synthetic_split(monkeypatch):
    """One training and one validation shape (60 divides 960 and 240): each new shape costs
    cuDNN a run-time compilation, and a compiled model a graph."""
    monkeypatch.setattr("nailseg_common.setup.profiles.gpu_available", lambda: True)
    gpu = select_profile("gpu")
    train, valid = round(gpu.num_images * 0.8), round(gpu.num_images * 0.2)
    assert train % gpu.fast_batch_size == 0 and valid % gpu.fast_batch_size == 0


def test_one_pixel_of_outline_costs_a_small_nail_its_share_of_the_iou():
    nail = torch.zeros(1, 1, 12, 12)
    nail[..., 4:8, 4:8] = 1.0  # 4 × 4: one pixel larger is 6 × 6, one pixel smaller 2 × 2
    assert mask_iou(grown(nail, 1), nail).item() == pytest.approx(16 / 36)
    assert mask_iou(grown(nail, -1), nail).item() == pytest.approx(4 / 16)
    assert mask_iou(grown(nail, 0), nail).item() == 1.0


def test_the_level_every_committed_seed_reaches_has_a_median_and_a_range():
    """Notebook 07 times its run to the highest level every seed of the committed file reaches."""
    import json
    import math
    import statistics

    from nailseg_common.setup.paths import REPO_ROOT

    seeds = json.loads((REPO_ROOT / "results" / "time_to_accuracy_h200.json").read_text())
    level = seeds["summary"]["target_iou"]
    assert common_level(seeds["runs"], (0.75, 0.80, 0.82, level)) == level  # 07's level: the file's own
    times = seconds_to_level(seeds["runs"], level)
    assert len(times) >= 5 and math.inf not in times
    assert seeds["summary"]["median_seconds_to_target"] == statistics.median(times)
    assert seconds_to_level(seeds["runs"], 0.0) == [run["history"][0]["seconds"] for run in seeds["runs"]]


def test_the_ladder_table_compares_each_step_with_the_one_before_and_the_first():
    from nailseg_common.measure.plots import ladder_table

    def result(rates):
        return {"img_s": sorted(rates)[1], "img_s_min": min(rates), "img_s_max": max(rates), "repeats": rates}

    steps = ladder_table({"eager": (4, 1e12, result([9.0, 10.0, 11.0])),
                          "faster": (8, 0.5e12, result([14.0, 15.0, 16.0]))}, peak_tflops=100.0)
    assert steps.loc["faster", "× previous"] == steps.loc["faster", "× 02's step"] == 1.5
    assert steps.loc["eager", "TFLOP/s"] == 10.0 and steps.loc["faster", "% of measured peak"] == 7.5
    assert steps.loc["faster", "windows"] == 3


def test_the_half_resolution_head_predicts_full_size_logits_without_the_last_decoder_block():
    full = FastNailSegmentation(encoder="tu-efficientnet_lite0")
    half = FastNailSegmentation(encoder="tu-efficientnet_lite0", half_resolution_head=True)
    image = torch.rand(2, 3, 64, 64)
    assert half(image).shape == full(image).shape == (2, 1, 64, 64)
    features = torch.rand(1, 5, 8, 8)
    assert torch.equal(half.model.decoder.blocks[-1](features, 16, 16), features)  # the block is skipped
    assert half.model.segmentation_head[0].in_channels == full.model.decoder.blocks[-2].conv2[0].out_channels
    restored = FastNailSegmentation(**half.hparams)  # a checkpoint's hyperparameters rebuild it
    restored.load_state_dict(half.state_dict())
    assert torch.equal(restored.eval()(image), half.eval()(image))


@pytest.mark.parametrize("fused", [False, True])
def test_adamw_off_fused_keeps_the_default_foreach_kernels_of_02s_step(fused):
    """fused=False passed to AdamW also turns foreach off (a loop over the tensors); off, the
    module must leave both unset, as 02's module does."""
    model = FastNailSegmentation(encoder=SMOKE.encoder, encoder_weights=None, lr=1e-3, max_steps=10,
                                 fused_optimizer=fused)
    optimizer = model.configure_optimizers()["optimizer"]
    baseline = LitNailSegmentation(SMOKE.encoder, 1e-3, 10, encoder_weights=None).configure_optimizers()
    assert optimizer.defaults["foreach"] is baseline["optimizer"].defaults["foreach"] is None
    assert optimizer.defaults["fused"] is (True if fused else baseline["optimizer"].defaults["fused"])


def test_the_levels_table_counts_the_seeds_that_reach_each_level_and_times_only_those():
    import math

    import pandas as pd

    from nailseg_common.measure.time_to_accuracy_report import levels_table

    by_seed = pd.DataFrame({0.8: [5.0, 7.0, 9.0], 0.9: [6.0, math.inf, 12.0], 0.95: [math.inf] * 3})
    table = levels_table(by_seed)
    assert table["seeds reaching it"].tolist() == [3, 2, 0]
    assert table.loc["IoU 0.80"].tolist() == [3, 7.0, 5.0, 9.0]
    assert table.loc["IoU 0.90", "median s"] == 12.0 and table.loc["IoU 0.90", "slowest s"] == 12.0
    assert table.loc["IoU 0.95"].iloc[1:].isna().all()


def test_a_run_is_judged_against_the_seeds_median_with_one_more_draws_spread():
    import pandas as pd

    from nailseg_common.core.statistics import prediction_spread
    from nailseg_common.measure.time_to_accuracy_report import against_seeds

    by_seed = pd.DataFrame({0.86: [8.0, 9.0, 10.0, 11.0]})
    verdict = against_seeds({"reached": True, "seconds_to_target": 9.0, "max_steps": 100}, by_seed, 0.86, True)
    assert verdict.target == 9.5 and verdict.spread == prediction_spread(by_seed[0.86])
    assert not verdict.higher_is_better and verdict.outcome == "within noise"
    missed = against_seeds({"reached": False, "max_steps": 100}, by_seed, 0.86, False)
    assert missed == "IoU 0.86 not reached in 100 steps: a CPU profile trains far too briefly"


def test_a_pipeline_keeps_up_only_when_its_whole_interval_lies_within_a_tenth_of_the_bound():
    import pandas as pd

    from nailseg_common.measure.benchmark import keeping_up

    table = pd.DataFrame({"ratio to bound": [0.97, 0.6, 0.95], "±": [0.05, 0.1, 0.2]},
                         index=["dali", "kornia", "albumentations"])
    dali, kornia, albumentations = keeping_up(table, 3)
    assert dali == "dali: 0.970 ± 0.050 of the faster bound, keeps up"
    assert kornia.endswith("falls behind")
    assert albumentations.endswith("cannot tell from 3 windows (its interval reaches 0.75)")


def test_the_profile_in_words_gives_the_floor_of_the_steps_flops_at_the_peak():
    import pandas as pd

    from nailseg_common.measure.profiling import busy_in_words

    kernels = pd.DataFrame({"ms per step": {"convolutions and matrix products": 6.0, "optimizer": 1.0}})
    busy, floor = busy_in_words(kernels, 10.0, 2e12, 1000.0, "GPU")
    assert busy == "GPU busy 7.0 ms of a 10.0 ms step; convolutions and matrix products 6.0 ms of it"
    assert floor == "at the measured peak they would take 2.0 ms"
    assert busy_in_words(kernels, 10.0, 2e12, None, "CPU") == [busy.replace("GPU", "CPU")]
