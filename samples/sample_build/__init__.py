"""The pieces of ``samples/build_sample.py``, the script that rebuilds lmforge's bundled sample.

One module per source the sample is built from -- ``debian_docs`` (Debian documentation
packages), ``newspaper4k`` (news pages and gold texts), ``chardet_tests`` (legacy encodings),
``vader`` (human-scored sentiment sets) and ``warc_npm`` (Common Crawl fixtures) -- and the
shared parts: ``common`` (paths, the ``Page`` record, hashing, the download helpers), ``warc``
(writing and reading WARC files), ``tables`` (``manifest.tsv`` and ``duplicates.tsv``),
``tiny`` (the ``tests/data/tiny`` slice) and ``checks`` (verification and the summary).
The driver, ``samples/build_sample.py``, runs them in order; run that, not this package.
"""
