"""Source: chardet's test corpus -> ``samples/crawl/encodings-000.warc.gz``.

Text and HTML files in legacy encodings from ``tests/`` of the pinned chardet sdist (from PyPI;
chardet 7.x sdists no longer ship the test corpus, 5.2.0 does). Each is served with its true
charset in the Content-Type header, except two "non-UTF-8 page" bad records that declare no
charset anywhere. Licence: the package is LGPL-2.1+ (``samples/licenses/chardet.txt``); its
``tests/README.txt`` says "Each feed is copyright its respective publisher" and is copied to
``samples/licenses/chardet-tests-README.txt``.
"""

from __future__ import annotations

from pathlib import Path

from .common import Page, lang_of, plain_text, sdist_dir, write_if_changed

# chardet 7.x sdists no longer ship the test corpus; 5.2.0 does.
SDIST = ("chardet", "5.2.0")
DESCRIPTION = "text/HTML files in legacy encodings from chardet's test corpus"

# (path under tests/, header charset or None, python codec)
# header None => "Content-Type: text/html" without charset (a bad record).
ENCODING_PAGES = [
    ("KOI8-R/_ude_1.txt", "koi8-r", "koi8_r"),
    ("windows-1251-russian/_ude_1.txt", "windows-1251", "cp1251"),
    ("IBM866/_ude_1.txt", "ibm866", "cp866"),
    ("MacCyrillic/_ude_1.txt", "x-mac-cyrillic", "mac_cyrillic"),
    ("iso-8859-5-russian/_chromium_ISO-8859-5_with_no_encoding_specified.html", "iso-8859-5", "iso8859_5"),
    ("windows-1251-russian/_chromium_windows-1251_with_no_encoding_specified.html", "windows-1251", "cp1251"),
    ("SHIFT_JIS/_chromium_Shift-JIS_with_no_encoding_specified.html", "shift_jis", "shift_jis"),
    ("SHIFT_JIS/_ude_2.txt", "shift_jis", "shift_jis"),
    ("EUC-JP/_ude_1.txt", "euc-jp", "euc_jp"),
    ("EUC-KR/_ude_euc2.txt", "euc-kr", "euc_kr"),
    ("Big5/_ude_1.txt", "big5", "big5"),
    ("GB2312/_mozilla_bug171813_text.html", "gb2312", "gb2312"),
    ("iso-8859-1/_ude_2.txt", "iso-8859-1", "latin_1"),
    ("iso-8859-2-czech/_ude_1.txt", "iso-8859-2", "iso8859_2"),
    ("iso-8859-7-greek/_ude_1.txt", "iso-8859-7", "iso8859_7"),
    ("iso-8859-9-turkish/wikitop_tr_ISO-8859-9.txt", "iso-8859-9", "iso8859_9"),
    ("windows-1250-polish/_ude_1.txt", "windows-1250", "cp1250"),
    ("windows-1255-hebrew/_ude_he2.txt", "windows-1255", "cp1255"),
    ("windows-1256-arabic/_chromium_windows-1256_with_no_encoding_specified.html", "windows-1256", "cp1256"),
    # the two "non-UTF-8 page" bad records: no charset anywhere
    ("KOI8-R/_chromium_KOI8-R_with_no_encoding_specified.html", None, "koi8_r"),
    ("windows-1252/_mozilla_bug421271_text.html", None, "cp1252"),
]


def encoding_pages():
    base = sdist_dir(*SDIST) / "tests"
    pages = []
    for rel, header_cs, codec in ENCODING_PAGES:
        body = (base / rel).read_bytes()
        text_src = body.decode(codec)               # strict: must decode with the true charset
        if header_cs is None:
            try:
                body.decode("utf-8")
                raise SystemExit(f"{rel} is valid UTF-8; cannot be a non-UTF-8 bad record")
            except UnicodeDecodeError:
                pass
            if b"charset" in body.lower() or b"encoding=" in body.lower():
                raise SystemExit(f"{rel} declares a charset in its body")
        text = plain_text(text_src)
        url = f"https://chardet-tests.invalid/{rel}"
        origin = f"chardet-{SDIST[1]}/tests/{rel} (true charset: {codec})"
        pages.append(Page(url, body, header_cs, "chardet-tests", "chardet", origin, lang_of(text), text))
    return pages


def write_licenses(lic: Path) -> None:
    chardet_dir = sdist_dir(*SDIST)
    write_if_changed(lic / "chardet.txt", (chardet_dir / "LICENSE").read_bytes())
    write_if_changed(lic / "chardet-tests-README.txt", (chardet_dir / "tests" / "README.txt").read_bytes())
