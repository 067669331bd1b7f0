"""PII scrubbing, FineWeb's last step (datatrove `PIIFormatter`): e-mail addresses and public IP
addresses in the text are replaced by placeholders; nothing is dropped.

  email  datatrove's address expression (RFC 5322's dot-atom local part, a domain or a bracketed
         IPv4 literal) -> email@example.com, firstname.lastname@example.org, in turn
  ipv4   a dotted quad that `ipaddress` calls global (public): private (10/8, 192.168/16, ...),
         loopback, link-local and reserved ranges are kept, as version numbers such as 1.2.3.4
         are not (1.0.0.0/8 is global) -> one of six addresses that did not answer pings when
         datatrove chose them, in turn
  ipv6   (lmforge only, off by --no-pii-ipv6; datatrove replaces IPv4 only) a global unicast IPv6
         address (2000::/3 and global: `2001:db8::`, the documentation range, is kept, as are
         multicast groups and netmasks) -> 2001:db8::1 ... in turn

The placeholders cycle within a document, starting afresh at each: datatrove's cycle runs on
across every document one task formats, so the placeholder a document gets there depends on which
documents that worker saw first; here the text depends on the document alone, whichever worker
cleans it. `bench corpus` compares texts with datatrove's formatter started afresh per document.
The step counts what it replaced per kind (`counts.noted.pii_email`, `counts.noted.pii_ipv4`, ...).
"""
from __future__ import annotations

import ipaddress
import re
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass, replace

from common.config import opt
from pipelines.corpus.steps.base import Decision, Note, Page, Step

# datatrove 0.10.1 pipeline/formatters/pii.py, verbatim. Its own finditer is quadratic on crafted text (every
# word boundary in a run of local-part characters rescans the run to its end: 32 KB of "a-a-a-..." take 27 s,
# so 1 MB some 8 hours); `email_matches` finds the same matches in linear time and is what the step uses.
EMAIL = re.compile(
    r"\b[A-Za-z0-9!#$%&'*+/=?^_`{|}~-]+(?:\.[A-Za-z0-9!#$%&'*+/=?^_`{|}~-]+)*@(?:(?:[A-Za-z0-9](?:["
    r"A-Za-z0-9-]*[A-Za-z0-9])?\.)+[A-Za-z0-9](?:[A-Za-z0-9-]*[A-Za-z0-9])?|\[(?:(?:25[0-5]|2[0-4][0-9]|["
    r"01]?[0-9][0-9]?)\.){3}(?:25[0-5]|2[0-4][0-9]|[01]?[0-9][0-9]?|[A-Za-z0-9-]*[A-Za-z0-9]:)])")
# What a local part may hold besides its dots: EMAIL's character class, copied from it.
_LOCAL = r"A-Za-z0-9!#$%&'*+/=?^_`{|}~-"
# Where a local part cannot start at or before, read backwards from an '@' in the reversed text: a character
# that is neither a local-part character nor a dot, or the second dot of "..".
_BARRIER = re.compile(rf"[^.{_LOCAL}]|\.\.")
# Where EMAIL's local part may start: its own word boundary (Unicode, as EMAIL's) before a local-part character.
_START = re.compile(rf"\b[{_LOCAL}]")
# An '@' and the domain EMAIL would match after it, cut from EMAIL itself: it does not depend on what precedes.
_AT_DOMAIN = re.compile("@" + EMAIL.pattern.partition("@")[2])
IPV4 = re.compile(r"(?:(?:25[0-5]|2[0-4][0-9]|[01]?[0-9][0-9]?)\.){3}(?:25[0-5]|2[0-4][0-9]|[01]?[0-9][0-9]?)")
# Candidates only (hex groups and colons, at least two colons); `ipaddress` decides what is an address.
IPV6 = re.compile(r"(?<![0-9A-Za-z:.])(?:[0-9A-Fa-f]{0,4}:){2,7}(?:[0-9A-Fa-f]{1,4}|:)(?![0-9A-Za-z:.])")

EMAIL_REPLACEMENTS = ("email@example.com", "firstname.lastname@example.org")
IPV4_REPLACEMENTS = ("22.214.171.124", "126.96.36.199", "188.8.131.52", "184.108.40.206", "220.127.116.11", "18.104.22.168")
IPV6_REPLACEMENTS = ("2001:db8::1", "2001:db8::2", "2001:db8::3")
GLOBAL_UNICAST = ipaddress.ip_network("2000::/3")


