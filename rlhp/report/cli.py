"""The ``rlhp-report`` command."""

from __future__ import annotations

import argparse
import sys

from rlhp.errors import RlhpError
from rlhp.report.writer import write_report


def main(argv: list[str] | None = None) -> int:
    """``rlhp-report <run or sweep folder>``: write report.md and PNG plots into the folder."""
    parser = argparse.ArgumentParser(prog="rlhp-report", description=__doc__ and main.__doc__)
    parser.add_argument("folder", help="a run folder (outputs/train/...) or a sweep folder (multirun/train/...)")
    args = parser.parse_args(argv)
    try:
        report = write_report(args.folder)
    except FileNotFoundError as err:
        print(f"rlhp-report: data error: {err}", file=sys.stderr)
        return 3
    except RlhpError as err:  # a run's file that cannot be read, named
        print(f"rlhp-report: {err.kind}: {err}", file=sys.stderr)
        return err.exit_code
    print(f"rlhp-report: wrote {report}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
