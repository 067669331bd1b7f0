"""A bench's command line: its typed config's flags (common.config) and the few flags of the run itself.

    ap = bench_parser("lmforge bench train", __doc__, TrainBenchConfig)
    ap.add_argument("--resume", action="store_true", help=...)      # how to run, not what is measured
    cfg, a = parse_bench(ap, TrainBenchConfig, argv)

`--config FILE`, one-line errors and the closest known option for a misspelt one come with it (common.cli).
"""
from __future__ import annotations

import argparse
from typing import TypeVar

from common.cli import Parser, parse_strict
from common.config import add_config_args, config_from_args

T = TypeVar("T")


def bench_parser(prog: str, doc: str | None, cls: type, may_be_empty: tuple[str, ...] = ()) -> Parser:
    """The parser of `cls`'s flags; the list options named in `may_be_empty` also take no value (`--compress-tasks`
    alone: none), as their flags did before they came from the config."""
    ap = Parser(prog=prog, description=doc, formatter_class=argparse.RawDescriptionHelpFormatter)
    add_config_args(ap, cls)
    for action in ap._actions:
        if action.dest in may_be_empty:
            action.nargs = "*"
    return ap


def parse_bench(ap: argparse.ArgumentParser, cls: type[T], argv: list[str] | None,
                required: tuple[str, ...] = ()) -> tuple[T, argparse.Namespace]:
    """(the validated config, every flag as given); a bad value or option is one line naming it. `required`: run flags
    (`--out`) that must be given, checked here rather than by argparse so that a misspelt option is named first."""
    ns = parse_strict(ap, argv)
    try:
        cfg = config_from_args(cls, ns)
    except ValueError as e:
        ap.error(str(e))
    missing = [flag for flag in required if getattr(ns, flag.removeprefix("--").replace("-", "_")) is None]
    if missing:
        ap.error("missing required option(s): " + ", ".join(missing))
    return cfg, ns
