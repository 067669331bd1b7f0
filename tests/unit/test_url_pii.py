"""The URL filter and PII steps on real lines: UT1-listed domains, the sample crawl's URLs, and the
addresses the Debian handbook's pages print."""
from __future__ import annotations

import random

import pytest

from pipelines.corpus.clean import DROPPED, KEPT, process_document
from pipelines.corpus.config import CorpusConfig
from pipelines.corpus.readers import read_file
from pipelines.corpus.steps.pii import (
    _LOCAL,
    EMAIL,
    EMAIL_REPLACEMENTS,
    IPV4,
    IPV4_REPLACEMENTS,
    IPV6,
    IPV6_REPLACEMENTS,
    PiiConfig,
    _is_ip,
    email_matches,
    scrub,
)
from pipelines.corpus.steps.url_filter import UrlFilterConfig, read_list, url_decision
from pipelines.corpus.text import decode_html
from schemas.records import RawDocument
from tests.fixtures import ROOT, vader_texts

DEFAULT = UrlFilterConfig()
# The Debian handbook's DNS page (samples/crawl/debian-docs-001.warc.gz, sect.domain-name-servers.html)
HANDBOOK = "; admin.falcot.com. => zone contact: admin@falcot.com\n@ IN A 212.94.201.10\nns IN A 212.94.201.10"


@pytest.mark.parametrize("url, reason, detail", [
    ("http://www.pornhub.com/view_video.php", "url_domain", "pornhub.com"),   # UT1 adult
    ("https://0-1avsex.com/", "url_domain", "0-1avsex.com"),                  # the list's first entry
    # on UT1's URL list as host/path: lmforge also compares the URL without its scheme
    ("http://0149614511.strimbat.fr/porno-anal-escort-granville-faire-sa-salope-baise-une-vache-video-gratuite-x-escort-girl-auxerre",
     "url_listed", None),
    ("https://gimp-help-ru.docs.invalid/gimp-using-paths-stroking.html", "url_banned_word", "stroking"),  # the sample crawl's one
    ("https://example.org/sexy-babes-nude", "url_soft_banned_words", "babes nude sexy"),
])
def test_blocked_urls_are_dropped_by_the_first_rule_they_fail(url, reason, detail):
    got = url_decision(url, DEFAULT)
    assert got == reason
    assert detail is None or got.detail == detail


@pytest.mark.parametrize("url", ["https://debian-handbook.docs.invalid/en-US/sect.domain-name-servers.html",
                                 "https://news.bbc.co.uk/sport", "https://docs.python.org/3/library/re.html", ""])
def test_ordinary_urls_and_pages_without_a_url_pass(url):
    assert url_decision(url, DEFAULT) is None


def test_user_lists_block_and_allow(tmp_path):
    (tmp_path / "block.txt").write_text("# my own\npython.org\nwiki.debian.org\n\n")
    (tmp_path / "allow.txt").write_text("pornhub.com\n")
    own = UrlFilterConfig(integrated_lists=False, block_domains=[str(tmp_path / "block.txt")])
    assert url_decision("https://docs.python.org/3/", own) == "url_domain"
    assert url_decision("https://wiki.debian.org/DebianInstaller", own) == "url_subdomain"
    assert url_decision("https://www.debian.org/", own) is None
    # a host outside the Public Suffix List (.invalid, the sample crawl's) has no registered domain:
    # only the word rules see it, in datatrove too
    assert url_decision("https://debian-handbook.docs.invalid/x.html", own) is None
    assert url_decision("http://www.pornhub.com/", own) is None  # UT1 off
    allowed = UrlFilterConfig(allow_domains=[str(tmp_path / "allow.txt")])
    assert url_decision("http://www.pornhub.com/", allowed) is None
    assert read_list(tmp_path / "block.txt", normalized=False) == {"python.org", "wiki.debian.org"}


