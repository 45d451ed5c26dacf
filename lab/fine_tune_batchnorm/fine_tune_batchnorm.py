"""Notebook 06's fine-tuning with its BatchNorm statistics kept, and with them relearned.

    python -m lab.fine_tune_batchnorm.fine_tune_batchnorm --profile cpu --out lab/fine_tune_batchnorm/fine_tune_batchnorm_cpu.json

Cross-validates the synthetic start on your photos (``--data-root``) or notebook 06's
stand-in exactly as the notebook does (its profile's image size, steps, learning rate;
``--folds`` folds), twice: with the profile's ``finetune_keep_statistics`` on
(``KeepLearnedStatistics`` keeps every trained BatchNorm layer in eval mode) and off (each step normalises with its batch and moves the
running statistics). Writes each way's mean hard Dice ± standard error over every photo
(each held out once), the checkpoint as it is (zero-shot), and the paired difference.
``--profile smoke`` checks the code path in seconds.
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import time
from pathlib import Path

from lab.fine_tune_batchnorm.helpers import gain_of, summary
from nailseg_common.data.synthetic import photos_or_standin
from nailseg_common.setup.course import start
from nailseg_common.setup.environment import device_description, library_versions
from nailseg_common.setup.files import write_json
from nailseg_common.setup.profiles import select_profile
from nailseg_common.training.finetune import (
    cross_validate,
    k_folds,
    photos_on_device,
    predict_logits,
    score_photos,
    start_model,
)
from nailseg_common.training.run_logs import checkpoint_hparams, resolve_checkpoint

HERE = Path(__file__).parent  # where this question's results are kept



KEPT, RELEARNED = "kept", "relearned"  # the BatchNorm statistics


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(prog="python -m lab.fine_tune_batchnorm.fine_tune_batchnorm",
                                     description=__doc__.splitlines()[0])
    parser.add_argument("--profile", default="")
    parser.add_argument("--data-root", default="", help="your photos, laid out as notebook 06 "
                        "takes them; empty: $NAILSEG_DATA_ROOT, else its stand-in")
    parser.add_argument("--folds", type=int, default=5)
    parser.add_argument("--checkpoint", default="", help="empty: the one notebook 06 takes")
    parser.add_argument("--out", type=Path, default=HERE / "fine_tune_batchnorm_local.json",
                        help="the JSON report (default: in this folder)")
    args = parser.parse_args(argv)
    photos = photos_or_standin(args.profile, args.data_root)
    side = select_profile(args.profile).finetune_image_size
    cfg, data = start(args.profile, photos, image_size=side)
    checkpoint = resolve_checkpoint(args.checkpoint, cfg)
    encoder = checkpoint_hparams(checkpoint)["encoder"]
    frame, on_device = photos_on_device(data, cfg)
    folds = k_folds(len(frame), args.folds)

    def make_start(name: str):
        return start_model(name, encoder, cfg.finetune_lr, cfg.finetune_steps, checkpoint)

    began = time.perf_counter()
    tables = {way: cross_validate(make_start, ["synthetic"], frame, on_device, folds,
                                  dataclasses.replace(cfg, finetune_keep_statistics=keep)
                                  ).tables["synthetic"]
              for way, keep in ((KEPT, True), (RELEARNED, False))}
    zero_shot = score_photos(predict_logits(make_start("synthetic"), on_device.images, flips=False),
                             on_device.labels, frame)
    report = {
        "what": __doc__.split("\n\n")[2].replace("\n", " "),
        "device": device_description(), "versions": library_versions(),
        "date": time.strftime("%Y-%m-%d"), "profile": cfg.name, "checkpoint": checkpoint.name,
        "encoder": encoder, "image_size": cfg.image_size, "steps": cfg.finetune_steps,
        "batch": cfg.batch_size, "lr": cfg.finetune_lr, "folds": args.folds,
        "zero_shot": summary(zero_shot["dice"]),
        **{way: summary(table["dice"]) for way, table in tables.items()},
        "kept_minus_relearned": gain_of(tables[KEPT]["dice"], tables[RELEARNED]["dice"]),
        "seconds": round(time.perf_counter() - began, 1),
    }
    write_json(args.out, report)
    print(json.dumps(report, indent=1))


if __name__ == "__main__":
    main()
