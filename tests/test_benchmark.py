"""The timing toolkit and the benchmark on the CPU at a tiny size: well-formed, self-consistent results."""

import ast
import collections
import dataclasses
import json
import math
import statistics
from pathlib import Path

import pytest
import torch
from torch.utils.data import DataLoader, Dataset

from nailseg_common.core.files import write_json
from nailseg_common.core.statistics import ratio_spread
from nailseg_common.measure import benchmark, timing
from nailseg_common.measure.benchmark import Pipeline
from nailseg_common.measure.profiling import cpu_busy_percent
from nailseg_common.setup.paths import DataLocation
from nailseg_common.setup.profiles import select_profile
from nailseg_common.training.unet import LitNailSegmentation

SIZE, BATCH = 32, 4


class RandomPairs(Dataset):
    """Batch-contract items of random pixels (the harness does not care what they show)."""

    def __len__(self):
        return 3 * BATCH

    def __getitem__(self, index):
        g = torch.Generator().manual_seed(index)
        return {"image": torch.randint(0, 256, (3, SIZE, SIZE), dtype=torch.uint8, generator=g),
                "label": torch.randint(0, 2, (1, SIZE, SIZE), dtype=torch.uint8, generator=g)}


def loader():
    return DataLoader(RandomPairs(), batch_size=BATCH, shuffle=True, drop_last=True)


class Invert(torch.nn.Module):
    """A stand-in GPU augmentation with the KorniaAugmentation signature."""

    def forward(self, image, label):
        return 1 - image.float() / 255, label.float()


@pytest.fixture(scope="module")
def profile():
    return dataclasses.replace(select_profile("smoke"), image_size=SIZE, batch_size=BATCH,
                               encoder="tu-efficientnet_lite0", bench_steps=2, bench_repeats=3)


@pytest.fixture(scope="module", autouse=True)
def one_thread():
    """One intra-op thread: two cores shared with other test sessions thrash with more."""
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(threads)


@pytest.fixture(scope="module")
def results(profile):
    pipelines = [Pipeline("albumentations_w0", "albumentations", loader, num_workers=0),
                 Pipeline("kornia", "kornia", loader, make_augmentation=Invert)]
    return benchmark.run_benchmark(profile, pipelines, bound_source=loader, log=lambda line: None)


def test_summarize_median_and_spread_come_from_the_repeats():
    stats = timing.summarize([30.0, 10.0, 20.0, 40.0])
    assert stats["img_s"] == 25.0 and stats["img_s_min"] == 10.0 and stats["img_s_max"] == 40.0
    assert stats["img_s_q1"] == 17.5 and stats["img_s_q3"] == 32.5
    assert stats["repeats"] == [30.0, 10.0, 20.0, 40.0]
    with pytest.raises(ValueError, match="No timing windows"):
        timing.summarize([])


def test_cpu_busy_stays_a_share_when_the_counters_round():
    Times = collections.namedtuple("Times", "user system idle iowait")
    before = Times(8121150.64, 9031442.91, 3170460.94, 7325334.31)
    idle_only = Times(8121150.64, 9031442.91, 3170460.94 + 4.49, 7325334.31 + 0.68)
    assert cpu_busy_percent(before, idle_only) == 0.0  # the difference of sums read -3.6e-08
    assert cpu_busy_percent(before, before._replace(user=before.user + 3)) == 100.0
    half_busy = before._replace(user=before.user + 1, idle=before.idle + 1)
    assert cpu_busy_percent(before, half_busy) == pytest.approx(50.0)
    assert cpu_busy_percent(before, before) == 0.0


def test_window_clock_times_repeats_after_warmup():
    clock = timing.WindowClock(torch.device("cpu"), warmup=2, steps=3, repeats=2)
    for _ in range(2 + 3 * 2 - 1):
        clock.tick(4)
    assert not clock.done
    with pytest.raises(RuntimeError, match="1 of 2 timing windows"):
        clock.result()
    clock.tick(4)
    result = clock.result()
    assert clock.done and len(result["repeats"]) == 2
    assert result["warmup_batches"] == 2 and result["batches_per_repeat"] == 3
    assert result["gpu_util_pct"] is None and 0 <= result["cpu_util_pct"] <= 100