@dataclass
class PiiConfig:
    enabled: bool = opt(True, "replace e-mail addresses and public IP addresses with placeholders (FineWeb's PII step)")
    emails: bool = opt(True, "replace e-mail addresses")
    ipv4: bool = opt(True, "replace public IPv4 addresses (private and reserved ranges are kept)")
    ipv6: bool = opt(True, "replace public IPv6 addresses (datatrove does not)")
    public_only: bool = opt(True, "off: replace every IP address, private ones too (datatrove's only_remove_public_ips)")


def _is_ip(text: str, version: int, public_only: bool) -> bool:
    try:
        ip = ipaddress.ip_address(text)
    except ValueError:
        return False
    if ip.version != version:
        return False
    if version == 6 and public_only:
        # Global unicast only (2000::/3): `is_global` alone also passes multicast groups (ff02::1) and
        # netmasks (ffff:ffff::), which Debian's networking pages print and which identify no one.
        return ip.is_global and ip in GLOBAL_UNICAST
    return not public_only or ip.is_global


def email_matches(text: str) -> Iterator[re.Match]:
    """EMAIL.finditer(text), match for match, in time linear in len(text).

    EMAIL retries each word boundary in a run of local-part characters and rescans the run from there. But
    a match holds one '@', its local part lies in the run of local-part characters and dots just before it
    ('@' is neither), and what EMAIL matches after the '@' does not depend on what precedes it. So for each
    '@' whose domain matches (_AT_DOMAIN, in order), the match is EMAIL's at the leftmost start that can
    reach that '@': past the last barrier (a character outside the run, the second dot of "..", the
    previous match's end) and on EMAIL's word boundary. Where EMAIL fails there (a dot before the '@'),
    every later start fails too. Each character is read a bounded number of times: in the domain after an
    '@' (by _AT_DOMAIN and EMAIL.match) and in the run before the next '@' (by one barrier search, one
    start search and EMAIL.match).

    Libraries considered: `regex` is as quadratic ("-a-a-...-a@", 32 KB: 55 s); RE2 is linear, but its
    \\b is ASCII where Python's is Unicode ("éa@b.c"), so it would not give datatrove's matches.
    """
    n, pos, rev = len(text), 0, ""
    for at in _AT_DOMAIN.finditer(text):
        a = at.start()
        if a <= pos:  # inside the previous match or just after it: no room for a local part
            continue
        rev = rev or text[::-1]  # text[i] is rev[n - 1 - i]: re searches forwards only
        # The first barrier walking back from a - 1, no further than pos: the start is after it.
        barrier = _BARRIER.search(rev, n - a, n - pos)
        start = _START.search(text, pos if barrier is None else n - barrier.start(), a)
        m = EMAIL.match(text, start.start()) if start else None
        if m:
            yield m
            pos = m.end()


def replace_all(text: str, find: Callable[[str], Iterable[re.Match]], replacements: tuple[str, ...],
                valid=None) -> tuple[str, int]:
    """(text with each valid match of `find` replaced by the next placeholder in turn, matches replaced):
    `pattern.sub` with the matches of `find(text)`, e.g. `IPV4.finditer` or `email_matches`."""
    parts, end, n = [], 0, 0
    for m in find(text):
        if valid is not None and not valid(m.group(0)):
            continue
        parts += [text[end:m.start()], replacements[n % len(replacements)]]
        end, n = m.end(), n + 1
    parts.append(text[end:])
    return "".join(parts), n


def scrub(text: str, cfg: PiiConfig) -> tuple[str, dict[str, int]]:
    """(scrubbed text, replacements by kind). E-mails first, as datatrove: an address's bracketed
    IPv4 literal goes with its address."""
    counts: dict[str, int] = {}
    if cfg.emails and "@" in text:
        text, counts["pii_email"] = replace_all(text, email_matches, EMAIL_REPLACEMENTS)
    if cfg.ipv4 and "." in text:
        text, counts["pii_ipv4"] = replace_all(text, IPV4.finditer, IPV4_REPLACEMENTS,
                                               lambda s: _is_ip(s, 4, cfg.public_only))
    if cfg.ipv6 and ("::" in text or text.count(":") >= 7):  # an address has "::" or 7 colons
        text, counts["pii_ipv6"] = replace_all(text, IPV6.finditer, IPV6_REPLACEMENTS,
                                               lambda s: _is_ip(s, 6, cfg.public_only))
    return text, {k: v for k, v in counts.items() if v}


def apply(page: Page, cfg: PiiConfig) -> Decision:
    text, counts = scrub(page.text, cfg)
    if not counts:
        return page, None
    return replace(page, text=text, notes=page.notes + tuple(Note(k, n) for k, n in counts.items())), None


STEP = Step("pii", apply, PiiConfig, "PII scrubbing (FineWeb's last step, datatrove PIIFormatter): e-mail and public IP "
                                     "addresses replaced by placeholders, counted per kind")
