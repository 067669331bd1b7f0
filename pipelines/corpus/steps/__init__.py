"""The cleaning steps, one file per rule family, in the spirit of datatrove (one step per file).

  base.py                the contract: Step, Page, filter_step; helpers the families share
  registry.py            STEPS, the chain in order (the one place it is defined)
  url_filter.py          FineWeb's URL filter (block lists, banned words in the URL): first, before any text is read
  c4.py                  C4 line and page rules; C4 bad words (two steps, one config: `c4`)
  language.py            language id (py3langid); its options are CorpusConfig's own
  gopher_repetition.py   Gopher repetition (Table A1)
  gopher_quality.py      Gopher quality (A.1.1)
  fineweb.py             FineWeb's custom filters
  decontaminate.py       pages sharing an n-gram with an evaluation set's items (core: pipelines/corpus/decont.py)
  pii.py                 e-mail and IP addresses replaced by placeholders (FineWeb's last step)

Each family file holds its typed config (a field of CorpusConfig named as its step), its rules as
pure functions and its step. The Gopher and FineWeb rules count words alike:

Words are spaCy's English tokens, punctuation included, as datatrove counts them (words.py: spaCy's
tokenizer re-implemented over its exported rules; identical tokens on all 8,619 pages of `bench
corpus`). Where a rule is about words proper, tokens made only of punctuation are left out, as
datatrove's "non-symbol words" (word count and mean word length); the ratios with words in the
denominator (hashes, ellipses, alphabetic words) count every token, as datatrove does. Earlier
lmforge counted `\\w+` runs, which left punctuation out of every ratio and changed 5% of the crawl
pages' Gopher decisions against datatrove's. datatrove itself was considered as a dependency: it
pulls in NLTK/spaCy (~90% of its filter time is spaCy's tokenizer) and its filters are pipeline
steps over its own Document type, not functions we could call on a string.
"""
