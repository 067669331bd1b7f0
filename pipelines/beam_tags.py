"""A multi-output step that every runner routes right, for the Beam stages.

    out = pcoll | "Clean" >> MultiOutput(CleanFn(), main="kept", tags=("dropped",))
    out.kept, out.dropped  # as with beam.ParDo(CleanFn()).with_outputs("dropped", main="kept")

The DoFn (or plain function) is unchanged: it yields its main output as is and the others as
`TaggedOutput(tag, value)`. Beam's DaskRunner (2.77) gives every consumer of a
`with_outputs(...)` step the step's whole output, all tags mixed (reproduced without lmforge in
tests/integration/test_dask_runner.py, test_dask_runner_routes_tagged_outputs): the main output
then meets quarantine rows and tallies, and the first GroupByKey fails. Here the step yields
(tag, value) pairs in one PCollection and a FlatMap per tag keeps its own; runners that fuse
(the DirectRunner, Dataflow, Flink) run those filters in the same stage as the step, one
comparison per element and tag.
"""
from __future__ import annotations

from collections import namedtuple
from collections.abc import Callable, Iterable
from typing import Any

import apache_beam as beam
from apache_beam.pvalue import TaggedOutput


class _Tagging(beam.DoFn):
    """`fn` (a DoFn without finish_bundle outputs, or a function) -> (tag, value) for each of its outputs."""

    def __init__(self, fn: beam.DoFn | Callable[..., Iterable[Any]], main: str):
        self.fn, self.main = fn, main

    def setup(self) -> None:
        if isinstance(self.fn, beam.DoFn):
            self.fn.setup()

    def start_bundle(self) -> None:
        if isinstance(self.fn, beam.DoFn):
            self.fn.start_bundle()

    def teardown(self) -> None:
        if isinstance(self.fn, beam.DoFn):
            self.fn.teardown()

    def process(self, element, *args) -> Iterable[tuple[str, Any]]:  # no hint on args: Beam would check it against the call
        outputs = self.fn.process(element, *args) if isinstance(self.fn, beam.DoFn) else self.fn(element, *args)
        for out in outputs or ():
            yield (out.tag, out.value) if isinstance(out, TaggedOutput) else (self.main, out)


def _pick(pair: tuple[str, Any], tag: str) -> list[Any]:
    return [pair[1]] if pair[0] == tag else []


class MultiOutput(beam.PTransform):
    """`beam.ParDo(fn, *args).with_outputs(*tags, main=main)` as (tag, value) pairs split by one
    FlatMap per tag; returns a namedtuple of PCollections with fields `main, *tags`."""

    def __init__(self, fn: beam.DoFn | Callable[..., Iterable[Any]], *args: Any, main: str, tags: tuple[str, ...]):
        super().__init__()
        if isinstance(fn, beam.DoFn) and type(fn).finish_bundle is not beam.DoFn.finish_bundle:
            raise ValueError(f"{type(fn).__name__}: MultiOutput does not route finish_bundle outputs")
        self.fn, self.args, self.main, self.tags = fn, args, main, tuple(tags)

    def expand(self, pcoll):
        pairs = pcoll | "Tag" >> beam.ParDo(_Tagging(self.fn, self.main), *self.args)
        outputs = namedtuple("Outputs", (self.main, *self.tags))
        return outputs(*(pairs | f"Only_{tag}" >> beam.FlatMap(_pick, tag) for tag in (self.main, *self.tags)))
