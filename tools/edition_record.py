"""Append one execution of notebooks 01-07 (``tools/run_edition.sh``) to results/edition_runs_h100.json.

python -m tools.edition_record FOLDER --commit SHA --note "..."   # FOLDER: the executed notebooks and timings.tsv

Every value is read from the executed notebooks' outputs and papermill's timings; a value a
notebook did not print is an error, not a gap, unless the notebook printed why it has none
(07's run that never reached IoU 0.85: its time and steps are recorded as null).
"""

from __future__ import annotations

import argparse
import json
import re
from pathlib import Path

RESULTS = Path(__file__).resolve().parents[1] / "results" / "edition_runs_h100.json"
EDITION = [f"{number:02d}" for number in range(1, 8)]  # notebooks 01-07
# (key, notebook, pattern with one group): the first match in the notebook's printed outputs
NOT_REACHED_085 = r"never reached IoU 0\.85"  # 07's run ended below the target: no time, no steps
READINGS = [
    ("hard_dice/02 (best checkpoint)", "02", r"validation Dice ([\d.]+), IoU"),
    ("hard_dice/03 (last validation)", "03", r"final hard Dice ([\d.]+)"),
    ("hard_dice/04 (last validation)", "04", r"final hard Dice ([\d.]+)"),
    ("training_over_bound/02", "02", r"images/s: ratio ([\d.]+)"),
    ("training_over_bound/03", "03", r"the training run: ([\d.]+) of the bound"),
    ("training_over_bound/04", "04", r"bound [\d.]+: ([\d.]+) of the bound"),
    ("time_to_iou_085_s", "07", r"IoU 0\.85 after ([\d.]+) s", NOT_REACHED_085),
    ("steps_to_iou_085", "07", r"IoU 0\.85 after [\d.]+ s \((\d+) steps\)", NOT_REACHED_085),
    ("compile_s", "07", r"compilation and autotuning: ([\d.]+) s"),
    ("fastest_step_img_s", "07", r"fastest step (\d+) img/s"),
]


def printed(notebook: Path) -> str:
    """Everything a notebook's code cells printed or displayed as text."""
    cells = json.loads(notebook.read_text())["cells"]
    texts = [o.get("text") or o.get("data", {}).get("text/plain", "")
             for c in cells if c["cell_type"] == "code" for o in c.get("outputs", [])]
    return "\n".join("".join(t) for t in texts)


def record(folder: Path, commit: str, note: str) -> dict:
    seconds, outputs = {}, {}
    for line in (folder / "timings.tsv").read_text().splitlines():
        name, wall, status, _ = line.split("\t")
        if status != "0":
            raise SystemExit(f"{name} exited with {status}: not an edition run")
        seconds[name[:2]], outputs[name[:2]] = float(wall), printed(folder / name)
    if sorted(seconds) != EDITION:
        raise SystemExit(f"timings.tsv has {sorted(seconds)}, an edition is {EDITION}")
    machine = re.search(r"live: (.+?), gpu profile", outputs["05"])  # notebook 05's label of its run
    run = {"note": note, "commit": commit, "device": machine.group(1) if machine else "unknown",
           "papermill_s": seconds, "papermill_s_01_07": round(sum(seconds.values()), 1)}
    for key, number, pattern, *none_when in READINGS:
        found = re.search(pattern, outputs[number])
        if found:
            value = float(found.group(1))
            value = int(value) if value.is_integer() else value
        elif none_when and re.search(none_when[0], outputs[number]):
            value = None
        else:
            raise SystemExit(f"notebook {number} printed nothing that matches {pattern!r}")
        group, _, field = key.rpartition("/")
        (run.setdefault(group, {}) if group else run)[field] = value
    return run


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("folder", type=Path)
    parser.add_argument("--commit", required=True)
    parser.add_argument("--note", required=True)
    args = parser.parse_args()
    results = json.loads(RESULTS.read_text())
    run = record(args.folder, args.commit, args.note)
    results["runs"].append(run)
    RESULTS.write_text(json.dumps(results, indent=1) + "\n")
    print(json.dumps(run, indent=1))


if __name__ == "__main__":
    main()
