"""Notebook 08's training and its command, nailseg-train: the epoch coverage check, DALI's
shard arithmetic it relies on, and the command line's refusals."""

import json

import numpy as np
import pytest
import pytorch_lightning as pl
import torch
from PIL import Image

from nailseg_common.commands import train as train_command
from nailseg_common.commands.train import parse_args
from nailseg_common.measure import two_gpus_report
from nailseg_common.pipelines import dali_pipeline as dp
from nailseg_common.setup import dali
from nailseg_common.setup.paths import REPO_ROOT
from nailseg_common.setup.profiles import select_profile
from nailseg_common.training.multi_gpu import (
    StepProfile,
    check_epoch_coverage,
    covered_ms,
    device_plan,
    expected_missing,
    pads_into_next_epoch,
    shard_sizes,
    split_steps,
)

NAMES = [f"{i:05d}" for i in range(40)]


def dali_epoch(names: list[str], world_size: int, batch_size: int) -> dict[int, list[str]]:
    """What DALI's DROP gives each rank of one epoch: ⌊N / (world·batch)⌋ batches of its shard."""
    batches = len(names) // (world_size * batch_size)
    starts = np.cumsum([0, *shard_sizes(len(names), world_size)])
    return {rank: names[starts[rank]:starts[rank] + batches * batch_size]
            for rank in range(world_size)}


def test_an_exact_cover_is_ok():
    result = check_epoch_coverage(dali_epoch(NAMES, 2, 4), NAMES, world_size=2, batch_size=4)
    assert result == {"per_rank": {0: 20, 1: 20}, "seen": 40, "duplicates": [], "missing": 0,
                      "expected_missing": 0, "unknown": [], "ok": True}


def test_a_sample_seen_twice_is_caught():
    epoch = dali_epoch(NAMES, 2, 4)
    epoch[1][0] = epoch[0][0]  # rank 1 trains on rank 0's first image instead of its own
    result = check_epoch_coverage(epoch, NAMES, world_size=2, batch_size=4)
    assert result["duplicates"] == [NAMES[0]] and result["missing"] == 1 and not result["ok"]


def test_a_missing_batch_is_caught():
    epoch = dali_epoch(NAMES, 2, 4)
    epoch[0] = epoch[0][:-4]
    result = check_epoch_coverage(epoch, NAMES, world_size=2, batch_size=4)
    assert result["missing"] == 4 and result["expected_missing"] == 0 and not result["ok"]


def test_a_name_outside_the_training_set_is_caught():
    epoch = dali_epoch(NAMES, 2, 4)
    epoch[1][-1] = "valid_00003"
    result = check_epoch_coverage(epoch, NAMES, world_size=2, batch_size=4)
    assert result["unknown"] == ["valid_00003"] and not result["ok"]


@pytest.mark.parametrize(("samples", "world_size", "batch_size", "missing"), [
    (40, 2, 4, 0), (40, 2, 6, 4), (40, 1, 6, 4), (41, 2, 4, 1), (41, 2, 7, 13), (43, 3, 4, 7),
    (960, 1, 60, 0), (960, 2, 60, 0), (960, 8, 60, 0), (960, 2, 64, 64),
])
def test_drop_leaves_out_the_remainder_of_the_global_batch(samples, world_size, batch_size,
                                                          missing):
    assert expected_missing(samples, world_size, batch_size) == missing
    names = [f"{index:05d}" for index in range(samples)]
    result = check_epoch_coverage(dali_epoch(names, world_size, batch_size), names, world_size,
                                  batch_size)
    assert result["missing"] == missing and result["ok"]


def test_shards_follow_dalis_formula():
    assert shard_sizes(40, 2) == [20, 20]
    assert shard_sizes(41, 2) == [20, 21]
    assert shard_sizes(43, 3) == [14, 14, 15]
    assert shard_sizes(240, 1) == [240]


