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
from dataclasses import dataclass, replace

from common.config import opt
from pipelines.corpus.steps.base import Decision, Note, Page, Step

# datatrove 0.10.1 pipeline/formatters/pii.py, verbatim.
EMAIL = re.compile(
    r"\b[A-Za-z0-9!#$%&'*+/=?^_`{|}~-]+(?:\.[A-Za-z0-9!#$%&'*+/=?^_`{|}~-]+)*@(?:(?:[A-Za-z0-9](?:["
    r"A-Za-z0-9-]*[A-Za-z0-9])?\.)+[A-Za-z0-9](?:[A-Za-z0-9-]*[A-Za-z0-9])?|\[(?:(?:25[0-5]|2[0-4][0-9]|["
    r"01]?[0-9][0-9]?)\.){3}(?:25[0-5]|2[0-4][0-9]|[01]?[0-9][0-9]?|[A-Za-z0-9-]*[A-Za-z0-9]:)])")
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


def replace_all(text: str, pattern: re.Pattern, replacements: tuple[str, ...], valid=None) -> tuple[str, int]:
    """(text with each valid match replaced by the next placeholder in turn, matches replaced)."""
    n = 0

    def sub(m: re.Match) -> str:
        nonlocal n
        if valid is not None and not valid(m.group(0)):
            return m.group(0)
        n += 1
        return replacements[(n - 1) % len(replacements)]

    return pattern.sub(sub, text), n


def scrub(text: str, cfg: PiiConfig) -> tuple[str, dict[str, int]]:
    """(scrubbed text, replacements by kind). E-mails first, as datatrove: an address's bracketed
    IPv4 literal goes with its address."""
    counts: dict[str, int] = {}
    if cfg.emails and "@" in text:
        text, counts["pii_email"] = replace_all(text, EMAIL, EMAIL_REPLACEMENTS)
    if cfg.ipv4 and "." in text:
        text, counts["pii_ipv4"] = replace_all(text, IPV4, IPV4_REPLACEMENTS, lambda s: _is_ip(s, 4, cfg.public_only))
    if cfg.ipv6 and ("::" in text or text.count(":") >= 7):  # an address has "::" or 7 colons
        text, counts["pii_ipv6"] = replace_all(text, IPV6, IPV6_REPLACEMENTS, lambda s: _is_ip(s, 6, cfg.public_only))
    return text, {k: v for k, v in counts.items() if v}


def apply(page: Page, cfg: PiiConfig) -> Decision:
    text, counts = scrub(page.text, cfg)
    if not counts:
        return page, None
    return replace(page, text=text, notes=page.notes + tuple(Note(k, n) for k, n in counts.items())), None


STEP = Step("pii", apply, PiiConfig, "PII scrubbing (FineWeb's last step, datatrove PIIFormatter): e-mail and public IP "
                                     "addresses replaced by placeholders, counted per kind")
