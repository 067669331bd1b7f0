"""Command lines that answer a mistake in one line.

    ap = Parser(prog="lmforge corpus", description=...)
    ns, rest = ap.parse_known_args(argv)
    reject_unknown(ap, rest, also_known=beam_option_names(rest))   # the Beam stages
    ns = parse_strict(ap, argv)                                     # every other command

argparse prints the whole usage (thirty lines for `lmforge corpus`) above its error, and says only
"unrecognized arguments"; a Beam stage handed every option it did not know to Beam, which drops what
it does not know with a warning, so `--line-dedupe` ran a whole corpus without line dedup. Here an
option nobody knows is an error naming it and the closest known option, before anything runs, and
every error is one line that ends by pointing at --help.
"""
from __future__ import annotations

import argparse
import difflib
from collections.abc import Iterable
from typing import NoReturn


class Parser(argparse.ArgumentParser):
    """argparse, with its errors on one line (`PROG: error: MESSAGE (PROG --help lists the options)`)."""

    def error(self, message: str) -> NoReturn:
        self.exit(2, f"{self.prog}: error: {message} ({self.prog} --help lists the options)\n")


def known_flags(parser: argparse.ArgumentParser) -> set[str]:
    return {o for a in parser._actions for o in a.option_strings if o.startswith("--")}


def closest(flag: str, known: Iterable[str]) -> str | None:
    """The known option a misspelt `flag` most likely means (difflib's ratio >= 0.6), or None."""
    found = difflib.get_close_matches(flag, sorted(known), n=1, cutoff=0.6)
    return found[0] if found else None


def unknown_message(flag: str, ours: set[str], also_known: set[str] = frozenset()) -> str:
    dashed = flag.replace("_", "-")
    if flag != dashed and dashed in ours:
        return f"{flag} is spelt {dashed} (lmforge's options use dashes; underscores are Beam's)"
    guess = closest(flag, ours | also_known)
    return f"unknown option {flag}" + (f"; did you mean {guess}?" if guess else "")


def reject_unknown(parser: argparse.ArgumentParser, rest: list[str], also_known: set[str] = frozenset()) -> None:
    """parser.error for the first of `rest` (what parse_known_args left over) that is neither one of
    the parser's options nor in `also_known` (e.g. Beam's options, as --name). A value after a known
    --flag (`--runner DirectRunner`) is the flag's; any other word is an unexpected argument."""
    ours = known_flags(parser)
    previous_takes_value = False
    for token in rest:
        if not token.startswith("-") or token == "-":
            if not previous_takes_value:
                parser.error(f"unexpected argument {token!r}")
            previous_takes_value = False
            continue
        flag = token.split("=", 1)[0]
        if flag not in also_known:
            parser.error(unknown_message(flag, ours, also_known))
        previous_takes_value = "=" not in token


def parse_strict(parser: argparse.ArgumentParser, argv: list[str]) -> argparse.Namespace:
    """parse_args, with an unknown option named beside the closest known one."""
    ns, rest = parser.parse_known_args(argv)
    if rest:
        reject_unknown(parser, rest)
    return ns


class Failed(RuntimeError):
    """A failure already said in one line (the worker's own error and where its full log is): the
    command prints it as it is, with no traceback of the launcher's."""
