"""Pure text steps: decode bytes, extract main text from HTML, normalise, identify language.

Decoding follows the order a browser uses (WHATWG Encoding Standard): a byte-order mark, then
the HTTP charset, then a <meta charset>, each decoded strictly. An undeclared page that is valid
UTF-8 is UTF-8. Otherwise, or when every declared charset fails to decode, charset-normalizer
detects the encoding among the ones a browser can decode; a page is quarantined only when no
such encoding decodes it with a mess ratio under charset-normalizer's default 0.2. On chardet's
21 legacy-encoding test pages (samples/crawl/encodings-000.warc.gz) detection alone, with every
declaration ignored, reproduces the true charset's text exactly on 19 pages (test_charset_badwords).
HTML extraction uses resiliparse (`extract_plain_text(main_content=True)`). Measured against
trafilatura on the 23 newspaper4k gold pages (`lmforge bench extraction`): bag-of-words F1
0.891 vs 0.926, at 640 vs 37 pages/s. Recall is the same (0.997 vs 0.995); resiliparse keeps
more boilerplate, which the C4/Gopher/FineWeb line and page rules then remove, so we take the
17x speed. It separates <p> and <h1>-<h6> blocks with a blank line and other blocks (<div>,
<li>, <td>, <br>) with one newline, so paragraphs survive where the page marks them with <p>.
Language id uses py3langid: its model ships inside the package (no download at run time).
"""
from __future__ import annotations

import codecs
import re
import unicodedata
from dataclasses import dataclass

_META_CHARSET = re.compile(rb"""<meta[^>]+charset\s*=\s*["']?([A-Za-z0-9_\-:.]+)""", re.I)

# Charset labels seen in real pages that Python's codec registry spells differently, and the
# WHATWG label mapping for the Latin-1 family: browsers decode "iso-8859-1" and "us-ascii" as
# windows-1252, so bytes 0x80-0x9F are curly quotes and dashes, not C1 control characters.
CHARSET_ALIASES = {"x-mac-cyrillic": "mac_cyrillic", "x-mac-roman": "mac_roman", "x-sjis": "shift_jis",
                   "x-euc-jp": "euc_jp", "windows-874": "cp874",
                   **dict.fromkeys(("iso-8859-1", "iso8859-1", "iso_8859-1", "latin1", "latin-1", "l1",
                                    "us-ascii", "ascii", "cp819", "ibm819", "x-cp1252"), "cp1252")}

# The encodings of the WHATWG Encoding Standard, i.e. the ones a browser can decode, as Python
# codecs (with the supersets browsers use: Shift_JIS -> cp932, EUC-KR -> cp949, GBK -> gb18030,
# Big5 -> big5hkscs). Detection considers only these: a page in any other encoding would be
# unreadable to its visitors, and without the limit charset-normalizer reads a French
# ISO-8859-1 page as DOS cp775. The order breaks ties between equally good candidates:
# windows-1252 first, the HTML standard's fallback for most locales. UTF-16 is left to the BOM
# and ISO-2022-JP is 7-bit, so it passes as UTF-8 before detection is asked.
WEB_ENCODINGS = ("utf_8", "cp1252", "cp1251", "cp1250", "cp1253", "cp1254", "cp1255", "cp1256", "cp1257", "cp1258",
                 "cp874", "iso8859_2", "iso8859_3", "iso8859_4", "iso8859_5", "iso8859_6", "iso8859_7", "iso8859_8",
                 "iso8859_10", "iso8859_13", "iso8859_14", "iso8859_15", "iso8859_16", "koi8_r", "koi8_u", "cp866",
                 "mac_cyrillic", "mac_roman", "gb18030", "big5hkscs", "euc_jp", "cp932", "cp949")
_RANK = {e: i for i, e in enumerate(WEB_ENCODINGS)}
_BOMS = ((codecs.BOM_UTF8, "utf-8"), (codecs.BOM_UTF16_LE, "utf-16-le"), (codecs.BOM_UTF16_BE, "utf-16-be"))


