"""``rlhp-annotate <run folder>``: serve a run's queries to people, from any process or machine."""

from __future__ import annotations

import argparse
import os
import secrets
import sys

from rlhp.data.label_files import FORMATS
from rlhp.errors import RlhpError
from rlhp.human.server.export import export_label_files, export_labels
from rlhp.human.server.serve import serve
from rlhp.runs import RunFolder
from rlhp.runs.folder import LOOPBACK


def main(argv: list[str] | None = None) -> None:
    """Parse the command line and serve until Ctrl-C."""
    parser = argparse.ArgumentParser(
        prog="rlhp-annotate", description="Serve the labelling page for a run's pending queries "
        "(rlhp-train ... gatherer=human writes them; labels go back through the run folder).")
    parser.add_argument("run", help="the run folder (outputs/train/<date>/<time>)")
    parser.add_argument("--host", default="127.0.0.1",
                        help="address to listen on (default 127.0.0.1; 0.0.0.0 lets a team in, with a token)")
    parser.add_argument("--port", type=int, default=8765, help="port (default 8765; 0: any free one)")
    parser.add_argument("--token", default=os.environ.get("RLHP_TOKEN"),
                        help="access token (default $RLHP_TOKEN; generated when listening beyond loopback)")
    parser.add_argument("--lease-s", type=float, default=120.0,
                        help="seconds a query handed to a person stays theirs (default 120)")
    parser.add_argument("--export", metavar="DEST", default=None,
                        help="instead of serving, write the run's labels (Parquet + card) to folder DEST, or "
                        "push them to Hub dataset repo DEST (owner/name)")
    parser.add_argument("--private", action="store_true", help="with --export to the Hub: a private repo")
    parser.add_argument("--format", choices=["hub", *FORMATS], default="hub",
                        help="with --export: hub (Parquet + card, the default), or the label files of Preference "
                        "Transformer (pt) or Uni-RLHF (uni_rlhf), for a run on a dataset")
    parser.add_argument("--parent", type=int, default=None, help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    run = RunFolder(args.run)
    if not run.config_yaml.is_file():  # before anything is made there
        what = "holds no rlhp run (no .hydra/config.yaml)" if run.path.is_dir() else "is not a folder"
        print(f"rlhp-annotate: config error: {args.run!r} {what}; give the folder of an rlhp-train run",
              file=sys.stderr)
        sys.exit(2)
    token = args.token or (None if args.host in LOOPBACK else secrets.token_urlsafe(16))
    try:
        if args.export:
            where = (export_labels(args.run, args.export, args.private) if args.format == "hub"
                     else export_label_files(args.run, args.export, args.format))
            print(f"labels written to {where}")
            return
        serve(args.run, args.host, args.port, token, args.lease_s, args.parent)
    except RlhpError as err:
        print(f"rlhp-annotate: {err.kind}: {err}", file=sys.stderr)
        sys.exit(err.exit_code)
    except KeyboardInterrupt:
        sys.exit(130)
