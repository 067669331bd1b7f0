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


def opt(default: Any = dataclasses.MISSING, help: str = "", **kw: Any) -> Any:
    """A config field with its documentation. Mutable defaults go through default_factory."""
    if isinstance(default, (list, dict)):
        value = default
        return dataclasses.field(default_factory=lambda: type(value)(value), metadata={"help": help}, **kw)
    return dataclasses.field(default=default, metadata={"help": help}, **kw)


def _base_type(tp: Any) -> tuple[Any, bool]:
    """(element type, is_list) for str, int, float, bool, Path, list[X], X | None."""
    origin = typing.get_origin(tp)
    if origin in (list, tuple):
        return typing.get_args(tp)[0], True
    if origin in (typing.Union, getattr(__import__("types"), "UnionType", None)):
        args = [a for a in typing.get_args(tp) if a is not type(None)]
        return _base_type(args[0])
    return tp, False


def add_config_args(parser: argparse.ArgumentParser, cls: type) -> None:
    """Add one `--flag` per dataclass field, with the field's help and default."""
    hints = typing.get_type_hints(cls)
    for f in dataclasses.fields(cls):
        if not f.init:
            continue
        tp, is_list = _base_type(hints[f.name])
        flag = "--" + f.name.replace("_", "-")
        default = f.default if f.default is not dataclasses.MISSING else (
            f.default_factory() if f.default_factory is not dataclasses.MISSING else None  # type: ignore[misc]
        )
        required = f.default is dataclasses.MISSING and f.default_factory is dataclasses.MISSING
        help_text = f.metadata.get("help", "")
        if not required:
            help_text += f" (default: {default})"
        if tp is bool and not is_list:
            parser.add_argument(flag, dest=f.name, action=argparse.BooleanOptionalAction,
                                default=default, help=help_text)
        else:
            parser.add_argument(flag, dest=f.name, type=tp, nargs="+" if is_list else None,
                                default=default, required=required, help=help_text,
                                metavar=f.name.upper())


def config_from_args(cls: type[T], ns: argparse.Namespace) -> T:
    names = {f.name for f in dataclasses.fields(cls) if f.init}
    return cls(**{k: v for k, v in vars(ns).items() if k in names})


def config_to_dict(cfg: Any) -> dict[str, Any]:
    return json.loads(json.dumps(dataclasses.asdict(cfg), default=str))


def require(cond: bool, msg: str) -> None:
    """Config validation: a clear ValueError naming the bad setting."""
    if not cond:
        raise ValueError(msg)


def as_path(p: str | Path) -> Path:
    return p if isinstance(p, Path) else Path(p)