class DecodeError(ValueError):
    """No declared charset decodes the payload and detection finds no credible encoding."""


@dataclass(frozen=True)
class Decoded:
    """A decoded page and how its charset was chosen."""

    text: str
    charset: str
    """The Python codec that decoded the bytes (its canonical name, e.g. "koi8-r", "cp1252")."""
    method: str
    """How it was chosen: "bom", "http", "meta", "default" (undeclared, valid UTF-8) or "detected"."""
    rejected: str = ""
    """Declared charsets that did not decode the bytes, with the reason ("" when none failed)."""


def codec_for(label: str) -> str | None:
    """Python codec name for a charset label, or None when Python has no such codec."""
    label = label.strip().lower()
    try:
        return codecs.lookup(CHARSET_ALIASES.get(label, label)).name
    except LookupError:
        return None


def declared_charsets(body: bytes, http_charset: str | None) -> list[tuple[str, str, int]]:
    """(label, method, bytes to skip) in the browser's order of precedence: BOM, HTTP, <meta>."""
    out = [(codec, "bom", len(bom)) for bom, codec in _BOMS if body.startswith(bom)][:1]
    if http_charset:
        out.append((http_charset, "http", 0))
    m = _META_CHARSET.search(body[:4096])
    if m:
        out.append((m.group(1).decode("ascii"), "meta", 0))
    return out


def detect_charset(body: bytes) -> str | None:
    """The codec charset-normalizer finds for undeclared bytes, among WEB_ENCODINGS; None when
    no candidate decodes them with a mess ratio under 0.2 (binary data, mixed encodings).
    Ties in its own ordering go to the candidate listed first in WEB_ENCODINGS."""
    from charset_normalizer import from_bytes

    matches = list(from_bytes(body, cp_isolation=list(WEB_ENCODINGS)))
    if not matches:
        return None
    best = matches[0]
    tied = [m for m in matches if not (best < m or m < best)]
    # could_be_from_charset lists every candidate that gives the same text as this match.
    pick = min(tied, key=lambda m: min(_RANK.get(e, len(_RANK)) for e in m.could_be_from_charset))
    return min(pick.could_be_from_charset, key=lambda e: _RANK.get(e, len(_RANK)))


def decode_html(body: bytes, declared: str | None) -> Decoded:
    """Decode a page: BOM, HTTP charset (`declared`), <meta charset>, each strictly; else UTF-8
    when nothing is declared and the bytes are valid UTF-8; else detect (see the module doc).
    Raises DecodeError, naming what failed, when detection finds nothing credible."""
    rejected = []
    candidates = declared_charsets(body, declared)
    for label, method, skip in candidates:
        codec = codec_for(label)
        if codec is None:
            rejected.append(f"{method} charset {label!r} is unknown")
            continue
        try:
            return Decoded(body[skip:].decode(codec), codec, method, "; ".join(rejected))
        except UnicodeDecodeError as e:
            rejected.append(f"{method} charset {label!r} fails at byte {e.start} ({e.reason})")
    if not candidates:
        try:
            return Decoded(body.decode("utf-8"), "utf-8", "default")
        except UnicodeDecodeError as e:
            rejected.append(f"no charset declared and not valid UTF-8 at byte {e.start}")
    codec = detect_charset(body)
    if codec is None:
        raise DecodeError("; ".join(rejected) + "; charset-normalizer finds no web encoding that decodes it "
                          "with a mess ratio under 0.2")
    return Decoded(body.decode(codec), codecs.lookup(codec).name, "detected", "; ".join(rejected))


# <ol>/<ul>/<menu>/<dir>, opening or closing, up to its ">" (or the next "<": a scan never passes one,
# so finding every tag stays linear on a page of "<ol<ol<ol...").
_LIST_TAG = re.compile(r"<(/?)(?:ol|ul|menu|dir)\b[^<>]*>?", re.I)
MAX_LIST_DEPTH = 8
"""resiliparse indents a list item two spaces per enclosing list, so lists nested n deep cost n^2
characters: 180 kB of `<ol><li>a` (20,000 deep) extracted to 400 million characters, and a 1 MiB
page of them would need 13 GB. List tags deeper than this are dropped before extraction: their
items' text stays, their indentation (which normalize_text strips anyway) goes. Then a line, which
costs at least 4 characters of HTML (`<br>`), gains at most 2 * 8 = 16 spaces, so the extracted
text is at most 5 times the page's length, and normalised at most its length (test_capped_readers)."""