def test_loader_measurement_applies_the_augmentation_on_the_device():
    seen = []

    class Spy(Invert):
        def forward(self, image, label):
            seen.append(image.dtype)
            return super().forward(image, label)

    result = timing.measure_loader(loader(), torch.device("cpu"), warmup=1, steps=2, repeats=3,
                                      augmentation=Spy())
    assert len(seen) == 1 + 2 * 3 and set(seen) == {torch.uint8}  # more batches than one epoch
    assert len(result["repeats"]) == 3 and all(r > 0 for r in result["repeats"])


class BurstyLoader:
    """Four workers' batches as a DataLoader delivers them: all four at once, every 0.2 s."""

    num_workers, prefetch_factor, period = 4, 1, 0.2

    def __iter__(self):
        import time

        for index in range(64):
            if index % self.num_workers == 0:
                time.sleep(self.period)
            yield {"image": torch.zeros(BATCH, 3, 2, 2, dtype=torch.uint8),
                   "label": torch.zeros(BATCH, 1, 2, 2, dtype=torch.uint8)}


def test_loader_windows_span_whole_rounds_of_workers():
    assert [timing.window_steps(BurstyLoader(), steps) for steps in (1, 4, 5)] == [4, 4, 8]
    assert timing.window_steps(loader(), 5) == 5  # no workers: the steps asked for
    # Two batches a window would time half a burst (about 0 s); whole rounds time the rate.
    result = timing.measure_loader(BurstyLoader(), torch.device("cpu"), warmup=1, steps=2, repeats=3)
    rate = BurstyLoader.num_workers * BATCH / BurstyLoader.period
    assert result["batches_per_repeat"] == 4 and result["img_s"] == pytest.approx(rate, rel=0.25)


def test_resident_batches_cycle_copies_of_the_first_batches():
    bound = timing.resident_batches(loader(), torch.device("cpu"), count=2)
    assert len(bound) == len(loader()) == 3 and len(bound.batches) == 2
    first, second, third = list(bound)
    assert torch.equal(first["image"], third["image"]) and not torch.equal(first["image"], second["image"])
    first["image"] = None  # a hook that edits its batch does not change the resident set
    assert next(iter(bound))["image"] is not None


def test_interleaved_rates_take_one_window_of_each_row_in_turn(profile):
    built = []

    def maker(name):
        def make_model(**kwargs):
            built.append(name)
            return LitNailSegmentation(encoder=profile.encoder, encoder_weights=None, max_steps=1)
        return make_model

    batches = timing.resident_batches(loader(), torch.device("cpu"), count=2)
    rates = benchmark.interleaved_rates({"a": (profile, batches, maker("a")), "b": (profile, batches, maker("b"))},
                                        warmup=1, steps=2, windows=3)
    assert built == ["a", "b"] * 3  # round by round, not row by row
    for result in rates.values():
        assert len(result["repeats"]) == 3 and result["img_s_min"] <= result["img_s"] <= result["img_s_max"]
        assert result["batches_per_repeat"] == 2 and result["warmup_batches"] == 1


def test_timing_depends_on_no_pipeline_module():
    """No import cycles: the pipelines and the benchmark use timing, never the other way round."""
    tree = ast.parse(Path(timing.__file__).read_text())
    imported = {node.module for node in ast.walk(tree) if isinstance(node, ast.ImportFrom)}
    imported |= {a.name for node in ast.walk(tree) if isinstance(node, ast.Import) for a in node.names}
    for module in ("benchmark", "gpu_augmentation", "cache", "dali_pipelines", "kornia_pipeline",
                   "dali_pipeline", "albumentations_pipeline", "cached_pipeline", "decoded"):
        assert not any(name and name.endswith(module) for name in imported), module