def test_an_unreadable_list_fails_naming_it(tmp_path):
    (tmp_path / "bad.txt").write_bytes(b"\xff\xfe\x00bad")
    with pytest.raises(ValueError, match=r"cannot read the list .*bad\.txt"):
        url_decision("http://a.com/", UrlFilterConfig(block_domains=[str(tmp_path / "bad.txt")]))
    with pytest.raises(ValueError, match=r"cannot read the list .*missing\.txt"):
        url_decision("http://a.com/", UrlFilterConfig(banned_words=[str(tmp_path / "missing.txt")]))


def test_the_handbook_addresses_are_replaced_and_counted():
    text, counts = scrub(HANDBOOK, PiiConfig())
    assert text == ("; admin.falcot.com. => zone contact: email@example.com\n"
                    "@ IN A 22.214.171.124\nns IN A 126.96.36.199")
    assert counts == {"pii_email": 1, "pii_ipv4": 2}


def test_private_reserved_and_version_like_addresses():
    # private, loopback and documentation ranges are kept; 6.3.6.2 is a section number but a public
    # address to datatrove's rule too, so it is replaced as FineWeb replaced it
    text, counts = scrub("gateway 192.168.1.1, loopback 127.0.0.1, see 6.3.6.2", PiiConfig())
    assert text == "gateway 192.168.1.1, loopback 127.0.0.1, see 22.214.171.124" and counts == {"pii_ipv4": 1}
    assert scrub("gateway 192.168.1.1", PiiConfig(public_only=False))[0] == "gateway 22.214.171.124"
    six = "fe00::0 ip6-localnet; ff02::1 ip6-allnodes; doc 2001:db8::10; host 2a01:4f8:0:a0::2 up"  # the first two: Debian's /etc/hosts
    text, counts = scrub(six, PiiConfig())
    assert text == "fe00::0 ip6-localnet; ff02::1 ip6-allnodes; doc 2001:db8::10; host 2001:db8::1 up" and counts == {"pii_ipv6": 1}
    assert scrub(six, PiiConfig(ipv6=False))[1] == {}
    assert scrub(HANDBOOK, PiiConfig(emails=False))[1] == {"pii_ipv4": 2}


def test_both_steps_in_the_chain():
    page = "\n\n".join([HANDBOOK.replace("\n", " and ") + "." for _ in range(1)] +
                       ["The zone file names the servers that answer for the domain, and the mail host that receives "
                        "its mail; every record ends in a full stop so that resolvers read it as an absolute name."] * 3)
    off = {"c4": {"enabled": False}, "gopher_repetition": {"enabled": False}, "gopher_quality": {"enabled": False},
           "fineweb": {"enabled": False}}
    cfg = CorpusConfig(input=["x"], output="y", languages=["en"], **off)
    status, rec = process_document(RawDocument("1", "https://debian-handbook.docs.invalid/dns.html", "f", 0, text=page), cfg)
    assert status == KEPT and "admin@falcot.com" not in rec["text"] and "212.94.201.10" not in rec["text"]
    assert [(n.kind, n.count) for n in rec["notes"]] == [("pii_email", 1), ("pii_ipv4", 2)]
    status, (_, reason, _) = process_document(RawDocument("2", "http://www.pornhub.com/x", "f", 0, text=page), cfg)
    assert status == DROPPED and reason == "url_domain" and reason.detail == "pornhub.com"
    cfg = CorpusConfig(input=["x"], output="y", languages=["en"], url_filter={"enabled": False}, pii={"enabled": False}, **off)
    status, rec = process_document(RawDocument("2", "http://www.pornhub.com/x", "f", 0, text=page), cfg)
    assert status == KEPT and "admin@falcot.com" in rec["text"] and rec["notes"] == ()


