"""``nailseg-train`` past one machine, as a cluster starts it: two "nodes" of one CPU process
each, started by torchrun on loopback (gloo), train whole epochs of the smoke set, and the
command's own record of the samples shows every epoch covering each training image once
across them; options that disagree with what torchrun or SLURM started are refused."""

import json
import os
import signal
import socket
import subprocess
import sys
from pathlib import Path

import pytest
from pytorch_lightning.strategies import DDPStrategy

from nailseg_common.commands.train import parse_args
from nailseg_common.data.preparation import ensure_prepared, read_split
from nailseg_common.setup.paths import REPO_ROOT
from nailseg_common.setup.profiles import select_profile
from nailseg_common.training.multi_gpu import device_options

EPOCHS, BATCH = 3, 5
"""Whole epochs to train, and the batch: 40 training images, 20 a node, 4 steps an epoch."""


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


def node(rank: int, port: int, out, env: dict) -> subprocess.Popen:
    """torchrun on node ``rank`` of 2, one process, running ``nailseg-train`` on the CPU."""
    command = [sys.executable, "-m", "torch.distributed.run", "--nnodes", "2",
               "--nproc-per-node", "1", "--node-rank", str(rank), "--master-addr", "127.0.0.1",
               "--master-port", str(port), "-m", "nailseg_common.commands.train",
               "--profile", "smoke", "--accelerator", "cpu", "--num-nodes", "2", "--devices", "1",
               "--image-size", "32", "--batch-size", str(BATCH), "--max-steps",
               str(EPOCHS * 4), "--val-every-n-epochs", str(EPOCHS + 1), "--no-compile",
               "--record-samples", "--out", str(out)]
    return subprocess.Popen(command, cwd=REPO_ROOT, env=env, stdout=subprocess.PIPE,
                            stderr=subprocess.STDOUT, text=True, start_new_session=True)


def test_two_nodes_train_each_image_once_an_epoch(prepared, tmp_path):
    """Every epoch, each node's record of its samples holds half the training set, each image
    once, and the other node's the other half; rank 0's coverage check says so too."""
    env = {name: value for name, value in os.environ.items() if not name.startswith("SLURM_")}
    env |= {"NAILSEG_DATA_DIR": str(prepared / "data"), "NAILSEG_RUNS_DIR": str(tmp_path),
            "NO_ALBUMENTATIONS_UPDATE": "1", "OMP_NUM_THREADS": "1",
            "PYTHONPATH": os.pathsep.join(filter(None, [str(REPO_ROOT), env.get("PYTHONPATH")]))}
    out, port = tmp_path / "result.json", free_port()
    nodes = [node(rank, port, out, env) for rank in (0, 1)]
    try:
        logs = [process.communicate(timeout=180)[0] for process in nodes]
    finally:
        for process in nodes:
            if process.poll() is None:
                os.killpg(process.pid, signal.SIGKILL)
    assert [process.returncode for process in nodes] == [0, 0], "\n".join(
        log[-3000:] for log in logs)
    result = json.loads(out.read_text())
    assert (result["world_size"], result["config"]["num_nodes"]) == (2, 2)
    with pytest.MonkeyPatch.context() as patch:
        patch.setenv("NAILSEG_DATA_DIR", str(prepared / "data"))
        location = ensure_prepared(select_profile("smoke"), progress=False)
    names = {Path(image).stem for image in read_split(location, "train")["image"]}
    ledgers = [json.loads((tmp_path / "smoke" / "ddp_2x1" / "samples" / f"rank{rank}.json")
                          .read_text()) for rank in (0, 1)]
    epochs = [str(epoch) for epoch in range(EPOCHS)]
    assert [sorted(ledger, key=int) for ledger in ledgers] == [epochs, epochs]
    for epoch in epochs:
        first, second = (ledger[epoch] for ledger in ledgers)
        assert len(first) == len(second) == len(names) // 2 == len(set(first)) == len(set(second))
        assert set(first) | set(second) == names
    assert [(row["epoch"], row["ok"], row["missing"], row["duplicates"])
            for row in result["coverage"]] == [(epoch, True, 0, []) for epoch in range(EPOCHS)]


TORCHRUN = {"TORCHELASTIC_RUN_ID": "none", "RANK": "0", "GROUP_RANK": "0", "LOCAL_RANK": "0",
            "LOCAL_WORLD_SIZE": "2"}
SLURM = {"SLURM_NTASKS": "4", "SLURM_JOB_NAME": "train", "SLURM_NNODES": "2",
         "SLURM_NTASKS_PER_NODE": "2"}


def launched_by(monkeypatch, variables: dict) -> None:
    for name in [name for name in os.environ if name.startswith("SLURM_")]:
        monkeypatch.delenv(name)
    for name, value in variables.items():
        monkeypatch.setenv(name, value)


@pytest.mark.parametrize(("variables", "message"), [
    (TORCHRUN | {"WORLD_SIZE": "4"}, ("torchrun started 4 process(es) in all, but --num-nodes "
                                      "2 × --devices 1 is 2: pass torchrun's --nnodes as "
                                      "--num-nodes")),
    (SLURM, ("SLURM gave 2 node(s) of 2 task(s), but this is --num-nodes 2 --devices 1: pass "
             "--num-nodes 2 --devices 2")),
], ids=["torchrun", "slurm"])
def test_options_that_disagree_with_the_launcher_are_refused(capsys, monkeypatch, variables,
                                                             message):
    launched_by(monkeypatch, variables)
    with pytest.raises(SystemExit) as exit_info:
        parse_args(["--profile", "smoke", "--num-nodes", "2", "--devices", "1"])
    assert exit_info.value.code == 2 and message in capsys.readouterr().err


def test_one_device_on_each_of_two_nodes_is_ddp_on_both(monkeypatch):
    launched_by(monkeypatch, TORCHRUN | {"WORLD_SIZE": "2", "LOCAL_WORLD_SIZE": "1"})
    args, _ = parse_args(["--profile", "smoke", "--num-nodes", "2", "--devices", "1"])
    options = device_options(args)
    assert (options["devices"], options["num_nodes"], args.run_name) == (1, 2, "ddp_2x1")
    assert isinstance(options["strategy"], DDPStrategy)
