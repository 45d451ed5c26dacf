"""The course's training command, ``nailseg-train --help``, and
:func:`launch_training`, which runs it from a notebook as a terminal would.

Notebook 08 teaches the code (:mod:`nailseg_common.training.multi_gpu`; its options are
:mod:`nailseg_common.training.arguments`); Lightning's DDP launcher re-runs this same command
once per further device. :func:`launch_training` runs it with the notebook's Python, the
repository as the working folder and on ``PYTHONPATH``, the output captured; a failed run
raises with the end of its output, where the reason is.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path

from nailseg_common.setup.paths import REPO_ROOT
from nailseg_common.training.multi_gpu import main


def launch_training(out: Path, *options: str) -> dict:
    """Run the command with ``options`` and ``--out out``; rank 0's results (the JSON file)."""
    out.unlink(missing_ok=True)
    command = [sys.executable, "-m", "nailseg_common.commands.train", *options, "--out", str(out)]
    env = {**os.environ, "NO_ALBUMENTATIONS_UPDATE": "1",
           "PYTHONPATH": os.pathsep.join(filter(None, [str(REPO_ROOT), os.environ.get("PYTHONPATH")]))}
    started = time.perf_counter()
    done = subprocess.run(command, cwd=REPO_ROOT, env=env, stdout=subprocess.PIPE,
                          stderr=subprocess.STDOUT, text=True, check=False)
    if done.returncode != 0 or not out.exists():
        tail = "\n".join(done.stdout.splitlines()[-40:])
        raise RuntimeError(f"{' '.join(command[1:])}\nfailed (exit {done.returncode}); the end "
                           f"of its output:\n{tail}")
    summary = [line for line in done.stdout.splitlines() if "device(s):" in line or "coverage" in line]
    print(f"[{out.stem}, {time.perf_counter() - started:.0f} s with start-up] " + "\n  ".join(summary))
    return json.loads(out.read_text())


if __name__ == "__main__":
    main()