@pytest.mark.parametrize("content, message", [
    ("", r"empty\.jsonl: no records"),
    ('{"text": "a test sentence"}\n', r"empty\.jsonl:line 1: no 'split' column"),
    (None, r"empty\.jsonl: cannot read the evaluation set"),
])
def test_bad_evaluation_sets_and_lists_fail_the_stage_before_it_writes(tmp_path, content, message):
    from pipelines.corpus.stage import run

    if content is not None:
        (tmp_path / "empty.jsonl").write_text(content)
    cfg = CorpusConfig(input=["samples/crawl/news-000.warc.gz"], output=str(tmp_path / "out"),
                       decontaminate={"files": [str(tmp_path / "empty.jsonl")]})
    with pytest.raises(ValueError, match=message):
        run(cfg)
    assert not (tmp_path / "out" / "data").exists()
    with pytest.raises(ValueError, match=r"cannot read the list .*nothere\.txt"):
        run(CorpusConfig(input=["samples/crawl/news-000.warc.gz"], output=str(tmp_path / "out"),
                         url_filter={"block_urls": [str(tmp_path / "nothere.txt")]}))


# --- e-mails: email_matches against datatrove's EMAIL.finditer, on every input ---------------------------------------

def _datatrove_sub(text, pattern, replacements, valid=None):
    """The step's replacement before email_matches: `pattern.sub`, a placeholder per valid match in turn."""
    n = 0

    def sub(m):
        nonlocal n
        if valid is not None and not valid(m.group(0)):
            return m.group(0)
        n += 1
        return replacements[(n - 1) % len(replacements)]

    return pattern.sub(sub, text), n


def _datatrove_scrub(text, cfg):
    """`scrub` before email_matches: every kind through `pattern.sub`."""
    counts = {}
    if cfg.emails and "@" in text:
        text, counts["pii_email"] = _datatrove_sub(text, EMAIL, EMAIL_REPLACEMENTS)
    if cfg.ipv4 and "." in text:
        text, counts["pii_ipv4"] = _datatrove_sub(text, IPV4, IPV4_REPLACEMENTS,
                                                  lambda s: _is_ip(s, 4, cfg.public_only))
    if cfg.ipv6 and ("::" in text or text.count(":") >= 7):
        text, counts["pii_ipv6"] = _datatrove_sub(text, IPV6, IPV6_REPLACEMENTS,
                                                  lambda s: _is_ip(s, 6, cfg.public_only))
    return text, {k: v for k, v in counts.items() if v}


def _assert_same(text):
    spans = [(m.span(), m.group()) for m in email_matches(text)]
    assert spans == [(m.span(), m.group()) for m in EMAIL.finditer(text)], text
    for cfg in (PiiConfig(), PiiConfig(public_only=False)):
        assert scrub(text, cfg) == _datatrove_scrub(text, cfg), text


# Characters that steer EMAIL: local-part characters and dots (runs, "..", a trailing dot), word and non-word
# characters on either side of a boundary ('é' is a word character outside the local part, '%' and '-' are
# local-part characters that are not word characters), '@', and what a bracketed IPv4 literal holds.
CHARS = "a-._+@ \n1Z%[]:é_25"
PIECES = ["a", "ab", "a.b", "@", "..", ".", "-", "x@y.z", "a@b.c-d", "[1.2.3.4]", "[1.1.1.a:]", "[255.0.0.1", "é", " ",
          "user.name+tag@mail.example.co.uk", "@@", "a@b", "0", "a@[10.0.0.1]", "!", "~", "ß", "_", "8.8.8.8",
          "2a01:4f8:0:a0::2", "admin@falcot.com"]


def generated(seed: int, count: int) -> list[str]:
    """`count` strings, half of random characters of CHARS (up to 40), half of up to 15 PIECES or characters."""
    rng = random.Random(seed)
    out = []
    for i in range(count):
        if i % 2:
            out.append("".join(rng.choice(CHARS) for _ in range(rng.randint(0, 40))))
        else:
            out.append("".join(rng.choice(PIECES if rng.random() < 0.7 else CHARS) for _ in range(rng.randint(0, 15))))
    return out


def html_pages(path) -> list[str]:
    """The decoded HTML of each page of a WARC file that has an '@' (mailto: links, addresses in the markup)."""
    pages = (decode_html(d.html, d.charset).text for d in read_file(str(path)) if isinstance(d, RawDocument) and d.html)
    return [p for p in pages if "@" in p]


