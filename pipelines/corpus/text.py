"""Pure text steps: decode bytes, extract main text from HTML, normalise, identify language.

HTML extraction uses resiliparse (`extract_plain_text(main_content=True)`). Measured against
trafilatura on the 23 newspaper4k gold pages (`lmforge bench extraction`): bag-of-words F1
0.891 vs 0.926, at 640 vs 37 pages/s. Recall is the same (0.997 vs 0.995); resiliparse keeps
more boilerplate, which the C4/Gopher/FineWeb line and page rules then remove, so we take the
17x speed.
Language id uses py3langid: its model ships inside the package (no download at run time).
"""
from __future__ import annotations

import codecs
import re
import unicodedata

_META_CHARSET = re.compile(rb"""<meta[^>]+charset\s*=\s*["']?([A-Za-z0-9_\-:.]+)""", re.I)


# Charset labels seen in real pages that Python's codec registry spells differently.
CHARSET_ALIASES = {"x-mac-cyrillic": "mac_cyrillic", "x-mac-roman": "mac_roman", "x-sjis": "shift_jis",
                   "x-euc-jp": "euc_jp", "windows-874": "cp874"}


class DecodeError(ValueError):
    """The payload's bytes cannot be decoded with its declared (or the default) charset."""


def decode_html(body: bytes, declared: str | None) -> str:
    """Decode with the HTTP charset, else a <meta charset>, else strict UTF-8.

    Undeclared non-UTF-8 pages raise DecodeError and are quarantined; charset detection
    (chardet-style) is left to issue 3, so no page is decoded by a guess today.
    """
    charset = declared
    if not charset:
        m = _META_CHARSET.search(body[:4096])
        charset = m.group(1).decode("ascii") if m else None
    if charset:
        charset = CHARSET_ALIASES.get(charset.lower(), charset)
        try:
            codecs.lookup(charset)
        except LookupError as e:
            raise DecodeError(f"unknown charset {charset!r}") from e
    try:
        return body.decode(charset or "utf-8", errors="strict")
    except UnicodeDecodeError as e:
        raise DecodeError(f"not valid {charset or 'utf-8'} (no other charset declared): {e}") from e


def html_to_text(html: str) -> str:
    from resiliparse.extract.html2text import extract_plain_text

    return extract_plain_text(html, main_content=True, alt_texts=False, links=False, list_bullets=False)


_SPACES = re.compile(r"[ \t\u00a0\u2000-\u200b\u3000]+")
_BLANK_LINES = re.compile(r"\n{2,}")


def normalize_text(text: str) -> str:
    """NFC, one space between words, no blank or padded lines."""
    text = unicodedata.normalize("NFC", text).replace("\r\n", "\n").replace("\r", "\n")
    lines = (_SPACES.sub(" ", ln).strip() for ln in text.split("\n"))
    return _BLANK_LINES.sub("\n", "\n".join(ln for ln in lines if ln))


_identifier = None


def identify_language(text: str) -> tuple[str, float]:
    """(ISO 639-1 code, probability) from py3langid, on the first 2,000 characters."""
    global _identifier  # a per-process model cache, loaded once (the model file is ~2 MB)
    if _identifier is None:
        from py3langid.langid import _load_identifier

        _identifier = _load_identifier(norm_probs=True)
    lang, prob = _identifier.classify(text[:2000])
    return lang, float(prob)
