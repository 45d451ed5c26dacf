"""A notebook run with overridden parameters really uses them (not only prints them)."""

import json
from pathlib import Path

import nbformat
import papermill
from nbformat.v4 import new_code_cell

from nailseg_common.training.checkpoints import SHIPPED_MODEL

NOTEBOOKS = Path(__file__).resolve().parents[1] / "notebooks"

# What the run itself reports back, read from the live objects after the last cell.
REPORT_02 = """
import json
loader = datamodule.train_dataloader()
first = next(iter(loader))
print("REPORT" + json.dumps({
    "image_shape": list(first["image"].shape),
    "num_workers": loader.num_workers,
    "images": len(datamodule.train_set) + len(datamodule.valid_set),
    "encoder": model.hparams.encoder, "lr": model.hparams.lr,
    "schedule_steps": model.hparams.max_steps,
    "max_steps": trainer.max_steps, "epochs_run": trainer.current_epoch,
    "steps": trainer.global_step, "precision": trainer.precision,
    "accelerator": type(trainer.accelerator).__name__,
    "val_batches": trainer.num_val_batches[0],
}))
"""


def run_with(path: Path, parameters: dict, report: str, tmp_path: Path, monkeypatch) -> dict:
    monkeypatch.setenv("NAILSEG_DATA_DIR", str(tmp_path / "data"))
    monkeypatch.setenv("NAILSEG_RUNS_DIR", str(tmp_path / "runs"))
    notebook = nbformat.read(path, as_version=4)
    notebook.cells.append(new_code_cell(report))
    out = papermill.execute_notebook(notebook, str(tmp_path / path.name), parameters=parameters,
                                     kernel_name="python3", cwd=str(NOTEBOOKS), progress_bar=False)
    text = "".join(o.get("text", "") for o in out.cells[-1].outputs)
    return json.loads(text.split("REPORT", 1)[1])


def test_notebook_02_trains_with_the_parameters_it_is_given(tmp_path, monkeypatch):
    parameters = {"profile": "smoke", "num_images": 40, "image_size": 32, "batch_size": 4,
                  "max_steps": 6, "encoder": "tu-efficientnet_lite0", "lr": 0.005, "num_workers": 1,
                  "precision": "bf16-mixed", "accelerator": "cpu", "max_train_batches": 3,
                  "max_valid_batches": 2}
    report = run_with(NOTEBOOKS / "02_lightning_baseline.ipynb", parameters, REPORT_02,
                      tmp_path, monkeypatch)
    assert report == {
        "image_shape": [4, 3, 32, 32], "num_workers": 1, "images": 40,
        "encoder": "tu-efficientnet_lite0", "lr": 0.005, "schedule_steps": 6,
        "max_steps": 6, "epochs_run": 2, "steps": 6, "precision": "bf16-mixed",
        "accelerator": "CPUAccelerator", "val_batches": 2,
    }


REPORT_06 = """
import json
model = validation.models["random"]
print("REPORT" + json.dumps({
    "photos": len(frame), "scored_shape": list(photos_set.images.shape),
    "checkpoint": synthetic_checkpoint and str(synthetic_checkpoint.path), "starts": list(tables),
    "encoder": model.hparams.encoder, "lr": model.hparams.lr,
    "schedule_steps": model.hparams.max_steps, "steps": sorted(set(validation.runs["steps"])),
    "runs": len(validation.runs), "curve": sorted(int(n) for n in set(curve["photos"])),
    "batch_size": cfg.batch_size, "on_device": photos_set.images.device.type,
    "precision": cfg.precision, "accelerator": cfg.accelerator,
}))
"""


def test_notebook_06_fine_tunes_with_the_parameters_it_is_given(tmp_path, monkeypatch):
    """No checkpoint in the (empty) runs folder: the shipped model is the synthetic start,
    beside the random and the ImageNet ones."""
    parameters = {"profile": "smoke", "standin_images": 20, "image_size": 32, "batch_size": 2,
                  "fine_tune_steps": 3, "encoder": "tu-efficientnet_lite0", "fine_tune_lr": 0.005,
                  "precision": "bf16-mixed", "accelerator": "cpu", "max_train_batches": 2,
                  "max_valid_batches": 1, "checkpoint": "",
                  "folds": 2, "curve_sizes": [6], "curve_folds": 2}
    report = run_with(NOTEBOOKS / "06_your_own_photos.ipynb", parameters, REPORT_06,
                      tmp_path, monkeypatch)
    assert report == {
        "photos": 20, "scored_shape": [20, 3, 32, 32], "checkpoint": str(SHIPPED_MODEL),
        "starts": ["synthetic, no fine-tuning", "random", "imagenet", "synthetic"],
        "encoder": "tu-efficientnet_lite0", "lr": 0.005, "schedule_steps": 3, "steps": [3],
        "runs": 6, "curve": [6, 10], "batch_size": 2, "on_device": "cpu",
        "precision": "bf16-mixed", "accelerator": "cpu",
    }


def test_start_reads_the_profile_fields_a_notebook_sets(tmp_path, monkeypatch):
    """``start(globals())``: the profile's fields it names override (``None`` keeps the
    profile's value); other names, the notebook's own, are not the profile's business."""
    from nailseg_common.course import start
    from nailseg_common.setup.profiles import select_profile

    monkeypatch.setenv("NAILSEG_DATA_DIR", str(tmp_path / "data"))
    namespace = {"profile": "smoke", "data_root": "", "num_images": 24, "image_size": 32, "lr": None,
                 "windows": 3, "torch": object()}
    cfg, data = start(namespace)
    assert (cfg.name, cfg.num_images, cfg.image_size, cfg.lr) == ("smoke", 24, 32, select_profile("smoke").lr)
    assert data.synthetic and len(list((data.raw / "Images").rglob("*.jpg"))) == 24
