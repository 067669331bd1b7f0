"""A corpus ablation's arms: named sets of corpus options over one crawl, checked before anything runs.

    arms = resolve_arms(["baseline", "no-near-dedup", {"name": "no-gopher", "corpus": {...}}], crawl)
    changed(arms[1], arms[0])     # {"near_dedup": (True, False)}: what the arm changes against the baseline

An arm is a name from ARM_PRESETS or an object {"name": ..., "corpus": {options}, "crawl": [paths]}: corpus
options as `lmforge corpus --config` takes them (flat, or a rule family's options as an object, e.g.
{"gopher_quality": {"enabled": false}}), over the defaults; "crawl" names a different crawl for that arm (a source
mixture), the ablation's own otherwise. Each arm's options build a real CorpusConfig, so every rule the corpus
stage checks holds here, before any stage runs. Refused in one line each: an unknown option (naming the closest
one), two arms with one name, two arms that are the same configuration (the ablation would compare a thing with
itself), no arm named `baseline` (each arm's difference is read against it).
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from common.cli import closest
from common.config import config_to_dict, flatten_options, option_names

QUALITY_FAMILIES = ("c4", "gopher_repetition", "gopher_quality", "fineweb")
"""The heuristic quality rules (C4's, Gopher's two tables, FineWeb's): what `no-quality-rules` turns off."""


def _off(*families: str) -> dict[str, Any]:
    return {f: {"enabled": False} for f in families}


ARM_PRESETS: dict[str, dict[str, Any]] = {
    "baseline": {},
    "no-near-dedup": {"near_dedup": False},
    "no-exact-dedup": {"exact_dedup": False},
    "no-dedup": {"exact_dedup": False, "near_dedup": False, "line_dedup": False},
    "no-quality-rules": _off(*QUALITY_FAMILIES),
    "no-gopher": _off("gopher_repetition", "gopher_quality"),
    "no-fineweb": _off("fineweb"),
    "c4-only": _off("gopher_repetition", "gopher_quality", "fineweb", "url_filter"),
    "no-url-filter": _off("url_filter"),
    "no-cleaning": {**_off(*QUALITY_FAMILIES, "url_filter"), "exact_dedup": False, "near_dedup": False,
                    "line_dedup": False},
}
"""Arms by name, as corpus options over the defaults: the comparisons FineWeb, RefinedWeb and DCLM ran."""

NOT_ARM_OPTIONS = frozenset({"input", "output", "index", "snapshot", "index_wait"})
"""Corpus options an arm may not set: where it reads and writes, and the refresh's shared index (an arm's corpus
is its own run)."""


@dataclass(frozen=True)
class Arm:
    name: str
    corpus: dict[str, Any] = field(default_factory=dict)
    """The arm's corpus options over the defaults, flat (`gopher_quality_enabled`), as given."""
    crawl: tuple[str, ...] = ()
    """The arm's own crawl; empty: the ablation's."""
    resolved: dict[str, Any] = field(default_factory=dict, compare=False)
    """Every corpus option the arm runs with (CorpusConfig's defaults filled in), input and output left out."""


def _arm_entry(entry: Any, i: int) -> tuple[str, dict[str, Any], tuple[str, ...]]:
    if isinstance(entry, str):
        if entry not in ARM_PRESETS:
            guess = closest(entry, ARM_PRESETS)
            raise ValueError(f"arms[{i}]: no arm preset {entry!r}" + (f"; did you mean {guess!r}?" if guess else "")
                             + f" (presets: {', '.join(ARM_PRESETS)}; or give an object with name and corpus)")
        return entry, ARM_PRESETS[entry], ()
    if not isinstance(entry, dict) or not isinstance(entry.get("name"), str) or not entry["name"]:
        raise ValueError(f"arms[{i}]: an arm is a preset name or an object with a name, got {entry!r}")
    extra = set(entry) - {"name", "corpus", "crawl"}
    if extra:
        raise ValueError(f"arm {entry['name']!r}: unknown key(s) {', '.join(sorted(extra))} (an arm has name, corpus, "
                         "crawl)")
    corpus = entry.get("corpus") or {}
    if not isinstance(corpus, dict):
        raise ValueError(f"arm {entry['name']!r}: corpus must be an object of corpus options, got {corpus!r}")
    base = ARM_PRESETS.get(entry["name"], {}) if not corpus else {}
    crawl = entry.get("crawl") or ()
    return entry["name"], {**base, **corpus}, tuple([crawl] if isinstance(crawl, str) else crawl)


def resolve_arms(entries: list[Any], crawl: list[str]) -> list[Arm]:
    """The arms, each checked (module docstring); ValueError naming the arm and the option otherwise."""
    from pipelines.corpus.config import CorpusConfig

    known = option_names(CorpusConfig) - NOT_ARM_OPTIONS
    arms: list[Arm] = []
    if not entries:
        raise ValueError("arms: none given (at least `baseline` and one arm to compare with it)")
    for i, entry in enumerate(entries):
        name, options, own_crawl = _arm_entry(entry, i)
        flat = flatten_options(options)
        for key in sorted(set(flat) - known):
            if key in NOT_ARM_OPTIONS:
                raise ValueError(f"arm {name!r}: {key} is the ablation's to set, not an arm's")
            guess = closest(key, known)
            raise ValueError(f"arm {name!r}: no corpus option {key!r}" + (f"; did you mean {guess!r}?" if guess else ""))
        try:
            cfg = CorpusConfig(input=list(own_crawl or crawl) or ["-"], output="-", **nest_options(options))
        except (TypeError, ValueError) as e:
            raise ValueError(f"arm {name!r}: {e}") from e
        resolved = {k: v for k, v in config_to_dict(cfg).items() if k not in ("input", "output")}
        arms.append(Arm(name, flat, own_crawl, resolved))
    names = [a.name for a in arms]
    twice = sorted({n for n in names if names.count(n) > 1})
    if twice:
        raise ValueError(f"arms: the name {twice[0]!r} is given twice")
    if "baseline" not in names:
        raise ValueError("arms: none is named 'baseline' (each arm's difference is read against it; the preset "
                         "`baseline` is the corpus defaults)")
    for i, a in enumerate(arms):
        for b in arms[:i]:
            if a.resolved == b.resolved and (a.crawl or tuple(crawl)) == (b.crawl or tuple(crawl)):
                raise ValueError(f"arms {b.name!r} and {a.name!r} are the same configuration (same corpus options "
                                 "and crawl): the ablation would compare a corpus with itself")
    return arms


def nest_options(options: dict[str, Any]) -> dict[str, Any]:
    """Flat family options (`gopher_quality_enabled`) as CorpusConfig takes them ({"gopher_quality": {...}})."""
    from pipelines.corpus.steps.registry import step_configs

    families = set(step_configs())  # the cleaning chain's rule families, each a CorpusConfig field of its options
    out: dict[str, Any] = {}
    for key, value in flatten_options(options).items():
        family = next((f for f in families if key.startswith(f + "_")), None)
        if family:
            out.setdefault(family, {})[key[len(family) + 1:]] = value
        else:
            out[key] = value
    return out


def changed(arm: Arm, baseline: Arm) -> dict[str, tuple[Any, Any]]:
    """What `arm` runs differently from `baseline`: option -> (baseline's value, the arm's), flat names."""
    a, b = flatten_options(arm.resolved), flatten_options(baseline.resolved)
    diff = {k: (b.get(k), a.get(k)) for k in sorted(set(a) | set(b)) if a.get(k) != b.get(k)}
    if arm.crawl != baseline.crawl:
        diff["crawl"] = (list(baseline.crawl) or "the ablation's", list(arm.crawl) or "the ablation's")
    return diff
