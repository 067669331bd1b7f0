"""Source: vaderSentiment's human-scored sets -> ``samples/labeled/vader/``.

The ``*_GroundTruth.txt`` sentiment sets (id, mean human score, text) and the dataset's
``_README_.txt`` from ``additional_resources/hutto_ICWSM_2014.tar.gz`` in the pinned
vaderSentiment sdist (from PyPI). No WARC records come from this source. Licence: MIT; the
package's ``LICENSE.txt`` is copied both beside the data and to
``samples/licenses/vaderSentiment.txt``.
"""

from __future__ import annotations

import tarfile
from pathlib import Path

from .common import HERE, sdist_dir, write_if_changed

SDIST = ("vaderSentiment", "3.3.2")
LABELED = HERE / "labeled" / "vader"


def write_labeled() -> None:
    vsrc = sdist_dir(*SDIST)
    with tarfile.open(vsrc / "additional_resources" / "hutto_ICWSM_2014.tar.gz") as tf:
        for m in sorted(tf.getmembers(), key=lambda m: m.name):
            base = m.name.rsplit("/", 1)[-1]
            if base.endswith("_GroundTruth.txt") or base == "_README_.txt":
                write_if_changed(LABELED / base, tf.extractfile(m).read())
    write_if_changed(LABELED / "LICENSE.txt", (vsrc / "LICENSE.txt").read_bytes())


def write_licenses(lic: Path) -> None:
    write_if_changed(lic / "vaderSentiment.txt", (sdist_dir(*SDIST) / "LICENSE.txt").read_bytes())
