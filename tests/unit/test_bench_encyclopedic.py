"""FOLDOC entries as bench corpus's short encyclopedic texts (bench/corpus/encyclopedic.py).
The excerpt is FOLDOC's "abstract data type" entry as dict-foldoc ships it (GFDL 1.1+, (c) 1993 Denis Howe)."""
from __future__ import annotations

from bench.corpus.encyclopedic import parse

ENTRY = """abstract data type
ADT

   <programming> (ADT) A kind of {data abstraction} where a
   type's internal form is hidden behind a set of {access
   functions}.  Values of the type are created and inspected only
   by calls to the access functions.

   {Objects} and ADTs are both forms of data abstraction, but
   objects are not ADTs.

   (2003-07-03)

AOS

   1. <programming> A PDP-10 instruction that took any memory
   location and added 1 to it.

   (1994-11-08)
"""


def test_entries_become_paragraph_lines_without_markup():
    entries = parse(ENTRY)
    assert [h for h, _ in entries] == ["abstract data type", "AOS"]  # "ADT", the alternative headword, is not an entry
    text = entries[0][1]
    assert text.split("\n") == [
        "(ADT) A kind of data abstraction where a type's internal form is hidden behind a set of access functions.  "
        "Values of the type are created and inspected only by calls to the access functions.",
        "Objects and ADTs are both forms of data abstraction, but objects are not ADTs."]
    assert entries[1][1] == "1. A PDP-10 instruction that took any memory location and added 1 to it."
