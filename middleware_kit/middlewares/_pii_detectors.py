"""The built-in PII detectors: ``detect_email``, ``detect_credit_card``, ``detect_ip``, ``detect_mac_address``,
``detect_url``.

Each is ``(text) -> list[PIIMatch]`` with matches in text order, and each runs in **linear time** in the length of
the text, whatever the text is (an attacker controls tool results). How:

- every pattern starts with a negative lookbehind on its own character class, so a match attempt starts only at the
  *beginning* of a run of candidate characters, never again inside it (that restart is what makes naive patterns
  quadratic on ``"a" * 100_000``);
- repetitions are possessive (``*+``/``++``, Python 3.11) or bounded (``{1,64}``), and never nested without a
  separator that cannot occur inside them, so a failing attempt cannot backtrack more than a constant amount;
- the fiddly parts (URL trailing punctuation and parentheses, IPv6 syntax, Luhn, card networks) are plain Python on
  one short candidate at a time.

``bench/pii_speed.py`` measures them on realistic text and on 100k-character adversarial inputs.
"""

from __future__ import annotations

import ipaddress
import re
from collections.abc import Callable

from typing_extensions import TypedDict

__all__ = [
    "BUILTIN_DETECTORS",
    "Detector",
    "PIIMatch",
    "detect_credit_card",
    "detect_email",
    "detect_ip",
    "detect_mac_address",
    "detect_url",
    "luhn_valid",
]


class PIIMatch(TypedDict):
    """One detected piece of PII: its type, the matched text, and its ``[start, end)`` offsets in the text."""

    type: str
    value: str
    start: int
    end: int


Detector = Callable[[str], list[PIIMatch]]
"""``(text) -> list[PIIMatch]``."""


# -- URL -------------------------------------------------------------------------------------------------------
_URL = re.compile(
    r"(?<![\w@.+-])"  # not inside a word, an email or a longer host name
    r"(?:(?:https?|ftp)://(?=[\w\[])|www\.(?=[A-Za-z0-9-]++\.[A-Za-z]))"
    r"[^\s<>\"'`{}|\\^]++",
    re.IGNORECASE,
)
_TAIL = ".,;:!?'\"*_~)]}"
_CLOSERS = re.compile(r"[)\]}]")
_OPENER = {")": "(", "]": "[", "}": "{"}


def _trim_url(url: str) -> str:
    """Drop trailing punctuation and closing brackets that have no opening partner inside the URL.

    The tail of punctuation and brackets is cut in C (``rstrip``); then only its closing brackets are visited, and
    one is given back while it closes a bracket opened inside the URL (``.../Foo_(bar)``)."""
    core = url.rstrip(_TAIL)
    if len(core) == len(url):
        return url
    balance = {c: core.count(_OPENER[c]) - core.count(c) for c in _OPENER}
    keep = len(core)
    for m in _CLOSERS.finditer(url, len(core)):
        c = m.group()
        if balance[c] <= 0:
            break
        balance[c] -= 1
        keep = m.end()
    return url[:keep]


def detect_url(text: str) -> list[PIIMatch]:
    """URLs with an ``http``/``https``/``ftp`` scheme or starting with ``www.``: ports, paths, queries, fragments and
    balanced parentheses (``https://en.wikipedia.org/wiki/Foo_(bar)``) included; trailing sentence punctuation and
    unbalanced closing brackets excluded. Bare domains (``example.com``) are not URLs here."""
    found: list[PIIMatch] = []
    for m in _URL.finditer(text):
        value = _trim_url(m.group())
        scheme_end = value.find("://")
        host = value[scheme_end + 3 :] if scheme_end >= 0 else value
        if not host or not (host[0].isalnum() or host[0] == "["):
            continue
        if scheme_end < 0 and value.count(".") < 2 and "/" not in value:
            continue  # "www.x" alone
        found.append(PIIMatch(type="url", value=value, start=m.start(), end=m.start() + len(value)))
    return found


# -- email -----------------------------------------------------------------------------------------------------
_EMAIL = re.compile(
    r"(?<![\w.%+'-])"
    r"[A-Za-z0-9_%+'-](?:[A-Za-z0-9_.%+'-]{0,62}+)"
    r"@"
    r"((?:[A-Za-z0-9](?:[A-Za-z0-9-]{0,61}+)\.)+)"  # labels, each ending with a dot
    r"([A-Za-z]{2,24}+)"  # the top-level domain
    r"(?![\w@-]|\.[A-Za-z0-9])",
)


def _email_ok(value: str) -> bool:
    local, _, domain = value.rpartition("@")
    if local.endswith(".") or ".." in local or local.startswith("."):
        return False
    return not any(label.endswith("-") or label.startswith("-") for label in domain.split("."))


