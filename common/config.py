"""Typed stage configs and their command-line form.

Every stage owns a small dataclass whose fields are declared with `opt(default, help)`. The
help text is the field's documentation: `lmforge <stage> --help` prints it, and the manifest
records the validated values. Validation lives in each config's `__post_init__`.
"""
from __future__ import annotations

import argparse
import dataclasses
import json
import typing
from pathlib import Path
from typing import Any, TypeVar

T = TypeVar("T")


def opt(default: Any = dataclasses.MISSING, help: str = "", alias: str | None = None, path: bool = False,
        choices: tuple[Any, ...] | None = None, repeat: bool = False, metavar: str | None = None, **kw: Any) -> Any:
    """A config field with its documentation. Mutable defaults go through default_factory.

    `alias` is a second spelling of the flag (`--from` for the field `from_model`, as `from` is a
    Python keyword); the JSON config key stays the field name. `path`: the option names files or
    folders the stage reads or writes, so a run started from the Prefect UI may point it only inside
    the data root (flows/params.py checks every such option its `overrides` set). `choices`: the values
    the flag accepts (from a registry, so the list is never copied by hand); `repeat`: a list option given
    once per value (`--nccl-env A=1 --nccl-env B=2`) rather than as `--flag a b`; `metavar`: the value's
    name in --help."""
    meta = {"help": help, **({"alias": alias} if alias else {}), **({"path": True} if path else {}),
            **({"choices": tuple(choices)} if choices is not None else {}), **({"repeat": True} if repeat else {}),
            **({"metavar": metavar} if metavar else {})}
    if isinstance(default, (list, dict)):
        value = default
        return dataclasses.field(default_factory=lambda: type(value)(value), metadata=meta, **kw)
    return dataclasses.field(default=default, metadata=meta, **kw)


AUTO = "auto"
"""The value of an `int | str` option that lmforge chooses itself (`--zero-stage auto`, `--micro-batch-size auto`)."""


def int_or_auto(text: str) -> int | str:
    """The flag parser of an `int | str` field: a whole number, or `auto`."""
    if text.strip().lower() == AUTO:
        return AUTO
    try:
        return int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a whole number or 'auto', got {text!r}") from None


def _base_type(tp: Any) -> tuple[Any, bool]:
    """(element type, is_list) for str, int, float, bool, Path, list[X], X | None; `int | str` (a number or
    `auto`) parses with `int_or_auto`."""
    origin = typing.get_origin(tp)
    if origin in (list, tuple):
        return typing.get_args(tp)[0], True
    if origin in (typing.Union, getattr(__import__("types"), "UnionType", None)):
        args = [a for a in typing.get_args(tp) if a is not type(None)]
        if set(args) == {int, str}:
            return int_or_auto, False
        return _base_type(args[0])
    return tp, False


def add_config_args(parser: argparse.ArgumentParser, cls: type, prefix: str = "", config_file: bool = True) -> None:
    """Add one `--flag` per dataclass field, with the field's help and default.

    Nested config dataclasses become prefixed flags: MaskConfig.rate under field `mask` is
    `--mask-rate`. `--config FILE` (JSON) supplies values too; flags given on the command line win.
    `config_file=False`: a second options object on a parser that already has its `--config`.
    """
    if not prefix and config_file:
        parser.add_argument("--config", dest="_config_file", metavar="FILE", default=None,
                            help="JSON file with config values (keys are the option names with _); flags override it")
    hints = typing.get_type_hints(cls)
    for f in dataclasses.fields(cls):
        if not f.init:
            continue
        if dataclasses.is_dataclass(hints[f.name]):
            add_config_args(parser, hints[f.name], prefix=f"{prefix}{f.name}_")
            continue
        tp, is_list = _base_type(hints[f.name])
        dest = prefix + f.name
        flag = "--" + dest.replace("_", "-")
        default = f.default if f.default is not dataclasses.MISSING else (
            f.default_factory() if f.default_factory is not dataclasses.MISSING else None  # type: ignore[misc]
        )
        required = f.default is dataclasses.MISSING and f.default_factory is dataclasses.MISSING
        help_text = f.metadata.get("help", "").replace("%", "%%")
        if not required:
            help_text += f" (default: {default})"
        else:
            help_text += " (required)"
        flags = [flag, *([f.metadata["alias"]] if f.metadata.get("alias") else [])]  # a nested option's alias is a whole flag too
        meta = f.metadata
        if tp is bool and not is_list:
            parser.add_argument(*flags, dest=dest, action=argparse.BooleanOptionalAction, default=None, help=help_text)
        elif is_list and meta.get("repeat"):
            parser.add_argument(*flags, dest=dest, type=tp, action="append", default=None, help=help_text,
                                metavar=meta.get("metavar") or f.name.upper(), choices=meta.get("choices"))
        else:
            parser.add_argument(*flags, dest=dest, type=tp, nargs="+" if is_list else None, choices=meta.get("choices"),
                                default=None, help=help_text,
                                metavar=meta.get("metavar") or (None if meta.get("choices") else f.name.upper()))


def _collect(cls: type, values: dict[str, Any], prefix: str = "") -> dict[str, Any]:
    """Build constructor kwargs from flat `values` (flags), recursing into nested configs."""
    hints = typing.get_type_hints(cls)
    kwargs: dict[str, Any] = {}
    for f in dataclasses.fields(cls):
        if not f.init:
            continue
        if dataclasses.is_dataclass(hints[f.name]):
            kwargs[f.name] = hints[f.name](**_collect(hints[f.name], values, f"{prefix}{f.name}_"))
        elif values.get(prefix + f.name) is not None:
            kwargs[f.name] = values[prefix + f.name]
    return kwargs


