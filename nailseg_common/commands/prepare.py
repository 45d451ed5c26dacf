"""``nailseg-prepare`` (``make data``): generate the synthetic set if needed and prepare a
dataset, as notebook 01's ``start`` does; ``--data-root`` (or ``$NAILSEG_DATA_ROOT``) prepares
your own photos instead. Errors end in one line naming the file and the fix (exit 2), Ctrl-C
in one line at any moment, start-up included (exit 130)."""

from __future__ import annotations

import argparse
import sys

from nailseg_common.commands.command_line import (
    SEED,
    check_numbers,
    joined_numbers,
    run_command,
    starting,
)

with starting(__name__):  # Ctrl-C during these imports: one line (see command_line)
    from nailseg_common.data.preparation import STOPPED, ensure_prepared, summary
    from nailseg_common.setup.profiles import add_profile_option, select_profile


NUMBERS = {"--seed": SEED}
"""The numeric option, its rule, and the fix of a value that breaks it."""


def parse_args(argv: list[str]) -> argparse.Namespace:
    """The command line; a ``--seed`` of the wrong kind or sign exits 2 naming it."""
    parser = argparse.ArgumentParser(
        prog="nailseg-prepare",
        description="Generate the synthetic set if needed and prepare a dataset (the CSVs and "
                    "npy files the notebooks read), as notebook 01 does.")
    add_profile_option(parser)
    parser.add_argument("--data-root", default="", help="a real dataset (Images/1..4, "
                        "Masks/1..4, or flat Images/, Masks/); default: $NAILSEG_DATA_ROOT, else "
                        "the synthetic set")
    parser.add_argument("--seed", default=0, help="the split's seed (default 0)")
    args = parser.parse_args(joined_numbers(argv, tuple(NUMBERS)))
    check_numbers(parser, args, NUMBERS)
    return args


def prepare(args: argparse.Namespace) -> int:
    print(summary(ensure_prepared(select_profile(args.profile), args.data_root, seed=args.seed)))
    return 0


def main(argv: list[str] | None = None) -> int:
    """``nailseg-prepare``: the exit status; errors as one line on stderr."""
    args = parse_args(sys.argv[1:] if argv is None else argv)
    return run_command(lambda: prepare(args), STOPPED)


if __name__ == "__main__":
    raise SystemExit(main())