def test_email_matches_is_emails_local_part_cut_from_it():
    assert EMAIL.pattern.startswith(rf"\b[{_LOCAL}]+(?:\.[{_LOCAL}]+)*@")


def test_email_matches_finds_what_datatrove_finds_on_generated_strings():
    texts = generated(0, 20_000)
    assert sum(1 for t in texts if EMAIL.search(t)) > 4_000  # addresses are found, not only misses
    for text in texts:
        _assert_same(text)


def test_email_matches_finds_what_datatrove_finds_on_real_pages():
    # the Debian handbook's pages with an '@' (81, 1.3 MB of HTML: 22 addresses), the tiny crawl's, and VADER's
    # tweets (@mentions, not addresses)
    texts = html_pages(ROOT / "samples" / "crawl" / "debian-docs-001.warc.gz")
    texts += html_pages(ROOT / "tests" / "data" / "tiny" / "tiny.warc.gz")
    texts += [t for t in vader_texts("tweets", 10**6) if "@" in t] + [HANDBOOK]
    assert sum(1 for t in texts for _ in EMAIL.finditer(t)) >= 25
    for text in texts:
        _assert_same(text)


def _fill(unit: str, head: str = "", tail: str = ""):
    return lambda n: head + unit * ((n - len(head) - len(tail)) // len(unit)) + tail


# Pages on which EMAIL.finditer is quadratic: each word boundary in a long run of local-part characters and dots
# restarts the match and rescans the run (32 KB of "a-a-a-..." take 27 s, so 1 MB some 8 hours).
CRAFTED = {
    "a-a-a-": _fill("a-"), "a.a.a.": _fill("a."), "a!a!a!": _fill("a!"), "a+b=": _fill("a+b="),
    "a.a-": _fill("a.a-"), "-a.": _fill("-a."), "é-a-a": _fill("-a", "é"),
    "base64": _fill("d09GRgABAAAAAisoABYA+/9z="),  # a WOFF font inlined in a page of samples/crawl/news-000
    "-a-a@": _fill("-a", tail="@"), "a-a-a@-": _fill("a-", tail="a@-"), "a.a.a@-": _fill("a.", tail="a@-"),
    "a@a-a-a-": _fill("a-", "a@"), "x@a-a-a@": _fill("a-", "x@", "a@"), "@a-a-a": _fill("a-", "@"),
    "x@a-a-a.": _fill("a-", "x@", "a."), "x@[1.1.1.a-": _fill("a-", "x@[1.1.1."), "x@[1.1.1.1.": _fill("1.", "x@["),
    # fast in EMAIL too, kept as the shapes first suspected
    "----@": _fill("----@"), "aaaa": _fill("a"), "aaaa@": _fill("a", tail="@"), "@aaaa": _fill("a", "@"),
    "a@a@a@": _fill("a@"), "a@a.a.a.": _fill("a.", "a@"),
}


@pytest.mark.parametrize("name", CRAFTED)
def test_crafted_pages_are_scrubbed_in_linear_time(name):
    """No clock: each 256 KB page below would keep EMAIL.finditer busy for half an hour where it is quadratic, and
    takes email_matches a fraction of a second (docs/SECURITY.md has the 1 MB times); a hang is the failure."""
    build = CRAFTED[name]
    for text in (build(1_000), build(1_000) + " admin@falcot.com", build(997) + ".x@y.z"):
        _assert_same(text)
    page = build(1 << 18)
    expected = sum(1 for _ in EMAIL.finditer(build(1_000)))  # "a@a.a.a..." is one address at any length
    assert sum(1 for _ in email_matches(page)) == expected
    text, counts = scrub(page + " admin@falcot.com", PiiConfig(ipv4=False))
    assert counts == {"pii_email": expected + 1} and text.endswith(" " + EMAIL_REPLACEMENTS[expected])
