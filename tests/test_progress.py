"""Progress bars leave a few lines in a notebook, none at 0 %, and one for a short loop."""

import time

from nailseg_common.setup import progress


def test_a_short_loop_leaves_one_line_and_a_long_one_no_zero_line(capsys, monkeypatch):
    monkeypatch.setattr(progress, "REFRESH_SECONDS", 0.2)
    assert list(progress.progress(range(3), "short")) == [0, 1, 2]
    out = capsys.readouterr().out
    assert out.count("short:") == 1 and "100%" in out and "3/3" in out and out.endswith("\n")
    for _ in progress.progress(range(6), "long"):
        time.sleep(0.1)
    out = capsys.readouterr().out
    assert "100%" in out and " 0%" not in out and 1 <= out.count("long:") <= 4


def test_a_loop_that_stops_at_its_last_item_ends_at_100_percent(capsys, monkeypatch):
    monkeypatch.setattr(progress, "REFRESH_SECONDS", 0.0)
    for _item, _ in zip(range(4), progress.progress(range(4), "zipped")):
        pass
    assert "4/4" in capsys.readouterr().out
