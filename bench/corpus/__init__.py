"""The corpus stage's benches: `lmforge bench corpus` (`cleaning.py`: cleaning speed, MinHash and near-duplicates
against datatrove, datasketch and rensa; with `agreement.py` on `encyclopedic.py`'s texts, `url_pii.py`, `decont.py`
and `end_to_end.py`), `extraction` (resiliparse against trafilatura), `langid`, `hostile` (crafted 1 MB pages) and
`scale` (10k to 1M documents, inputs from `scale_inputs.py`). It may import bench.kit and the layers below bench,
never another bench subpackage."""