def detect_email(text: str) -> list[PIIMatch]:
    """Email addresses (``local@domain.tld``). Not reported: text inside a URL (``https://user@host/...``,
    ``https://x.com/?to=a@b.co``: the URL is the PII there, see ``detect_url``), ``@handles`` and ``name@host``
    without a dot-separated top-level domain."""
    if "@" not in text:
        return []
    urls: list[PIIMatch] | None = None
    found: list[PIIMatch] = []
    for m in _EMAIL.finditer(text):
        value = m.group()
        if not _email_ok(value):
            continue
        if urls is None:
            urls = detect_url(text) if ("://" in text or "www." in text.lower()) else []
        if urls and _inside(urls, m.start(), m.end()):
            continue
        found.append(PIIMatch(type="email", value=value, start=m.start(), end=m.end()))
    return found


def _inside(spans: list[PIIMatch], start: int, end: int) -> bool:
    # spans are sorted and disjoint: a binary search keeps detect_email linear-ish (n log n) on many URLs.
    lo, hi = 0, len(spans)
    while lo < hi:
        mid = (lo + hi) // 2
        if spans[mid]["end"] <= start:
            lo = mid + 1
        else:
            hi = mid
    return lo < len(spans) and spans[lo]["start"] < end


# -- credit cards ----------------------------------------------------------------------------------------------
_CARD = re.compile(
    r"\d(?<![\w.,/+-]\d)(?<!\b\d[ -]\d)(?<!\b\d\d[ -]\d)(?<!\b\d\d\d[ -]\d)"  # a digit first: re's fast scan
    r"(?:"
    r"\d{12,18}+"  # contiguous
    r"|\d{3}([ -])\d{4}\1\d{4}\1\d{4}(?:\1\d{3})?"  # 4-4-4-4 (Visa, Mastercard, Discover, JCB) and 4-4-4-4-3
    r"|\d{3}([ -])\d{6}\2\d{4,5}"  # 4-6-5 (Amex) and 4-6-4 (Diners)
    r")"
    r"(?![\w]|[.,/-]\d|[ -]\d{1,3}(?!\d))",
)


def luhn_valid(digits: str) -> bool:
    """The Luhn checksum of a string of digits."""
    total = 0
    for i, ch in enumerate(reversed(digits)):
        d = ord(ch) - 48
        if i % 2:
            d *= 2
            if d > 9:
                d -= 9
        total += d
    return total % 10 == 0


def _card_network(digits: str) -> str | None:
    """The card network whose issuer prefixes and lengths fit ``digits``, or None."""
    n = len(digits)
    p2, p3, p4, p6 = int(digits[:2]), int(digits[:3]), int(digits[:4]), int(digits[:6])
    if digits[0] == "4" and n in (13, 16, 19):
        return "visa"
    if n == 16 and (51 <= p2 <= 55 or 2221 <= p4 <= 2720):
        return "mastercard"
    if n == 15 and p2 in (34, 37):
        return "amex"
    if 16 <= n <= 19 and (p4 == 6011 or 644 <= p3 <= 649 or p2 == 65 or 622126 <= p6 <= 622925):
        return "discover"
    if (n == 14 and (300 <= p3 <= 305 or p2 in (36, 38, 39))) or (16 <= n <= 19 and p2 == 36):
        return "diners"
    if 16 <= n <= 19 and 3528 <= p4 <= 3589:
        return "jcb"
    return None


def detect_credit_card(text: str) -> list[PIIMatch]:
    """Payment card numbers: Visa, Mastercard (51-55 and 2221-2720), American Express (15 digits, 34/37), Discover,
    Diners Club and JCB, contiguous or grouped with spaces or dashes, that pass the Luhn check. Digit strings that
    fit no network, fail Luhn, or run into more digits (phone numbers, ISBNs, long ids) are not reported."""
    found: list[PIIMatch] = []
    for m in _CARD.finditer(text):
        value = m.group()
        digits = value.replace(" ", "").replace("-", "")
        if _card_network(digits) and luhn_valid(digits):
            found.append(PIIMatch(type="credit_card", value=value, start=m.start(), end=m.end()))
    return found