@pytest.mark.skipif(not dali.dali_available(), reason=dali.dali_status())
@pytest.mark.parametrize(("samples", "world_size", "batch_size"), [
    (40, 2, 4), (40, 2, 6), (41, 2, 7), (43, 3, 4), (41, 2, 4), (43, 2, 7),
])
def test_cpu_dali_shards_agree_with_the_check(tmp_path, samples, world_size, batch_size):
    """Real DALI readers, one per rank, over three epochs: the check passes exactly where
    ``pads_into_next_epoch`` does not predict DALI's padding batch in the next epoch."""
    images, masks = [], []
    for index in range(samples):  # JPEG photos as a phone writes them, 0/255 PNG labels
        images.append(str(tmp_path / f"{index:05d}.jpg"))
        masks.append(str(tmp_path / f"label_{index:05d}.png"))
        Image.fromarray(np.full((8, 8, 3), index, np.uint8)).save(images[-1], quality=90)
        Image.fromarray(np.zeros((8, 8), np.uint8)).save(masks[-1])
    names = [f"{index:05d}" for index in range(samples)]
    loaders = [dp.make_loader(images, masks, image_size=8, batch_size=batch_size, train=True,
                              device="cpu", shard_id=rank, num_shards=world_size, num_threads=1,
                              sample_ids=True) for rank in range(world_size)]

    def epoch() -> dict[int, list[str]]:
        return {rank: [name for batch in loader for name in dp.sample_names(batch["sample_id"])]
                for rank, loader in enumerate(loaders)}

    ok = [check_epoch_coverage(epoch(), names, world_size, batch_size)["ok"] for _ in range(3)]
    padded = pads_into_next_epoch(samples, world_size, batch_size)
    assert ok == ([True, False, False] if padded else [True, True, True])


def test_covered_time_counts_overlapping_kernels_once():
    assert covered_ms([]) == 0.0
    assert covered_ms([(0, 1000), (500, 1500), (3000, 4000)]) == 2.5  # µs in, ms out
    assert covered_ms([(0, 4000), (1000, 2000)]) == 4.0


def test_a_step_profile_never_reads_a_negative_idle_time():
    """Kernels of 2 steps: compute 0-3 ms, NCCL alone 3-4 ms, nothing 4-5 ms, compute 5-8 ms;
    a host clock that read less than the kernels took must not make idle negative."""
    kernels = [("conv", 0, 3000), ("ncclAllReduce", 2000, 4000), ("conv", 5000, 8000)]
    split = split_steps(kernels, wall_ms=3.0, steps=2)
    assert split["idle_ms"] == 0.5 and split["all_reduce_not_hidden_ms"] == 0.5
    assert split["compute_ms"] + split["all_reduce_not_hidden_ms"] + split["idle_ms"] == \
        split["wall_ms"] == 4.0
    assert split_steps(None, wall_ms=3.0, steps=2)["idle_ms"] is None


def test_the_step_table_adds_up_to_the_time_per_step(capsys):
    """Profiled steps (10 ms) slower than an unprofiled one (8 ms of wall time a step): the rest
    reads -2 ms, the parts still add up to the 8 ms, and the profiler's 2 ms are named."""
    profiled = {"compute_ms": 9.0, "all_reduce_not_hidden_ms": 0.5, "idle_ms": 0.5, "wall_ms": 10.0}
    one = {"step_profile": profiled, "world_size": 1, "config": {"profile": {"batch_size": 4}},
           "epochs": [{"seconds": 0.8, "images": 400}] * 3}  # 100 steps of 4 in 0.8 s: 8 ms a step
    record = {"runs": {"one": one, "two": one | {"world_size": 2}}}  # 16 ms a step of 8
    table = two_gpus_report.step_breakdown(record["runs"])
    assert table.loc[two_gpus_report.REST].tolist() == [-2.0, 6.0]
    assert table.loc[list(two_gpus_report.STEP_PARTS)].sum().tolist() == table.loc["time per step"].tolist()
    two_gpus_report.explain_speedup(record)
    out = capsys.readouterr().out
    assert "one: the profiled steps took 2.00 ms longer than an unprofiled step" in out
    assert "differs between the runs by up to 8.0 ms a step" in out


def test_one_device_under_ddp_splits_what_a_step_on_two_adds(capsys):
    """8 ms a step on one device, 9 under DDP, 12 on two: DDP's own +1 ms, the rest +3 ms."""
    def run(world_size: int, per_step_ms: float) -> dict:
        profiled = {"compute_ms": per_step_ms - 1, "all_reduce_not_hidden_ms": 0.5,
                    "idle_ms": 0.5, "wall_ms": per_step_ms, "nccl_ms": 0.5 * (world_size - 1)}
        images = 100 * 4 * world_size  # 100 steps an epoch, batch 4 per device
        return {"step_profile": profiled, "world_size": world_size, "history": [],
                "config": {"profile": {"batch_size": 4}}, "train_img_s": None,
                "epochs": [{"seconds": per_step_ms / 10, "images": images}] * 3}

    record = {"runs": {"one device": run(1, 8.0), "2 devices": run(2, 12.0)},
              "ddp_on_one_device": run(1, 9.0)}
    two_gpus_report.explain_speedup(record)
    out = capsys.readouterr().out
    assert "DDP's own work (one device under DDP) takes +1.0 ms and the other GPU with NCCL +3.0 ms" in out