def flatten_deep_lists(html: str, max_depth: int = MAX_LIST_DEPTH) -> str:
    """`html` without its list tags nested deeper than `max_depth`, counting tags as written (a list
    left unclosed counts as open, which can only flatten more)."""
    depth, parts, start = 0, [], 0
    for m in _LIST_TAG.finditer(html):
        closing = bool(m.group(1))
        level = depth if closing else depth + 1  # the nesting level of the list this tag opens or closes
        depth = max(0, depth - 1) if closing else depth + 1
        if level > max_depth:
            parts.append(html[start:m.start()])
            start = m.end()
    return "".join([*parts, html[start:]]) if parts else html


def html_to_text(html: str) -> str:
    from resiliparse.extract.html2text import extract_plain_text

    return extract_plain_text(flatten_deep_lists(html), main_content=True, alt_texts=False, links=False, list_bullets=False)


_SPACE = r"[ \t\u00a0\u2000-\u200b\u3000]"
# Every run of _SPACE characters becomes one " "; a lone " " is already that, so the expression matches
# only runs that change (a non-" " first, or two or more): half the time of substituting every space.
_SPACES = re.compile(rf"[\t\u00a0\u2000-\u200b\u3000]{_SPACE}*| {_SPACE}+")
_BLANK_LINES = re.compile(r"\n{3,}")
# Whitespace other than a newline or a space (str.isspace's, which str.strip strips), and U+200B, which
# _SPACE holds and str.isspace does not. Looked for one character at a time with `in` (a memchr-like
# scan): 7x faster than one regular expression with these in a class.
_ODD_SPACES = tuple(c for c in map(chr, range(0x3001)) if c.isspace() and c not in " \n") + ("\u200b",)
_ODD_ASCII = tuple(c for c in _ODD_SPACES if c.isascii())


def _unusual_space(text: str) -> bool:
    """True if `text` has two spaces in a row or any whitespace but " " and "\n"."""
    return "  " in text or any(c in text for c in (_ODD_ASCII if text.isascii() else _ODD_SPACES))


def normalize_text(text: str) -> str:
    """NFC, one space between words, no padded lines, one blank line between paragraphs
    (runs of blank lines collapse to one; none at the start or end)."""
    text = unicodedata.normalize("NFC", text).replace("\r\n", "\n").replace("\r", "\n")
    if not _unusual_space(text):
        # Only single spaces and newlines (most pages): a line's padding is a space beside a newline
        # or at either end, so four replaces do what the split/strip/join below does (tests/unit/
        # test_corpus_core.py compares the two on every sample-crawl page); a third of the time.
        text = text.replace(" \n", "\n").replace("\n ", "\n").strip(" ")
        return (_BLANK_LINES.sub("\n\n", text) if "\n\n\n" in text else text).strip("\n")
    # one pass over the whole text (_SPACES has no newline, so no run crosses a line), not one per
    # line: 3.2 M lines of the bench corpus end-to-end input cost 3 s as separate calls
    lines = (ln.strip() for ln in _SPACES.sub(" ", text).split("\n"))
    return _BLANK_LINES.sub("\n\n", "\n".join(lines)).strip("\n")


_identifier = None


def identify_language(text: str) -> tuple[str, float]:
    """(ISO 639-1 code, probability) from py3langid, on the first 2,000 characters."""
    global _identifier  # a per-process model cache, loaded once (the model file is ~2 MB)
    if _identifier is None:
        from pipelines.corpus.language_id import load

        _identifier = load()
    lang, prob = _identifier.classify(text[:2000])
    return lang, float(prob)