def test_default_pipelines_name_every_decoding_path(profile, tmp_path):
    """On a CPU: Albumentations, notebook 03's pipeline (decoding on the device), the
    decode-once cache and DALI; on a GPU also 03's steps (CPU decoding, Kornia in the step)
    and DALI without its hardware decoder. Nothing is built until a loader is asked for."""
    from nailseg_common.setup.dali import dali_available

    location = DataLocation(raw=tmp_path / "nowhere", prepared=tmp_path / "prepared", synthetic=False)
    dali = ["dali"] if dali_available() else []
    on_cpu = benchmark.default_pipelines(profile, location)
    assert [p.name for p in on_cpu] == ["albumentations_w0", "kornia", "kornia_cache", *dali]
    families = {p.name: p.family for p in on_cpu}
    assert families["kornia"] == "kornia" and families["kornia_cache"] == "decode_once"
    gpu = dataclasses.replace(profile, accelerator="gpu")
    steps = ["kornia_cpu_decode_sequential", "kornia_cpu_decode"]
    no_hw = ["dali", "dali_no_hw_decoder"] if dali_available() else []
    assert [p.name for p in benchmark.default_pipelines(gpu, location)] == [
        "albumentations_w0", *steps, "kornia", "kornia_cache", *no_hw]
    assert [p.name for p in benchmark.default_pipelines(gpu, location, kornia_steps=False)] == [
        "albumentations_w0", "kornia", "kornia_cache", *no_hw]
    assert not (tmp_path / "prepared").exists()


def test_results_are_well_formed(results, profile):
    assert results["schema"] == benchmark.SCHEMA_VERSION
    for key in ("date", "device", "cpu_count", "versions", "config", "bound", "pipelines", "wall_s"):
        assert results[key] is not None, key
    assert results["cuda"] is None and results["cpu_count"] >= 1
    assert results["versions"]["torch"] == torch.__version__.split("+")[0]
    config = results["config"]
    assert (config["image_size"], config["batch_size"], config["repeats"], config["steps_per_repeat"]) == (
        SIZE, BATCH, 3, 2)
    assert list(results["pipelines"]) == ["albumentations_w0", "kornia"]
    assert results["pipelines"]["kornia"]["num_workers"] == 0  # read from its DataLoader
    bound = results["bound"]
    # two windows before the pipelines, one after them
    assert (len(bound["start"]["repeats"]), len(bound["end"]["repeats"])) == (2, 1)
    assert bound["repeats"] == bound["start"]["repeats"] + bound["end"]["repeats"]
    assert bound["img_s"] == statistics.median(bound["repeats"]) > 0
    assert bound["drift"] == pytest.approx(bound["end"]["img_s"] / bound["start"]["img_s"])
    for entry in results["pipelines"].values():
        for key in ("loader", "train"):
            stats = entry[key]
            assert len(stats["repeats"]) == 3 and all(r > 0 for r in stats["repeats"])
            assert stats["img_s"] == statistics.median(stats["repeats"])
            assert stats["img_s_min"] <= stats["img_s_q1"] <= stats["img_s"] <= stats["img_s_q3"] <= stats["img_s_max"]
            assert stats["gpu_util_pct"] is None and 0 <= stats["cpu_util_pct"] <= 100
        assert entry["loader_img_s"] == entry["loader"]["img_s"] > 0
        assert entry["train_img_s"] == entry["train"]["img_s"] > 0
        assert entry["train_ratio_to_bound"] == pytest.approx(entry["train_img_s"] / bound["img_s"])
        assert entry["setup_s"] >= 0


def test_results_round_trip_through_json(results, tmp_path):
    path = write_json(tmp_path / "sub" / "bench.json", results)
    assert benchmark.load_results(path) == json.loads(json.dumps(results))
    assert benchmark.load_results(tmp_path / "missing.json") is None
    path.write_text(json.dumps({**results, "schema": benchmark.SCHEMA_VERSION - 1}))
    assert benchmark.load_results(path) is None  # other pipelines under the same names
    path.write_text(json.dumps({**results, "schema": benchmark.SCHEMA_VERSION + 1}))
    with pytest.raises(ValueError, match="schema"):
        benchmark.load_results(path)


def test_table_follows_the_numbers(results):
    table = benchmark.summary_table(results)
    assert table.loc["kornia", "ratio to bound"] == results["pipelines"]["kornia"]["train_ratio_to_bound"]
    assert table.loc["kornia", "ratio ±"] == pytest.approx(ratio_spread(
        results["pipelines"]["kornia"]["train"]["repeats"], results["bound"]["repeats"]))
    assert benchmark.best_albumentations(results) == "albumentations_w0"
    assert benchmark.cpu_workers_to_reach_bound(results) is None  # only 0 workers measured
    scaled = json.loads(json.dumps(results))
    scaled["pipelines"]["albumentations_w4"] = {**scaled["pipelines"]["albumentations_w0"], "num_workers": 4,
                                                "loader_img_s": 2 * results["bound"]["img_s"]}
    assert benchmark.cpu_workers_to_reach_bound(scaled) == pytest.approx(2.0)
    assert "about 2 for the bound's rate" in "\n".join(benchmark.lessons(scaled))
    bound = results["bound"]
    assert f"range {bound['img_s_min']:.0f}-{bound['img_s_max']:.0f}" in benchmark.describe_bound(results)