def test_seeds_are_paired_and_summarised_by_median_and_range(capsys):
    def run(seed: int, img_s: float, seconds: float | None) -> dict:
        history = ([{"seconds": seconds, "step": 10, "val_iou": 0.9}] if seconds
                   else [{"seconds": 1, "step": 10, "val_iou": 0.5}])
        return {"config": {"seed": seed, "profile": {"batch_size": 4}}, "world_size": 1, "train_img_s": img_s,
                "history": history}

    record = {"seeds": {"one device": [run(0, 100, 10.0), run(1, 100, 8.0), run(2, 110, 9.0)],
                        "2 devices": [run(0, 190, 5.0), run(1, 200, None), run(2, 198, 6.3)]}}
    table = two_gpus_report.seed_ratios(record, 0.86)
    assert table["img/s ratio"].round(2).tolist() == [1.9, 2.0, 1.8]
    assert table["time ratio"].round(2).tolist()[::2] == [0.5, 0.7]
    two_gpus_report.show_seeds(record, 0.86)
    out = capsys.readouterr().out
    assert "images/s, 2 devices ÷ one, over 3 seed(s): median 1.90 (range 1.80–2.00)" in out
    assert "median 0.60 (range 0.50–0.70); 1 seed(s) without it" in out


def test_a_plan_for_n_devices_scales_notebook_07s_recipe():
    gpu = select_profile("smoke", fast_lr=2e-3, warmup_steps=50, ddp_max_steps=1500)
    assert device_plan(gpu, 1) == {"devices": 1, "lr": 2e-3, "warmup": 50, "steps": 1500}
    two = device_plan(gpu, 2)
    assert (two["lr"], two["warmup"], two["steps"]) == (pytest.approx(2e-3 * 2 ** 0.5), 25, 1200)
    assert device_plan(gpu, 2, "linear", 1.0)["lr"] == pytest.approx(4e-3)
    with pytest.raises(ValueError, match="lr_scaling must be one of"):
        device_plan(gpu, 2, "cubic")


class TinyModule(pl.LightningModule):
    def __init__(self):
        super().__init__()
        self.layer = torch.nn.Linear(4, 1)

    def training_step(self, batch, batch_idx):
        return self.layer(batch[0]).square().mean()

    def configure_optimizers(self):
        return torch.optim.SGD(self.parameters(), lr=0.1)


@pytest.mark.parametrize(("epoch", "steps", "profiled"), [(1, 2, 2), (1, 9, 2), (5, 2, None)])
def test_step_profile_times_the_steps_of_one_epoch(tmp_path, epoch, steps, profiled):
    """Batches 2.. of the epoch (batch 1 warms the profiler up), never past its end; no summary
    for an epoch never run."""
    data = torch.utils.data.TensorDataset(torch.randn(16, 4))
    step_profile = StepProfile(epoch, steps)
    trainer = pl.Trainer(accelerator="cpu", max_epochs=2, logger=False, callbacks=[step_profile],
                         enable_checkpointing=False, enable_progress_bar=False,
                         enable_model_summary=False, default_root_dir=tmp_path)
    trainer.fit(TinyModule(), torch.utils.data.DataLoader(data, batch_size=4))
    if profiled is None:
        assert step_profile.summary is None
        return
    summary = step_profile.summary
    assert (summary["epoch"], summary["steps"]) == (epoch, profiled)
    assert summary["wall_ms"] > 0 and summary["compute_ms"] is None  # no GPU: wall time only
    assert summary["nccl_ms"] is None


def test_defaults_are_notebook_07s_recipe_and_whole_epochs_are_trained():
    args, profile = parse_args(["--profile", "smoke"])
    assert (args.devices, args.compile, args.run_name) == (1, False, "ddp_1")
    smoke = select_profile("smoke")
    assert (profile.batch_size, profile.lr, profile.max_steps) == (
        smoke.ddp_batch_size, smoke.fast_lr, smoke.ddp_max_steps)
    assert profile.max_train_batches is None and profile.max_valid_batches is None