# -- IP addresses ----------------------------------------------------------------------------------------------
_OCTET = r"(?:25[0-5]|2[0-4]\d|1\d\d|[1-9]\d|\d)"
# Not after/before a word, a dot (longer dotted numbers: versions, OIDs), a colon (IPv6) or "/digits" (CIDR); a dash
# is allowed between two addresses (a range: 10.0.0.1-10.0.0.9) but not before a suffix (1.2.3.4-beta).
_IPV4 = re.compile(rf"(?<![\w.:])(?<![A-Za-z_]-){_OCTET}(?:\.{_OCTET}){{3}}(?![\w]|\.\d|/\d|-[A-Za-z_])")
# IPv6 candidates: a run of hex digits, colons and dots (for an embedded IPv4) containing a colon, plus a zone id.
_IPV6 = re.compile(r"(?<![\w:.%-])(?=[0-9A-Fa-f]{0,4}:)[0-9A-Fa-f:.]{2,45}+(?:%[A-Za-z0-9_.-]{1,32}+)?(?![\w:%]|-\w)")
# A version or an OID written before the number: "v1.2.3.4", "version 1.2.3.4", "OID 1.3.6.1".
_NOT_IP_BEFORE = re.compile(r"(?:\b(?:v|ver|version|release|build|oid|rev)\.?:?\s{0,2}+)$", re.IGNORECASE)


def _ipv6_ok(candidate: str) -> bool:
    address = candidate.split("%", 1)[0]
    if address.count(":") < 2 or not any(c.isdigit() for c in address):  # "a::b", "Foo::bar" are code
        return False
    if "::" not in address and address.count(":") != 7 and not (address.count(":") == 6 and "." in address):
        return False
    try:
        ipaddress.IPv6Address(address)
    except ValueError:
        return False
    return True


def detect_ip(text: str) -> list[PIIMatch]:
    """IPv4 (dotted quad, no leading zeros) and IPv6 addresses (full, compressed ``::``, IPv4-mapped, with a
    ``%zone`` id). Not reported: version strings (``1.2.3.4.5``, ``v1.2.3.4``), OIDs (``1.3.6.1.4.1``), CIDR blocks
    (``10.0.0.0/8``: a network, not a host), MAC addresses, clock times, and addresses inside a URL (the URL is the
    entity: ``detect_url``). Write an IPv6 address with a port in brackets (``[2001:db8::1]:443``)."""
    found: list[PIIMatch] = []
    v6_spans: list[PIIMatch] = []
    urls = detect_url(text) if "://" in text else []
    if ":" in text:
        for m in _IPV6.finditer(text):
            if urls and _inside(urls, m.start(), m.end()):
                continue  # the URL is the entity
            value = m.group()
            trimmed = value.rstrip(".")
            if trimmed.endswith(":") and not trimmed.endswith("::"):
                continue
            end = m.start() + len(trimmed)
            if text.startswith("/", end) and end + 1 < len(text) and text[end + 1].isdigit():
                continue  # a prefix, 2001:db8::/32
            if _ipv6_ok(trimmed):
                v6_spans.append(PIIMatch(type="ip", value=trimmed, start=m.start(), end=end))
    if "." in text:
        for m in _IPV4.finditer(text):
            if (v6_spans and _inside(v6_spans, m.start(), m.end())) or (urls and _inside(urls, m.start(), m.end())):
                continue
            before = text[max(0, m.start() - 12) : m.start()]
            if before and _NOT_IP_BEFORE.search(before):
                continue
            found.append(PIIMatch(type="ip", value=m.group(), start=m.start(), end=m.end()))
    if v6_spans:
        found = sorted(found + v6_spans, key=lambda match: match["start"])
    return found


# -- MAC addresses ---------------------------------------------------------------------------------------------
_MAC = re.compile(
    r"(?<![\w:.-])"
    r"(?:"
    r"[0-9A-Fa-f]{2}([:-])[0-9A-Fa-f]{2}(?:\1[0-9A-Fa-f]{2}){4}(?![\w]|[:-][0-9A-Fa-f])"
    r"|[0-9A-Fa-f]{4}\.[0-9A-Fa-f]{4}\.[0-9A-Fa-f]{4}(?![\w]|\.[0-9A-Fa-f])"
    r")"
)


def detect_mac_address(text: str) -> list[PIIMatch]:
    """MAC addresses: ``aa:bb:cc:dd:ee:ff``, ``AA-BB-CC-DD-EE-FF`` and Cisco's ``aabb.ccdd.eeff``. Longer runs of
    hex pairs (SSH/GPG fingerprints, IPv6 addresses) are not reported."""
    return [PIIMatch(type="mac_address", value=m.group(), start=m.start(), end=m.end()) for m in _MAC.finditer(text)]


BUILTIN_DETECTORS: dict[str, Detector] = {
    "email": detect_email,
    "credit_card": detect_credit_card,
    "ip": detect_ip,
    "mac_address": detect_mac_address,
    "url": detect_url,
}
"""The detector of each built-in PII type."""
