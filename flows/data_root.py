"""The data root: where a flow run started from the Prefect UI or a deployment may read and write.

Every local path such a run names must resolve inside a data root: the worker's `LMFORGE_DATA_ROOT`
(several roots separated by `:`), by default the `runs` and `samples` folders of its working directory (the
flows' default runs folder and the bundled sample data), never the working directory itself: a worker runs in
the checkout, whose code and configuration a run could otherwise read into its outputs. The root is the worker's setting,
never a form field. Three kinds of value name paths: a flow's path parameters (flows/params.py
PATH_PARAMS), a stage option that `overrides` sets and whose config declares it a path
(`opt(..., path=True)`), and a Beam option named like one (`--temp_location`, `--requirements_file`).

"Resolves" means what a stage would open: symlinks followed; `..` applied after a glob's wildcards too;
each file a glob matches now; `~` both as the worker's home and as a folder named `~` (lmforge passes it
on as given, some libraries expand it); `file:///x` as the local path `/x` (schemas/storage.py reads it so).
Object-store URLs (s3://, gs://, hdfs://, azfs://: the file systems Beam's FileSystems registers besides
the local one) name no file on the worker and pass: what they reach is for the worker's store credentials
to decide. Any other URL (http://, ftp://, hf://, fsspec's local:// or zip::file:// chains) is refused: no
stage means to read one, and a reader library might fetch it or open a local file through it. A value
starting with '-' is refused as well: in a stage's argument list it would be read as an option
(`crawl: ["--output=/elsewhere"]`).

Paths typed on `lmforge run`'s command line are the user's own (trust_paths): a local user owns the machine.
"""
from __future__ import annotations

import dataclasses
import glob
import os
import re
import shutil
import subprocess
import typing
from collections.abc import Iterable
from pathlib import Path
from typing import Any

DATA_ROOT_ENV = "LMFORGE_DATA_ROOT"
OBJECT_STORES = ("s3", "gs", "hdfs", "azfs")
"""URL schemes that name objects on a store, not files on the worker: they pass the data-root check."""
_SCHEME = re.compile(r"^([A-Za-z][-A-Za-z0-9+.:]*)://")  # ':' too, so fsspec's "simplecache::file://" is one scheme
BEAM_PATH_SUFFIXES = ("_location", "_file", "_files", "_jar", "_dir", "_package", "_packages", "_path", "_to_stage")
"""How Beam names the options whose values are files or folders (--temp_location, --requirements_file,
--extra_package, --flink_job_server_jar, --artifacts_dir, --output_executable_path, --files_to_stage)."""
BEAM_SENTINELS = {"default", "container"}
"""Values of those options that are words, not paths (`--sdk_location=container`)."""


class PathRefused(ValueError):
    """A path a flow run may not use: outside the data root, a URL no stage reads, or spelled like an option."""


DEFAULT_ROOTS = ("runs", "samples")
"""The data roots when LMFORGE_DATA_ROOT is unset, under the working directory."""


def data_roots() -> list[Path]:
    raw = os.environ.get(DATA_ROOT_ENV, "")
    return [Path(r).resolve() for r in raw.split(":") if r] or [(Path.cwd() / d).resolve() for d in DEFAULT_ROOTS]


def local_paths(value: str, what: str) -> list[Path]:
    """Every local path `value` can name, resolved (none for an object-store URL); PathRefused for another
    URL or a leading '-'."""
    if value.startswith("-"):
        raise PathRefused(f"{what} {value!r} starts with '-', which a stage reads as an option (write ./{value})")
    url = _SCHEME.match(value)
    if url and url.group(1).lower() in OBJECT_STORES:
        return []
    if url and url.group(1).lower() != "file":
        raise PathRefused(f"{what} {value!r}: a {url.group(1)}:// URL; give a path inside the data root or an object "
                          f"store's URL ({', '.join(s + '://' for s in OBJECT_STORES)})")
    if url:
        value = value[url.end():]
    spellings = {value, os.path.expanduser(value)}
    for s in list(spellings):
        if any(c in s for c in "*?["):
            spellings.update(glob.glob(s, recursive=True))  # as schemas.storage.glob expands it
    try:
        return [(Path.cwd() / s).resolve() for s in spellings]  # cwd / an absolute path is that path
    except (OSError, RuntimeError) as e:  # a symlink loop
        raise PathRefused(f"{what} {value!r} cannot be resolved: {e}") from None


def inside_root(value: str, what: str) -> str:
    """`value` if every local path it names resolves inside a data root, else PathRefused naming `what`."""
    roots = data_roots()
    for resolved in local_paths(value, what):
        if not any(resolved == r or r in resolved.parents for r in roots):
            raise PathRefused(f"{what} {value!r} resolves to {resolved}, outside the data root "
                              f"({', '.join(map(str, roots))}): add its folder to {DATA_ROOT_ENV} (':'-separated) in "
                              "the worker's environment, or start the run with `lmforge run`, whose paths are the "
                              "user's own")
    return value


