"""Encoded bytes entering every GroupByKey and CoGroupByKey of the corpus stage, by input PCollection.

    python infra/tools/profile_shuffles.py OUT.json -- --input DIR --output DIR [corpus options]

Runs `lmforge corpus` on the DirectRunner (in_memory, one process) with Beam's FnApiRunner
GroupingBuffer instrumented: every encoded element appended to a shuffle buffer is counted under
the unique name of the PCollection that feeds it. Writes {name: bytes} to OUT.json and prints the
top 40 and the total. docs/SCALE.md 1.3 is built from two such profiles
(docs/benchmarks/shuffle-profile-*.json). It patches Beam internals (apache-beam 2.77): a
measuring tool, not part of the stage.
"""
import collections
import inspect
import json
import sys

from apache_beam.runners.portability.fn_api_runner import execution

BYTES = collections.Counter()
ELEMS = collections.Counter()
NAME = {}
_init = execution.GroupingBuffer.__init__
_append = execution.GroupingBuffer.append


def init(self, *a, **k):
    _init(self, *a, **k)
    f = inspect.currentframe().f_back
    name = "?"
    try:
        ctx = f.f_locals["self"].execution_context
        pc = f.f_locals.get("input_pcoll")
        name = ctx.pipeline_components.pcollections[pc].unique_name
    except Exception:
        pass
    NAME[id(self)] = name


def append(self, data):
    BYTES[NAME.get(id(self), "?")] += len(data)
    return _append(self, data)


execution.GroupingBuffer.__init__ = init
execution.GroupingBuffer.append = append

out_json = sys.argv[1]
args = sys.argv[sys.argv.index("--") + 1:]
from lmforge.cli import main  # noqa: E402

try:
    main(["corpus", *args])
finally:
    json.dump(dict(BYTES.most_common()), open(out_json, "w"), indent=1)
    tot = sum(BYTES.values())
    for k, v in BYTES.most_common(40):
        print(f"{v/1e6:10.2f} MB  {k}")
    print(f"{tot/1e6:10.2f} MB  total")