def test_warm_up_compile_and_validation_interval_default_to_the_profiles_recipe():
    _, profile = parse_args(["--profile", "smoke"])
    smoke = select_profile("smoke")
    assert (profile.warmup_steps, profile.val_every_n_epochs, profile.compile_model) == (
        smoke.warmup_steps, smoke.val_every_n_epochs, smoke.compile_model)
    _, profile = parse_args(["--profile", "smoke", "--warmup-steps", "3",
                                "--val-every-n-epochs", "2"])
    assert (profile.warmup_steps, profile.val_every_n_epochs) == (3, 2)


def test_arguments_reach_the_profile_as_given():
    args, profile = parse_args(["--profile", "smoke", "--devices", "2", "--batch-size", "4",
                                "--lr", "0.003", "--max-steps", "7", "--image-size", "32",
                                "--compile", "--run-name", "mine"])
    assert (profile.batch_size, profile.lr, profile.max_steps, profile.image_size) == (4, 0.003, 7, 32)
    assert args.compile and args.run_name == "mine" and args.devices == 2


def refusal(capsys, argv) -> str:
    with pytest.raises(SystemExit) as exit_info:
        parse_args(argv)
    assert exit_info.value.code == 2
    return capsys.readouterr().err


def test_there_is_no_pipeline_to_choose(capsys):
    assert "unrecognized arguments: --pipeline" in refusal(
        capsys, ["--profile", "smoke", "--pipeline", "kornia"])


def test_recording_or_profiling_while_validating_is_refused(capsys, tmp_path):
    checkpoint = tmp_path / "final.ckpt"
    checkpoint.touch()
    for option in (["--record-samples"], ["--profile-epoch", "2"]):
        message = refusal(capsys, ["--profile", "smoke", "--validate", str(checkpoint), *option])
        assert "drop them with --validate" in message


def test_a_missing_checkpoint_is_named(capsys, tmp_path):
    message = refusal(capsys, ["--profile", "smoke", "--validate", str(tmp_path / "none.ckpt")])
    assert "no such checkpoint" in message and "none.ckpt" in message


def test_more_devices_than_gpus_is_refused(capsys, monkeypatch):
    monkeypatch.setattr("nailseg_common.setup.profiles.gpu_available", lambda: True)
    monkeypatch.setattr(torch.cuda, "device_count", lambda: 1)
    message = refusal(capsys, ["--profile", "gpu", "--devices", "2"])
    assert "shows 1 GPU(s)" in message and "--devices 1" in message


def test_zero_devices_and_unknown_profiles_are_refused(capsys):
    assert "give 1 or more" in refusal(capsys, ["--profile", "smoke", "--devices", "0"])
    assert "Unknown profile" in refusal(capsys, ["--profile", "tiny"])


def test_without_dali_the_message_says_where_it_runs(capsys, monkeypatch):
    monkeypatch.setattr(train_command, "dali_available", lambda: False)
    monkeypatch.setattr(dali, "IMPORT_ERROR", ImportError("No module named 'nvidia.dali'"))
    assert "Linux" in refusal(capsys, ["--profile", "smoke"])


def test_ddp_options_reach_distributed_data_parallel_only_when_given():
    from nailseg_common.training.ddp_runs import ddp_options

    args, _ = parse_args(["--profile", "smoke"])
    assert ddp_options(args) == {"static_graph": False, "gradient_as_bucket_view": False}
    args, _ = parse_args(["--profile", "smoke", "--bucket-cap-mb", "100", "--static-graph",
                          "--gradient-as-bucket-view"])
    assert ddp_options(args) == {"static_graph": True, "gradient_as_bucket_view": True,
                                 "bucket_cap_mb": 100.0}


def test_bucket_view_gradients_are_refused_where_the_optimizer_is_fused(capsys, monkeypatch):
    monkeypatch.setattr("nailseg_common.setup.profiles.gpu_available", lambda: True)
    message = refusal(capsys, ["--profile", "gpu", "--gradient-as-bucket-view"])
    assert "fused kernel" in message and "leave it off" in message


def test_a_bucket_of_no_size_is_refused_with_the_default(capsys):
    assert "PyTorch's is 25" in refusal(capsys, ["--profile", "smoke", "--bucket-cap-mb", "0"])


