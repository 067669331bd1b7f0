"""The URL filter and PII steps on real lines: UT1-listed domains, the sample crawl's URLs, and the
addresses the Debian handbook's pages print."""
from __future__ import annotations

import pytest

from pipelines.corpus.clean import DROPPED, KEPT, process_document
from pipelines.corpus.config import CorpusConfig
from pipelines.corpus.steps.pii import PiiConfig, scrub
from pipelines.corpus.steps.url_filter import UrlFilterConfig, read_list, url_decision
from schemas.records import RawDocument

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
    status, (_, reason) = process_document(RawDocument("2", "http://www.pornhub.com/x", "f", 0, text=page), cfg)
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
