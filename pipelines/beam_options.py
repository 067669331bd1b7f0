"""Beam pipeline options from a JSON file (`--beam-options infra/beam/dataflow.json`), for the Beam stages.

    beam_args_from_file("infra/beam/flink.json")
    # ['--runner=FlinkRunner', '--flink_master=flink-jobmanager:8081', ..., '--parallelism=64']

A JSON object of Beam's option names (as `PipelineOptions` knows them, with underscores): strings and
numbers become `--name=value`, a list repeats the flag (`experiments`), true becomes the bare flag and
false leaves it out (Beam's boolean options are store_true). The file's options come first on the
command line, so a Beam flag given there too wins. A key Beam does not know is an error naming the
file and the key, rather than an option silently ignored (Beam drops what it does not know).
"""
from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from common.config import read_json_object


def beam_args_from_file(path: str | Path) -> list[str]:
    opts = read_json_object(path, "--beam-options")
    args = beam_args(opts)
    unknown = sorted(set(opts) - set(known_options(args)))
    if unknown:
        raise ValueError(f"--beam-options {path}: Beam does not know {', '.join(unknown)} (apache_beam "
                         "PipelineOptions names, with underscores; the runner's extras may be missing)")
    return args


def beam_args(opts: dict[str, Any]) -> list[str]:
    args: list[str] = []
    for key, value in opts.items():
        for item in value if isinstance(value, list) else [value]:
            if item is True:
                args.append(f"--{key}")
            elif item is False or item is None:
                continue
            elif isinstance(item, (dict, list)):
                args.append(f"--{key}={json.dumps(item)}")
            else:
                args.append(f"--{key}={item}")
    return args


def beam_flags(args: list[str] = ()) -> set[str]:
    """Every flag Beam's own parser reads (`--runner`, `--direct_num_workers`, `--no_pipeline_type_check`,
    ...), the chosen runner's included: the parser PipelineOptions builds, handed out by its
    add_extra_args_fn hook. A runner whose options register on import (Dask) is imported first."""
    from apache_beam.options.pipeline_options import PipelineOptions

    if runner_name(expand_runner_alias(list(args))) == "DaskRunner":
        import apache_beam.runners.dask.dask_runner  # noqa: F401 - registers DaskOptions
    parsers: list[Any] = []
    PipelineOptions([]).get_all_options(add_extra_args_fn=parsers.append)
    return {o for a in parsers[0]._actions for o in a.option_strings if o.startswith("--")}


def known_options(args: list[str]) -> dict[str, Any]:
    from apache_beam.options.pipeline_options import PipelineOptions

    return PipelineOptions(args).get_all_options(drop_default=False, retain_unknown_options=False)


RUNNER_ALIASES = {"DaskRunner": "apache_beam.runners.dask.dask_runner.DaskRunner"}
"""Runners Beam (2.77) accepts only by their module path: `--runner=DaskRunner` becomes the path."""

LOCAL_RUNNERS = {"DirectRunner", "BundleBasedDirectRunner", "SwitchingDirectRunner", "TestDirectRunner", "FnApiRunner",
                 "PrismRunner"}
"""Runners whose workers share the driver's working directory (threads, subprocesses or loopback)."""


def expand_runner_alias(args: list[str]) -> list[str]:
    out = list(args)
    for i, a in enumerate(out):
        if a.startswith("--runner=") and a[len("--runner="):] in RUNNER_ALIASES:
            out[i] = "--runner=" + RUNNER_ALIASES[a[len("--runner="):]]
        elif a == "--runner" and i + 1 < len(out) and out[i + 1] in RUNNER_ALIASES:
            out[i + 1] = RUNNER_ALIASES[out[i + 1]]
    return out


def runner_name(args: list[str]) -> str:
    """The runner the arguments choose, without its module path ("DirectRunner" when none is given)."""
    from apache_beam.options.pipeline_options import PipelineOptions, StandardOptions

    return str(PipelineOptions(args).view_as(StandardOptions).runner or "DirectRunner").rsplit(".", 1)[-1]


def check_worker_paths(args: list[str], paths: list[str]) -> None:
    """A relative local path given to a runner with workers of their own (Dask, Flink, Dataflow, ...)
    would name a file under each worker's working directory: the inputs would be quarantined as
    unreadable and the outputs written where the driver never looks. Refused, naming the path."""
    runner = runner_name(args)
    if runner in LOCAL_RUNNERS:
        return
    relative = [p for p in map(str, paths) if "://" not in p and not Path(p).is_absolute()]
    if relative:
        raise ValueError(f"--runner={runner} resolves paths on its workers: give absolute paths, not "
                         f"{', '.join(relative[:3])}{' ...' if len(relative) > 3 else ''}")
