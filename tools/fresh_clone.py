"""Time a fresh clone's ``make course`` or ``make test`` on this machine and append the run to
``results/fresh_clone_runs.json``, the run log the README's figures come from.

    python -m tools.fresh_clone test     # git clone HEAD, then `bash .ci/run` (what CI runs)
    python -m tools.fresh_clone course   # git clone HEAD, then `make course`

The clone is of the committed HEAD, so a tree with uncommitted changes is refused: the record
names the commit it ran. Each record holds the target and its goal, the commit, when it started
(UTC), its wall seconds and exit status, the machine (``provenance``), pytest's summary line
(``test``) or, read from the executed notebooks (``course``), each notebook's papermill seconds
and what 02, 03 and 04 printed of their hard Dice. ``--note`` says what else a reader should
know (another process beside it, a cold package cache).
"""

from __future__ import annotations

import argparse
import json
import re
import shutil
import subprocess
import tempfile
import time
from datetime import UTC, datetime
from pathlib import Path

from nailseg_common.core.files import write_json
from nailseg_common.setup.environment import provenance
from tools.edition_record import printed

ROOT = Path(__file__).resolve().parents[1]
LOG = ROOT / "results" / "fresh_clone_runs.json"
COMMANDS = {"test": ["bash", ".ci/run"], "course": ["make", "course"]}
GOALS_S = {"test": 8 * 60, "course": 25 * 60}
DICE = re.compile(r"hard Dice [\d.]+ against [\d.]+ \(masks drawn 2 px too large\)[^\n]*")
PYTEST_SUMMARY = re.compile(r"=+ (\d+ (?:passed|failed)[^=]*?) in [\d.]+s")


def head_commit(root: Path) -> str:
    """The committed HEAD's short hash; SystemExit when the tree has uncommitted changes."""
    status = subprocess.run(["git", "status", "--porcelain", "--untracked-files=no"], cwd=root,
                            capture_output=True, text=True, check=True).stdout
    if status.strip():
        raise SystemExit("Uncommitted changes: commit them first (a fresh clone runs the commit).")
    return subprocess.run(["git", "rev-parse", "--short", "HEAD"], cwd=root, capture_output=True,
                          text=True, check=True).stdout.strip()


def course_readings(clone: Path) -> dict:
    """Papermill seconds of every executed notebook, and 02-04's printed hard Dice lines."""
    seconds, dice = {}, {}
    for notebook in sorted((clone / "build" / "notebooks").glob("0*.ipynb")):
        number = notebook.name[:2]
        meta = json.loads(notebook.read_text())["metadata"].get("papermill", {})
        seconds[number] = round(meta["duration"], 1) if meta.get("duration") else None
        if number in ("02", "03", "04"):
            found = DICE.search(printed(notebook))
            dice[number] = found.group(0) if found else None
    return {"papermill_s": seconds, "hard_dice": dice}


def run(target: str, note: str, log: Path = LOG, root: Path = ROOT, keep: Path | None = None) -> dict:
    """Clone ``root``'s HEAD into a temporary folder, time ``target`` there, append the record
    to ``log``; ``keep``: a folder for the executed notebooks of ``course``."""
    commit = head_commit(root)
    with tempfile.TemporaryDirectory(prefix=f"fresh-{target}-") as folder:
        clone = Path(folder) / "clone"
        subprocess.run(["git", "clone", "--quiet", str(root), str(clone)], check=True)
        started = datetime.now(UTC).isoformat(timespec="seconds")
        start = time.perf_counter()
        done = subprocess.run(COMMANDS[target], cwd=clone, capture_output=True, text=True, check=False)
        wall_s = round(time.perf_counter() - start, 1)
        output = done.stdout + done.stderr
        record = {"target": f"make {target}", "goal_s": GOALS_S[target], "commit": commit,
                  "started": started, "wall_s": wall_s, "exit": done.returncode,
                  "met": done.returncode == 0 and wall_s <= GOALS_S[target], "note": note,
                  **{key: value for key, value in provenance().items() if key != "date"}}
        if target == "test":
            summary = PYTEST_SUMMARY.findall(output)
            record["pytest"] = summary[-1] if summary else None
        else:
            record.update(course_readings(clone))
            if keep is not None and (clone / "build" / "notebooks").is_dir():
                shutil.copytree(clone / "build" / "notebooks", keep, dirs_exist_ok=True)
        if done.returncode:
            record["last_lines"] = output.splitlines()[-15:]
    runs = json.loads(log.read_text())["runs"] if log.exists() else []
    write_json(log, {"what": "fresh clones' `make test` and `make course`, timed by tools/fresh_clone.py",
                     "runs": [*runs, record]})
    return record


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m tools.fresh_clone", description=__doc__.split("\n")[0])
    parser.add_argument("target", choices=sorted(COMMANDS))
    parser.add_argument("--note", default="", help="what else a reader of the record should know")
    parser.add_argument("--log", type=Path, default=LOG)
    parser.add_argument("--keep", type=Path, help="course: copy the executed notebooks here")
    args = parser.parse_args(argv)
    record = run(args.target, args.note, args.log, keep=args.keep)
    goal = "met" if record["met"] else "missed"
    print(f"{record['target']} at {record['commit']}: exit {record['exit']}, {record['wall_s']:.0f} s "
          f"(goal {record['goal_s']} s: {goal}); appended to {args.log}")
    return record["exit"]


if __name__ == "__main__":
    raise SystemExit(main())