def test_targets_are_derived_from_the_run(results):
    """DALI's claims take their targets from the same run (the ratio in series, the bound's
    images/s) and their spreads from its windows; Kornia and Albumentations are lessons."""
    kornia, bound = results["pipelines"]["kornia"], results["bound"]
    serial = benchmark.serial_ratio(results, "kornia")
    assert serial == pytest.approx(kornia["loader_img_s"] / (kornia["loader_img_s"] + bound["img_s"]))
    assert benchmark.claims(results) == []  # no DALI in this run
    text = benchmark.describe_targets(results)
    assert "dali: not measured" in text and "lesson, kornia" in text and f"{serial:.3f}" in text
    assert "lesson, albumentations_w0" in text and "met" not in text
    with_dali = json.loads(json.dumps(results))
    with_dali["pipelines"]["dali"] = {**with_dali["pipelines"]["kornia"], "family": "dali"}
    hidden, delivers = benchmark.claims(with_dali)
    assert (hidden.value, hidden.target) == (kornia["train_ratio_to_bound"], pytest.approx(serial))
    assert hidden.spread == pytest.approx(ratio_spread(kornia["train"]["repeats"], bound["repeats"]))
    assert (delivers.value, delivers.target) == (kornia["loader_img_s"], bound["img_s"])
    assert 0 < delivers.spread < math.inf


def test_a_pipeline_below_its_work_in_series_is_named(results):
    """Kornia training under the ratio of its own work in series, by more than its spread, is
    a contradiction the lesson explains; at that ratio it is not."""
    below = json.loads(json.dumps(results))
    serial = benchmark.serial_ratio(below, "kornia")
    below["pipelines"]["kornia"]["train_ratio_to_bound"] = serial - benchmark.ratio_to_bound_spread(below, "kornia") - 0.01
    assert "below even its work in series" in "\n".join(benchmark.lessons(below))
    below["pipelines"]["kornia"]["train_ratio_to_bound"] = serial
    assert "below even its work in series" not in "\n".join(benchmark.lessons(below))


def test_the_committed_reference_is_judged_from_its_own_windows():
    committed = benchmark.load_results()
    if committed is None:  # the committed run measured an older schema's pipelines
        pytest.skip("results/benchmark_h200.json predates these pipelines: re-run make bench on a GPU")
    assert len(committed["bound"]["repeats"]) == committed["config"]["repeats"]
    for verdict in benchmark.claims(committed):
        assert 0 < verdict.spread < abs(verdict.margin), verdict  # both claims clear of the noise
        assert verdict.outcome == "met", verdict
    text = benchmark.describe_targets(committed)
    assert "lesson, kornia" in text and "optimistic" in text and "stable" not in text


def test_plots_draw_every_pipeline(results):
    import matplotlib

    matplotlib.use("Agg")
    from nailseg_common.measure import plots

    ax = plots.plot_benchmark_throughput(results)
    bars = [c for c in ax.containers if hasattr(c, "patches")]
    assert [len(c.patches) for c in bars] == [len(results["pipelines"])] * 2
    ax = plots.plot_ratio_to_bound(results)
    bars = next(c for c in ax.containers if hasattr(c, "patches"))
    assert [round(p.get_width(), 6) for p in bars.patches] == [
        round(p["train_ratio_to_bound"], 6) for p in results["pipelines"].values()]
    assert len(ax.collections) >= 1, "the ratio in series marked for kornia"
    labels = [label.get_text() for label in ax.get_yticklabels()]
    assert labels == list(results["pipelines"]), "one row per pipeline, named on its own line"
    ax = plots.plot_worker_scaling(results)
    assert ax.get_lines()[0].get_xdata().tolist() == [0]
