"""How well synthetic-pretrained models transfer to a style no course model trained on.

    python -m lab.transfer_held_out_style.transfer_held_out_style --profile gpu \
        --model before=OLD/unet-mobilenet_v2.pt --model after=nailseg_common/pretrained/unet-mobilenet_v2.pt \
        --out lab/transfer_held_out_style/transfer_held_out_style_h100.json

The held-out style is the generator's ``"salon"`` (nail-salon close-ups on a terry towel
under a ring light, neon polish and marble nail art: ingredients the training style never
draws; see nailseg_common.data.synthetic). For each ``--model NAME=PATH`` (a weights file as the
course ships it, or a Lightning checkpoint of notebook 02 or 04): the zero-shot hard Dice
on every photo of the held-out set at the profile's fine-tuning size, and the hard Dice
after notebook 06's cross-validated fine-tuning from it (``--folds`` folds, the profile's
steps and learning rate; every photo held out once), with what the provenance file beside
a shipped model says of its training; the random start of the first
model's encoder for reference; and each model against the first on the same photos,
paired. ``--profile smoke`` checks the code path in seconds.
"""

from __future__ import annotations

import argparse
import json
import time
from pathlib import Path

from lab.transfer_held_out_style.helpers import gain_of, summary
from nailseg_common.data.synthetic import ensure_synthetic_dataset
from nailseg_common.setup.course import start
from nailseg_common.setup.environment import device_description, library_versions
from nailseg_common.setup.files import write_json
from nailseg_common.setup.paths import data_dir
from nailseg_common.setup.profiles import select_profile
from nailseg_common.training.finetune import (
    cross_validate,
    k_folds,
    photos_on_device,
    predict_logits,
    score_photos,
    start_model,
)
from nailseg_common.training.run_logs import checkpoint_hparams

HERE = Path(__file__).parent  # where this question's results are kept



HELD_OUT_STYLE = "salon"


def named_models(pairs: list[str]) -> dict[str, Path]:
    """``NAME=PATH`` arguments as ``{name: path}``; a missing file or a malformed pair exits."""
    models = {}
    for pair in pairs:
        name, _, path = pair.partition("=")
        if not name or not path or not Path(path).is_file():
            raise SystemExit(f"--model {pair!r}: give NAME=PATH of an existing weights file")
        models[name] = Path(path)
    return models


def provenance(path: Path) -> dict:
    """What the provenance file beside a shipped model says of its training (empty without one)."""
    beside = path.with_suffix(".json")
    if path.suffix != ".pt" or not beside.is_file():
        return {}
    about = json.loads(beside.read_text())
    return {key: about[key] for key in ("commit", "date", "trained_by", "trained_steps",
                                        "synthetic_valid") if key in about}


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(prog="python -m lab.transfer_held_out_style.transfer_held_out_style",
                                     description=__doc__.splitlines()[0])
    parser.add_argument("--profile", default="")
    parser.add_argument("--model", action="append", required=True, help="NAME=PATH, repeatable")
    parser.add_argument("--photos", type=int, default=60, help="photos of the held-out style")
    parser.add_argument("--folds", type=int, default=5)
    parser.add_argument("--out", type=Path, default=HERE / "transfer_held_out_style_local.json",
                        help="the JSON report (default: in this folder)")
    args = parser.parse_args(argv)
    models = named_models(args.model)
    root = ensure_synthetic_dataset(data_dir() / f"{HELD_OUT_STYLE}-{args.photos}", args.photos,
                                    style=HELD_OUT_STYLE)
    side = select_profile(args.profile).finetune_image_size
    cfg, data = start(args.profile, root, image_size=side)
    frame, on_device = photos_on_device(data, cfg)
    folds = k_folds(len(frame), args.folds)
    began = time.perf_counter()
    encoders = {name: checkpoint_hparams(path)["encoder"] for name, path in models.items()}

    def starts_from(name: str):
        return lambda start_name: start_model(start_name, encoders[name], cfg.finetune_lr,
                                              cfg.finetune_steps, models[name])

    zero_shot, fine_tuned = {}, {}
    for name in models:
        model = starts_from(name)("synthetic")
        zero_shot[name] = score_photos(predict_logits(model, on_device.images, flips=False),
                                       on_device.labels, frame)["dice"]
        fine_tuned[name] = cross_validate(starts_from(name), ["synthetic"], frame, on_device,
                                          folds, cfg).tables["synthetic"]["dice"]
    first = next(iter(models))
    random = cross_validate(starts_from(first), ["random"], frame, on_device, folds,
                            cfg).tables["random"]["dice"]
    report = {
        "what": " ".join(__doc__.split("\n\n")[2].split()),
        "device": device_description(), "versions": library_versions(),
        "date": time.strftime("%Y-%m-%d"), "profile": cfg.name, "style": HELD_OUT_STYLE,
        "photos": len(frame), "image_size": cfg.image_size, "steps": cfg.finetune_steps,
        "batch": cfg.batch_size, "lr": cfg.finetune_lr, "folds": args.folds,
        "keep_statistics": cfg.finetune_keep_statistics,
        "models": {name: {"path": str(path), "encoder": encoders[name], **provenance(path),
                          "zero_shot": summary(zero_shot[name]),
                          "fine_tuned": summary(fine_tuned[name])}
                   for name, path in models.items()},
        "random_start": {"encoder": encoders[first], "fine_tuned": summary(random)},
        f"minus_{first}": {name: {"zero_shot": gain_of(zero_shot[name], zero_shot[first]),
                                  "fine_tuned": gain_of(fine_tuned[name], fine_tuned[first])}
                           for name in models if name != first},
        "seconds": round(time.perf_counter() - began, 1),
    }
    write_json(args.out, report)
    print(json.dumps(report, indent=1))


if __name__ == "__main__":
    main()