def test_one_device_runs_under_ddp_only_when_asked(capsys):
    from pytorch_lightning.strategies import DDPStrategy

    from nailseg_common.training.multi_gpu import device_options

    args, _ = parse_args(["--profile", "smoke", "--devices", "1"])
    assert device_options(args) == {"devices": 1, "num_nodes": 1, "strategy": "auto"}
    args, _ = parse_args(["--profile", "smoke", "--devices", "1", "--ddp-on-one-device",
                          "--static-graph"])
    options = device_options(args)
    assert options["devices"] == 1 and isinstance(options["strategy"], DDPStrategy)
    assert "for --devices 1" in refusal(capsys, ["--profile", "smoke", "--devices", "2",
                                                 "--ddp-on-one-device"])


@pytest.mark.parametrize("option, message", [
    (["--lr", "-1e-3"], "--lr -0.001: choose a peak learning rate between 0 and 1"),
    (["--batch-size", "0"], "--batch-size 0: give 1 or more images per device"),
    (["--devices", "1.5"], "--devices 1.5: not a whole number; give 1 or more."),
    (["--image-size", "100"], "--image-size 100: the U-Net needs a positive multiple of 32"),
    (["--target-iou", "86"], "--target-iou 86.0: choose a hard IoU above 0 and at most 1"),
    (["--val-every-n-epochs", "0"], "--val-every-n-epochs 0: give 1 or more epochs."),
    (["--seed", "-1"], "--seed -1: give a whole number from 0 to 4294967295."),
    (["--warmup-steps", "many"], "--warmup-steps many: not a whole number; give 0 or more")])
def test_a_wrong_number_exits_2_naming_the_option(capsys, option, message):
    assert message in refusal(capsys, ["--profile", "smoke", *option])


def test_the_bottom_line_counts_the_images_each_run_needed_to_the_level():
    """The committed two-GPU record: one device reached IoU 0.86 after 144 steps of 60 images,
    two after 96 steps of 2 × 60; at 1.33 × the images, 0.75 × the time needs 1.78 × the speed."""
    record = json.loads((REPO_ROOT / "results" / "two_gpus_h200x2.json").read_text())
    lines = two_gpus_report.bottom_line(record, 0.86)
    assert lines[0] == "to IoU 0.86, median over 3 seed(s): one device 8,640 images, 2 devices 11,520 (1.33×)"
    assert "0.75× the time needs 1.78× the images/s" in lines[3]
    assert lines[-1].startswith("time to IoU 0.86, 2 devices ÷ one (mean of 3 seed(s))") and "against 0.750" in lines[-1]
    assert two_gpus_report.bottom_line(record, 0.99) == ["no seed reached IoU 0.99 on both: no bottom line"]


def test_the_plan_table_gives_each_plan_its_shards_batches_and_remainder():
    plans = {"one device": {"devices": 1, "lr": 1e-3, "warmup": 50, "steps": 30},
             "2 devices": {"devices": 2, "lr": 1.4e-3, "warmup": 25, "steps": 24}}
    table = two_gpus_report.plan_table(plans, 41, 4)
    assert table["training shards"].tolist() == [[41], [20, 21]]
    assert table["batches per rank per epoch"].tolist() == [10, 5]
    assert table["global batch"].tolist() == [4, 8]
    assert table["left out per epoch"].tolist() == [1, 1]
    assert table["epochs"].tolist() == [3.0, 4.8]


def test_the_iou_level_is_the_one_given_else_the_highest_every_seed_reaches(capsys):
    seeds = "results/time_to_accuracy_h200.json"
    assert two_gpus_report.iou_level(0.5, seeds, [0.8]) == 0.5
    runs = json.loads((REPO_ROOT / seeds).read_text())["runs"]
    every_seed = min(max(row["val_iou"] for row in run["history"]) for run in runs)
    level = two_gpus_report.iou_level(None, seeds, [0.0, every_seed, 1.01])
    assert level == every_seed
    assert f"IoU level: {level} (every seed of {seeds} reaches it)" in capsys.readouterr().out


def test_a_run_on_two_gpus_is_the_record_to_commit_and_shows_no_other(capsys):
    reference = "results/two_gpus_h200x2.json"
    assert two_gpus_report.committed_record(reference, 2) is None
    assert "it is the record to commit as results/two_gpus_h200x2.json" in capsys.readouterr().out
    assert two_gpus_report.committed_record(reference, 0)["runs"]
    assert two_gpus_report.committed_record("results/none.json", 1) is None
    assert "no results/none.json: run this notebook on two GPUs" in capsys.readouterr().out