def _flatten(d: dict[str, Any], prefix: str = "") -> dict[str, Any]:
    out: dict[str, Any] = {}
    for k, v in d.items():
        if isinstance(v, dict):
            out.update(_flatten(v, f"{prefix}{k}_"))
        else:
            out[prefix + k] = v
    return out


def flatten_options(d: dict[str, Any]) -> dict[str, Any]:
    """Options as a `--config` file gives them (a nested config as an object) in flat names (`family_option`)."""
    return _flatten(d)


def option_names(cls: type) -> set[str]:
    """Every option of `cls` by its flat name, nested configs' as `family_option`: what a `--config` may hold."""
    return _option_names(cls)


def _option_names(cls: type, prefix: str = "") -> set[str]:
    """The flat option names `_collect` reads for `cls` (nested configs as prefix_name)."""
    hints = typing.get_type_hints(cls)
    names: set[str] = set()
    for f in dataclasses.fields(cls):
        if not f.init:
            continue
        if dataclasses.is_dataclass(hints[f.name]):
            names |= _option_names(hints[f.name], f"{prefix}{f.name}_")
        else:
            names.add(prefix + f.name)
    return names


def config_from_args(cls: type[T], ns: argparse.Namespace) -> T:
    """The config from `--config FILE` (if any) overlaid with the flags given; validated on construction."""
    values: dict[str, Any] = {}
    path = getattr(ns, "_config_file", None)
    if path:
        try:
            given = _flatten(json.loads(Path(path).read_text()))
        except (OSError, json.JSONDecodeError, AttributeError) as e:
            raise ValueError(f"--config {path}: cannot read a JSON object ({e})") from e
        unknown = sorted(set(given) - _option_names(cls))
        if unknown:  # never silently ignored: a runner option read as nothing would run the stage elsewhere
            hint = (" (Beam pipeline options: give that file with --beam-options)"
                    if set(unknown) & {"runner", "project", "region", "temp_location", "flink_master", "spark_master_url",
                                       "direct_running_mode", "direct_num_workers", "dask_client_address"} else "")
            raise ValueError(f"--config {path}: {cls.__name__} has no option {', '.join(unknown)}{hint}")
        values.update(given)
    values.update({k: v for k, v in vars(ns).items() if v is not None and not k.startswith("_")})
    missing = [f.name for f in dataclasses.fields(cls) if f.init and f.default is dataclasses.MISSING
               and f.default_factory is dataclasses.MISSING and f.name not in values]
    if missing:
        raise ValueError("missing required option(s): " + ", ".join("--" + m.replace("_", "-") for m in missing))
    try:
        return cls(**_collect(cls, values))
    except TypeError as e:  # a required option is missing
        raise ValueError(f"{cls.__name__}: {e}") from e


def options_to_argv(opts: dict[str, Any]) -> list[str]:
    """The command line `add_config_args` parses back into these options (the inverse of the parser).

    None is left out (the field's default applies), booleans become --flag / --no-flag, lists
    become `--flag a b c` (an empty list is left out: argparse's nargs="+" cannot express it, so the
    default stands), a dict (a nested options object) `--name-option value` per key, anything else
    `--flag value`; option names use dashes for underscores.
    """
    argv: list[str] = []
    for name, value in opts.items():
        flag = "--" + name.replace("_", "-")
        if value is None:
            continue
        if isinstance(value, dict):  # a nested options object (a cleaning family's): its flags carry its name
            argv += options_to_argv({f"{name}_{k}": v for k, v in value.items()})
            continue
        if isinstance(value, bool):
            argv.append(flag if value else "--no-" + flag[2:])
        elif isinstance(value, (list, tuple)):
            if value:
                argv += [flag, *map(str, value)]
        else:
            argv += [flag, str(value)]
    return argv


def config_to_dict(cfg: Any) -> dict[str, Any]:
    return json.loads(json.dumps(dataclasses.asdict(cfg), default=str))


def require(cond: bool, msg: str) -> None:
    """Config validation: a clear ValueError naming the bad setting."""
    if not cond:
        raise ValueError(msg)



def parse_config(cls: type[T], prog: str, doc: str | None, argv: list[str] | None = None) -> T:
    """The usual entry point: `--help` from the module docstring, flags from the config, validated."""
    p = argparse.ArgumentParser(prog=prog, description=doc, formatter_class=argparse.RawDescriptionHelpFormatter)
    add_config_args(p, cls)
    ns = p.parse_args(argv)
    try:
        return config_from_args(cls, ns)
    except ValueError as e:
        p.error(str(e))
        raise  # unreachable: p.error exits


def read_json_object(path: str | Path, flag: str) -> dict[str, Any]:
    """A JSON object from a file an option names; a ValueError naming the option and the file otherwise."""
    try:
        value = json.loads(Path(path).read_text())
    except FileNotFoundError:
        raise ValueError(f"{flag} {path}: no such file") from None
    except ValueError as e:
        raise ValueError(f"{flag} {path}: not JSON ({e})") from None
    if not isinstance(value, dict):
        raise ValueError(f"{flag} {path}: a JSON object expected, got {type(value).__name__}")
    return value
