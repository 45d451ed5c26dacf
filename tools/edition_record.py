"""Append one execution of notebooks 01-07 (``tools/run_edition.sh``) to results/edition_runs.json.

python -m tools.edition_record FOLDER --commit SHA --note "..." [--repeat FOLDER2]

FOLDER holds the executed notebooks and papermill's timings.tsv; FOLDER2, a second run of
notebooks 02-04 on the same machine right after, to show that their targets hold. Every value
is read from the executed notebooks' outputs and papermill's timings; a value a notebook did
not print is an error, not a gap, unless the notebook printed why it has none (07's run that
did not reach its level: its time and steps are recorded as null).
"""

from __future__ import annotations

import argparse
import json
import re
from pathlib import Path

RESULTS = Path(__file__).resolve().parents[1] / "results" / "edition_runs.json"
EDITION = [f"{number:02d}" for number in range(1, 8)]  # notebooks 01-07
REPEATED = ["02", "03", "04"]
NOT_REACHED = r"IoU [\d.]+ not reached"  # 07's run ended below its level: no time, no steps
LEVEL = r"hard Dice [\d.]+ against [\d.]+ \(masks drawn 2 px too large\)"
# (key, notebook, pattern with one group): the first match in the notebook's printed outputs
READINGS = [
    ("hard_dice/02 (best checkpoint)", "02", r"hard Dice ([\d.]+) against"),
    ("hard_dice/03 (last validation)", "03", r"hard Dice ([\d.]+) against"),
    ("hard_dice/04 (last validation)", "04", r"hard Dice ([\d.]+) against"),
    ("accuracy_target/02 (masks 2 px too large)", "02", r"hard Dice [\d.]+ against ([\d.]+)"),
    ("accuracy_target/03 (masks 2 px too large)", "03", r"hard Dice [\d.]+ against ([\d.]+)"),
    ("accuracy_target/04 (masks 2 px too large)", "04", r"hard Dice [\d.]+ against ([\d.]+)"),
    ("accuracy_verdict/02", "02", LEVEL + r": (met|missed|within noise)"),
    ("accuracy_verdict/03", "03", LEVEL + r": (met|missed|within noise)"),
    ("accuracy_verdict/04", "04", LEVEL + r": (met|missed|within noise)"),
    ("training_over_bound/02", "02", r"ratio ([\d.]+) ± "),
    ("training_over_bound/03", "03", r"the training run: ([\d.]+) ± [\d.inf]+ of the bound"),
    ("training_over_bound/04", "04", r"ratio ([\d.]+) ± "),
    ("iou_level", "07", r"the level: IoU ([\d.]+), the highest"),
    ("time_to_level_s", "07", r"IoU [\d.]+ after ([\d.]+) s", NOT_REACHED),
    ("steps_to_level", "07", r"IoU [\d.]+ after [\d.]+ s \((\d+) steps\)", NOT_REACHED),
    ("compile_s", "07", r"compilation and autotuning: ([\d.]+) s"),
]


def printed(notebook: Path) -> str:
    """Everything a notebook's code cells printed or displayed as text."""
    cells = json.loads(notebook.read_text())["cells"]
    texts = [o.get("text") or o.get("data", {}).get("text/plain", "")
             for c in cells if c["cell_type"] == "code" for o in c.get("outputs", [])]
    return "\n".join("".join(t) for t in texts)


def executed(folder: Path, numbers: list[str]) -> tuple[dict, dict]:
    """Papermill seconds and printed text of each notebook of ``folder`` (its timings.tsv),
    which must be exactly ``numbers``, every one exited 0."""
    seconds, outputs = {}, {}
    for line in (folder / "timings.tsv").read_text().splitlines():
        name, wall, status, _ = line.split("\t")
        if status != "0":
            raise SystemExit(f"{name} exited with {status}: not an edition run")
        seconds[name[:2]], outputs[name[:2]] = float(wall), printed(folder / name)
    if sorted(seconds) != numbers:
        raise SystemExit(f"{folder}/timings.tsv has {sorted(seconds)}, not {numbers}")
    return seconds, outputs


def readings(outputs: dict) -> dict:
    """The values of :data:`READINGS` of the notebooks in ``outputs``, grouped by key."""
    found_values: dict = {}
    for key, number, pattern, *none_when in READINGS:
        if number not in outputs:
            continue
        found = re.search(pattern, outputs[number])
        if found:
            value = found.group(1)
            if re.fullmatch(r"[\d.]+", value):
                value = float(value)
                value = int(value) if value.is_integer() else value
        elif none_when and re.search(none_when[0], outputs[number]):
            value = None
        else:
            raise SystemExit(f"notebook {number} printed nothing that matches {pattern!r}")
        group, _, field = key.rpartition("/")
        (found_values.setdefault(group, {}) if group else found_values)[field] = value
    return found_values


def record(folder: Path, commit: str, note: str, repeat: Path | None = None) -> dict:
    """One edition: 01-07 from ``folder``, and the repeat of 02-04 from ``repeat``."""
    seconds, outputs = executed(folder, EDITION)
    machine = re.search(r"live: (.+?), gpu profile", outputs["05"])  # notebook 05's label of its run
    run = {"note": note, "commit": commit, "device": machine.group(1) if machine else "unknown",
           "papermill_s": seconds, "papermill_s_01_07": round(sum(seconds.values()), 1),
           **readings(outputs)}
    if repeat is not None:
        again, again_outputs = executed(repeat, REPEATED)
        run["repeat_02_04"] = {"papermill_s": again, **readings(again_outputs)}
    return run


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("folder", type=Path)
    parser.add_argument("--commit", required=True)
    parser.add_argument("--note", required=True)
    parser.add_argument("--repeat", type=Path, help="a second run of notebooks 02-04")
    args = parser.parse_args()
    results = json.loads(RESULTS.read_text())
    run = record(args.folder, args.commit, args.note, args.repeat)
    results["runs"].append(run)
    RESULTS.write_text(json.dumps(results, indent=1) + "\n")
    print(json.dumps(run, indent=1))


if __name__ == "__main__":
    main()
