"""The course's measuring tools run on a CPU in the smoke profile (`--profile smoke`): a change to the
code they call shows here, not first on a lent GPU."""

import json

import pytest
import torch

from nailseg_common.data.synthetic import GENERATOR_VERSION
from nailseg_common.setup.paths import REPO_ROOT
from nailseg_common.training.checkpoints import SHIPPED_MODEL, load_weights, read_checkpoint
from nailseg_common.training.unet import LitNailSegmentation
from tools import ship_model, time_to_accuracy_seeds


@pytest.fixture(autouse=True)
def own_folders(tmp_path, monkeypatch):
    monkeypatch.setenv("NAILSEG_DATA_DIR", str(tmp_path / "data"))
    monkeypatch.setenv("NAILSEG_RUNS_DIR", str(tmp_path / "runs"))


def test_ship_model_measures_a_candidate_and_writes_it_in_half_precision(tmp_path):
    out = tmp_path / "shipped"
    ship_model.main([str(SHIPPED_MODEL), "--ship", "0", "--profile", "smoke", "--photos", "10",
                     "--sizes", "64", "--seeds", "1", "--fine-tune-steps", "2",
                     "--timing-steps", "2", "--trained-steps", "3600", "--out", str(out)])
    results = json.loads((out / "shipped_model.json").read_text())
    assert results["candidates"][0]["fine_tuned"][0]["steps"] == 2
    written = out / SHIPPED_MODEL.name
    provenance = json.loads(written.with_suffix(".json").read_text())
    encoder = read_checkpoint(SHIPPED_MODEL).encoder
    assert provenance["encoder"] == encoder and provenance["bytes"] == written.stat().st_size
    assert provenance["synthetic_set"] == {"generator_version": GENERATOR_VERSION, "style": "course",
                                         "images": 48, "generator_seeds": [0]}
    assert provenance["trained_steps"] == 3600  # the weights file does not record them
    saved = torch.load(written, map_location="cpu", weights_only=True)["state_dict"]
    assert all(value.dtype == torch.float16 for value in saved.values() if value.is_floating_point())
    load_weights(LitNailSegmentation(encoder, encoder_weights=None), written)  # back into float32


def test_ship_model_refuses_a_weights_file_without_its_steps_before_measuring(tmp_path):
    with pytest.raises(SystemExit, match="--trained-steps"):
        ship_model.main([str(SHIPPED_MODEL), "--ship", "0", "--profile", "smoke",
                         "--out", str(tmp_path / "shipped")])
    assert not (tmp_path / "shipped").exists()


def seed_run(seed, seconds=None, best_iou=0.86):
    """A run whose history reaches 0.85 at ``seconds`` (never, when None), after a validation
    below it."""
    history = [{"seconds": 1.0, "step": 20, "val_iou": 0.5}]
    if seconds is not None:
        history.append({"seconds": seconds, "step": int(seconds * 20), "val_iou": best_iou})
    return {"seed": seed, "reached": seconds is not None, "seconds_to_target": seconds,
            "steps_to_target": seconds and int(seconds * 20), "best_iou": best_iou, "compile_s": 1.0,
            "history": history}


def test_time_to_accuracy_seeds_appends_each_seed_and_reports_them_all(tmp_path):
    runs, out = tmp_path / "seeds.jsonl", tmp_path / "tta.json"
    time_to_accuracy_seeds.main(["--profile", "smoke", "--seeds", "3", "--runs", str(runs)])
    results = time_to_accuracy_seeds.main(["--profile", "smoke", "--seeds", "1", "--runs", str(runs),
                                           "--report", str(out)])
    assert json.loads(out.read_text()) == results
    assert [run["seed"] for run in results["runs"]] == [1, 3]
    assert all(run["steps"] == 2 and run["compile_s"] > 0 and run["history"] for run in results["runs"])
    assert results["summary"]["seeds"] == 2 and results["step_img_s"]["median"] > 0


def test_time_to_accuracy_summary_counts_a_seed_that_never_reached_as_the_slowest():
    summarise = time_to_accuracy_seeds.summarise
    all_reached = summarise([seed_run(0, 30.0), seed_run(1, 10.0), seed_run(2, 15.0)], 0.85, 20.0)
    assert all_reached["median_seconds_to_target"] == 15.0 and all_reached["met"]
    one_missed = summarise([seed_run(0, 30.0), seed_run(1, 10.0), seed_run(2, best_iou=0.8)], 0.85, 20.0)
    assert one_missed["median_seconds_to_target"] == 30.0 and not one_missed["met"]
    assert one_missed["seconds_to_target"] == {"median": 20.0, "min": 10.0, "max": 30.0}
    most_missed = summarise([seed_run(0, 10.0), seed_run(1), seed_run(2)], 0.85, 20.0)
    assert most_missed["median_seconds_to_target"] is None and most_missed["reached"] == 1


def test_committed_time_to_accuracy_summary_follows_from_its_runs():
    committed = json.loads((REPO_ROOT / "results/time_to_accuracy_h200.json").read_text())
    summary = committed["summary"]
    assert summary == time_to_accuracy_seeds.summarise(committed["runs"], summary["target_iou"],
                                                       summary["target_s"])
    assert {"seed", "reached", "seconds_to_target", "steps_to_target", "best_iou",
            "compile_s"} <= set(committed["runs"][0])


def git(*args, cwd):
    import subprocess

    subprocess.run(["git", "-c", "user.name=t", "-c", "user.email=t@t", *args], cwd=cwd, check=True,
                   capture_output=True)


def test_fresh_clone_times_the_commit_and_appends_its_record(tmp_path):
    from tools import fresh_clone

    repo, log = tmp_path / "repo", tmp_path / "runs.json"
    (repo / ".ci").mkdir(parents=True)
    (repo / ".ci" / "run").write_text("echo '==== 5 passed, 1 skipped in 2.50s ===='\n")
    git("init", "--quiet", cwd=repo)
    git("add", ".", cwd=repo)
    git("commit", "--quiet", "-m", "one", cwd=repo)
    first = fresh_clone.run("test", "a note", log, root=repo)
    fresh_clone.run("test", "", log, root=repo)
    runs = json.loads(log.read_text())["runs"]
    assert len(runs) == 2 and runs[0] == first
    assert (first["target"], first["exit"], first["met"], first["pytest"]) == ("make test", 0, True, "5 passed, 1 skipped")
    assert first["commit"] and first["goal_s"] == 480 and first["note"] == "a note" and "device" in first
    (repo / ".ci" / "run").write_text("exit 3\n")  # uncommitted: the record would name the wrong commit
    with pytest.raises(SystemExit, match="Uncommitted"):
        fresh_clone.run("test", "", log, root=repo)
