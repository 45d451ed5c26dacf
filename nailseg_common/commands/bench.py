"""``nailseg-bench`` (``make bench``): notebook 05's benchmark from the command line, every
input pipeline against the bound in one run (:mod:`nailseg_common.measure.benchmark`), written
as JSON with the device, versions and date; meant for a GPU. The file it replaces is named.
Errors end in one line naming the file and the fix (exit 2), Ctrl-C in one line (exit 130)."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from nailseg_common.commands.command_line import (
    at_least,
    check_numbers,
    create_out,
    joined_numbers,
    run_command,
    starting,
)

with starting(__name__):  # Ctrl-C during these imports: one line (see command_line)
    from nailseg_common.core.files import write_json
    from nailseg_common.data.preparation import ensure_prepared
    from nailseg_common.measure.benchmark import (
        default_pipelines,
        describe_targets,
        run_benchmark,
        summary_table,
        worker_counts,
    )
    from nailseg_common.setup.environment import device_description
    from nailseg_common.setup.paths import REPO_ROOT, shown
    from nailseg_common.setup.profiles import (
        add_profile_option,
        select_profile,
        set_matmul_precision,
    )

STOPPED = "nothing was written (the results file is written once every pipeline is measured)."
NUMBERS = {"--steps": at_least(1, "give at least 1 batch a window."),
           "--repeats": at_least(2, "give at least 2 windows: one window has no spread.")}
"""The numeric options, their rules, and the fix of a value that breaks one."""


def parse_args(argv: list[str]) -> argparse.Namespace:
    """The command line; a number of the wrong kind or size exits 2 naming it."""
    parser = argparse.ArgumentParser(
        prog="nailseg-bench",
        description="Notebook 05's benchmark: every input pipeline against the bound, written as JSON.")
    add_profile_option(parser)
    parser.add_argument("--out", default=None, help="the JSON file (default: results/benchmark_<profile>.json)")
    parser.add_argument("--data-root", default="", help="a real dataset (Images/1..4, Masks/1..4); "
                        "default: the synthetic set")
    parser.add_argument("--workers", type=int, nargs="+", default=None,
                        help="Albumentations worker counts (default: the profile's)")
    parser.add_argument("--steps", default=None, help="batches a timing window (default: the profile's)")
    parser.add_argument("--repeats", default=None, help="timing windows (default: the profile's)")
    args = parser.parse_args(joined_numbers(argv, tuple(NUMBERS)))
    check_numbers(parser, args, NUMBERS)
    return args


def bench(args: argparse.Namespace) -> int:
    profile = select_profile(args.profile)
    out = Path(args.out or REPO_ROOT / "results" / f"benchmark_{profile.name}.json").resolve()
    create_out(out.parent, shown(out.parent), "pass an --out file in a folder you can write.")
    set_matmul_precision(profile)
    location = ensure_prepared(profile, args.data_root or None)
    pipelines = default_pipelines(profile, location, args.workers or worker_counts(profile))
    print(f"benchmark: {profile.name} profile, {device_description()}, pipelines {[p.name for p in pipelines]}")
    results = run_benchmark(profile, pipelines, steps=args.steps, repeats=args.repeats,
                            config={"data": location.raw.name, "synthetic": location.synthetic})
    replaced = out.exists()
    write_json(out, results)
    print(summary_table(results).to_string(float_format=lambda x: f"{x:.3g}"))
    print(describe_targets(results))
    print(f"wrote {shown(out)}{' (replacing an earlier run)' if replaced else ''} in {results['wall_s']:.0f} s")
    return 0


def main(argv: list[str] | None = None) -> int:
    """``nailseg-bench``: the exit status; errors as one line on stderr."""
    args = parse_args(sys.argv[1:] if argv is None else argv)
    return run_command(lambda: bench(args), STOPPED)


if __name__ == "__main__":
    raise SystemExit(main())