CODE_MARKS = ("__init__.py", "pyproject.toml", "setup.py", "setup.cfg", ".git")
"""Names that make a folder code, not data: a Python package, a project, a repository."""
WALK_LIMIT = 20_000
"""Entries a run folder's walk reads at most (a finished run holds a few hundred): a huge tree costs bounded time;
git's list of tracked files covers what the walk leaves."""


def refuse_code_folder(value: str, what: str) -> None:
    """A folder a run will write (and replace stage folders in) that holds code is refused, whatever the data root:
    a Python package, a project or a repository (CODE_MARKS; not any *.py: DeepSpeed writes zero_to_fp32.py beside
    its checkpoints), or a file git tracks there. With the checkout as the root, `runs_dir=.` and
    `run_name=pipelines` would otherwise let the corpus stage replace pipelines/corpus. A folder inside a package (a folder above it holds `__init__.py`) is refused as well, whether
    or not it exists: pipelines/corpus/data holds no code itself."""
    folder = Path(value).resolve()
    package = next((p for p in folder.parents if (p / "__init__.py").is_file()), None)
    if package is not None:
        raise PathRefused(f"{what} {value!r} is inside the Python package {package}; a run's folder holds data only "
                          "(name a folder of its own under the runs folder)")
    if not folder.is_dir():
        return
    seen = 0
    for top, dirs, files in os.walk(folder):
        for name in (*dirs, *files):
            if name in CODE_MARKS:
                raise PathRefused(f"{what} {value!r}: {Path(top, name)} is code; a run's folder holds data only "
                                  "(name a folder of its own under the runs folder)")
        seen += len(dirs) + len(files)
        if seen > WALK_LIMIT:
            break
    git = shutil.which("git")
    if git:
        try:
            r = subprocess.run([git, "-C", str(folder), "ls-files", "-z", "--", "."], capture_output=True, timeout=30)
        except (OSError, subprocess.TimeoutExpired):
            return
        tracked = r.stdout.split(b"\0", 1)[0].decode(errors="replace") if r.returncode == 0 else ""
        if tracked:
            raise PathRefused(f"{what} {value!r}: holds {tracked}, a file git tracks; a run's folder holds data "
                              "only (name a folder of its own under the runs folder)")


def trust_paths(values: Iterable[Any]) -> None:
    """Paths typed on this process's own command line (`lmforge run --runs-dir /data/runs`) become data
    roots of this process: the rule protects a shared worker from what a deployment or the UI's form
    passes, and the user at a command line owns the machine."""
    typed: list[Path] = []
    for v in values:
        if isinstance(v, str) and v:
            try:
                typed += local_paths(v, "path")
            except PathRefused:
                continue  # refused again, with its reason, when the parameters are checked
    if typed:
        os.environ[DATA_ROOT_ENV] = ":".join(dict.fromkeys(map(str, [*data_roots(), *typed])))


def check_option_paths(cls: type, opts: dict[str, Any], where: str) -> None:
    """The options `opts` sets on the config class `cls` (a nested config's as an object): a path option's
    every string inside a data root; no string anywhere that starts with '-' (a list's item would become an
    option of its own: `init: ["pretrained", "--output=/elsewhere"]`); a nested option `cls` lacks is
    refused, as argparse would take `--decontaminate-file` for `--decontaminate-files`."""
    hints = typing.get_type_hints(cls)
    fields = {f.name: f for f in dataclasses.fields(cls) if f.init}
    for key, value in opts.items():
        name = f"{where}.{key}"
        if key not in fields:
            raise PathRefused(f"{name}: not an option of {cls.__name__} ({', '.join(fields)})")
        if dataclasses.is_dataclass(hints[key]):
            if not isinstance(value, dict):
                raise PathRefused(f"{name} must be an object of {hints[key].__name__} options, got {value!r}")
            check_option_paths(hints[key], value, name)
            continue
        items = value if isinstance(value, list) else [value]
        if any(isinstance(v, (dict, list)) for v in items):
            raise PathRefused(f"{name} must be a value or a list of values, got {value!r}")
        for v in items:
            if fields[key].metadata.get("path") and value != "":  # "" is the option's own "none"
                inside_root(str(v), name)
            elif isinstance(v, str) and v.startswith("-"):
                raise PathRefused(f"{name} {v!r} starts with '-', which the stage would read as an option")


def check_beam_paths(args: list[str]) -> None:
    """The Beam options among `args` that name files (BEAM_PATH_SUFFIXES; `--flag=value` or `--flag value`)
    inside a data root or on an object store (Dataflow's gs:// staging)."""
    for i, a in enumerate(args):
        flag, eq, value = a.partition("=")
        if not eq and i + 1 < len(args) and not args[i + 1].startswith("--"):
            value = args[i + 1]
        if flag.startswith("--") and flag.endswith(BEAM_PATH_SUFFIXES) and value and value not in BEAM_SENTINELS:
            inside_root(value, f"beam_args {flag}")
