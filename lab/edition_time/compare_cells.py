"""Two editions of notebooks 01-07, cell by cell: papermill's seconds of each code cell, read
from ``published/`` at two commits (``git show``), matched by the cell's first line.

    python -m lab.edition_time.compare_cells OLD_COMMIT NEW_COMMIT [OUT.json]

Prints every cell that took 5 s or more in either edition, each notebook's total, and
writes the same as JSON when OUT.json is given.
"""

from __future__ import annotations

import json
import subprocess
import sys

NOTEBOOKS = ["01_data_preparation", "02_lightning_baseline", "03_kornia_gpu_augmentation",
             "04_dali_pipeline", "05_benchmark_comparison", "06_your_own_photos",
             "07_time_to_accuracy"]


def cell_seconds(commit: str, name: str) -> tuple[dict[str, float], float]:
    """``{"first line #n": seconds}`` of every code cell (n: the nth cell with that first line)
    and papermill's duration of the notebook."""
    text = subprocess.run(["git", "show", f"{commit}:published/{name}.ipynb"], check=True,
                          capture_output=True, text=True).stdout
    notebook = json.loads(text)
    cells: dict[str, float] = {}
    for cell in notebook["cells"]:
        if cell["cell_type"] != "code":
            continue
        lines = "".join(cell["source"]).strip().splitlines()
        first = lines[0][:60] if lines else ""
        nth = sum(key.rsplit(" #", 1)[0] == first for key in cells) + 1  # cells alike, in order
        cells[f"{first} #{nth}"] = cell.get("metadata", {}).get("papermill", {}).get("duration") or 0.0
    return cells, notebook["metadata"]["papermill"]["duration"]


def compare(old: str, new: str) -> dict:
    report = {"old": old, "new": new, "notebooks": {}}
    for name in NOTEBOOKS:
        (old_cells, old_total), (new_cells, new_total) = cell_seconds(old, name), cell_seconds(new, name)
        rows = [{"cell": key, "old_s": round(old_cells.get(key, 0.0), 1), "new_s": round(seconds, 1)}
                for key, seconds in new_cells.items()]
        report["notebooks"][name] = {
            "old_s": round(old_total, 1), "new_s": round(new_total, 1),
            "cells": [row for row in rows if max(row["old_s"], row["new_s"]) >= 5.0]}
    return report


def main() -> None:
    report = compare(sys.argv[1], sys.argv[2])
    for name, part in report["notebooks"].items():
        print(f"{name}: {part['old_s']} s -> {part['new_s']} s")
        for row in part["cells"]:
            print(f"  {row['old_s']:6.1f} -> {row['new_s']:6.1f}  {row['cell']}")
    if len(sys.argv) > 3:
        with open(sys.argv[3], "w") as out:
            json.dump(report, out, indent=1)
            out.write("\n")


if __name__ == "__main__":
    main()
