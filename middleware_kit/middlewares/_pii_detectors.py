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
from bisect import bisect_right
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


# -- characters ------------------------------------------------------------------------------------------------
# Scripts written without spaces between words (Thai, Lao, Myanmar, Khmer, Hangul, CJK and their punctuation, fullwidth
# forms): a value written directly against them ends where they start. ``\w`` would glue them to the value.
_NOSPACE = (
    "\u0e00-\u0eff\u1000-\u109f\u1100-\u11ff\u1780-\u17ff\u2e80-\u9fff\ua960-\ua97f\uac00-\ud7ff"
    "\uf900-\ufaff\ufe30-\ufe4f\uff00-\uffef\U00020000-\U0003ffff"
)
# Letters (and combining marks) of the scripts that separate words with spaces: Latin (with its extensions), Greek,
# Cyrillic, Armenian, Hebrew, Arabic, the Indic scripts (without the danda), Georgian. Used for internationalised
# email addresses and for the "not inside a word" boundaries instead of ``\w``.
_INTL = (
    "\u00b5\u00c0-\u00d6\u00d8-\u00f6\u00f8-\u02af\u0300-\u036f\u0370-\u037d\u037f-\u0386\u0388-\u03ff"
    "\u0400-\u0481\u0483-\u052f\u0531-\u0587\u0591-\u05f4\u0610-\u061a\u0620-\u06d3\u06d5-\u06ff\u0750-\u077f"
    "\u0900-\u0963\u0966-\u0dff\u10a0-\u10ff\u1e00-\u1fff"
)
_WORD = f"A-Za-z0-9_{_INTL}"
"""A character class body: what counts as part of a word around a value."""

# Matching runs on a normalised view of the text (NFKC-style, for matching only; spans are mapped back to the
# original): fullwidth ASCII (U+FF01-FF5E: at sign, digits, full stop, letters) and the Unicode spaces become ASCII,
# one character for one; format characters that render as nothing (zero-width space/joiners, word joiner, BOM, soft
# hyphen, direction marks) are dropped, so a value split by one is still found, its span covering them.
_WIDTH: dict[int, int] = {c: c - 0xFEE0 for c in range(0xFF01, 0xFF5F)}
_WIDTH.update({0x3000: 0x20, 0x00A0: 0x20, 0x2007: 0x20, 0x2009: 0x20, 0x202F: 0x20})
_INVISIBLE = frozenset(
    "\u00ad\u180e\u200b\u200c\u200d\u200e\u200f\u202a\u202b\u202c\u202d\u202e\u2060\u2061\u2062\u2063\u2064\ufeff"
)
_ODD = re.compile(
    "[\uff01-\uff5e\u3000\u00a0\u2007\u2009\u202f\u00ad\u180e\u200b-\u200f\u202a-\u202e\u2060-\u2064\ufeff]++"
)
"""Runs of characters the view changes: fullwidth ASCII and Unicode spaces (mapped 1:1), invisible ones (dropped)."""


class _View:
    """The normalised text and the map of its offsets back to the original (identity when nothing was dropped)."""

    __slots__ = ("_at", "_shift", "norm", "original")

    def __init__(self, text: str) -> None:
        self.original = text
        self.norm = text
        self._at: list[int] = []
        self._shift: list[int] = []
        if text.isascii() or _ODD.search(text) is None:
            return
        parts: list[str] = []
        pos = 0
        kept = 0
        for m in _ODD.finditer(text):
            start = m.start()
            parts.append(text[pos:start])
            kept += start - pos
            run = m.group()
            for offset, ch in enumerate(run):
                if ch in _INVISIBLE:
                    # from normalised offset `kept` on, original = normalised + shift
                    self._at.append(kept)
                    self._shift.append(start + offset + 1 - kept)
                else:
                    parts.append(ch.translate(_WIDTH))
                    kept += 1
            pos = m.end()
        parts.append(text[pos:])
        self.norm = "".join(parts)

    def _orig(self, i: int) -> int:
        k = bisect_right(self._at, i) - 1
        return i + self._shift[k] if k >= 0 else i

    def match(self, pii_type: str, start: int, end: int) -> PIIMatch:
        """A match at normalised ``[start, end)``, as a span and value of the original text."""
        if self._at:
            start, end = self._orig(start), self._orig(end - 1) + 1
        return PIIMatch(type=pii_type, value=self.original[start:end], start=start, end=end)


_last_view: tuple[str, _View] | None = None
"""The view of the last text normalised: the five detectors run one after the other on the same text (several
PIIMiddleware instances, one per type) normalise it once. One atomic tuple: safe under threads (a race only costs a
recomputation)."""


_VIEW_MEMO_MAX = 1 << 20
"""Texts longer than this (characters) are not remembered: the memo holds at most one text of bounded size."""


def _view(text: str) -> _View:
    global _last_view
    last = _last_view
    if last is not None and last[0] is text:
        return last[1]
    view = _View(text)
    if view.norm is not text and len(text) <= _VIEW_MEMO_MAX:
        _last_view = (text, view)
    return view


def _detect(text: str, find: Callable[[str], list[tuple[int, int]]], pii_type: str) -> list[PIIMatch]:
    """``find`` run on the normalised view of ``text``; its spans mapped back to ``text``."""
    view = _view(text)
    return [view.match(pii_type, s, e) for s, e in find(view.norm)]


# -- URL -------------------------------------------------------------------------------------------------------
_URL = re.compile(
    rf"(?<![{_WORD}@.+-])"  # not inside a word, an email or a longer host name
    r"(?:(?:https?|ftp)://(?=[\w\[])|www\.(?=[A-Za-z0-9-]++\.[A-Za-z])"
    # a bare host with a path (example.com/page): labels, an alphabetic top-level domain, then a slash
    r"|(?=(?:[A-Za-z0-9](?:[A-Za-z0-9-]{0,61}[A-Za-z0-9])?\.)++[A-Za-z]{2,63}/))"
    rf"[^\s<>\"'`{{}}|\\^{_NOSPACE}]++",
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


def _find_urls(text: str) -> list[tuple[int, int]]:
    found: list[tuple[int, int]] = []
    for m in _URL.finditer(text):
        value = _trim_url(m.group())
        scheme_end = value.find("://")
        host = value[scheme_end + 3 :] if scheme_end >= 0 else value
        if not host or not (host[0].isalnum() or host[0] == "["):
            continue
        if scheme_end < 0 and value.count(".") < 2 and "/" not in value:
            continue  # "www.x" alone
        found.append((m.start(), m.start() + len(value)))
    return found


def _urls_in(text: str) -> list[tuple[int, int]]:
    return _find_urls(text) if ("://" in text or "www." in text.lower()) else []


def detect_url(text: str) -> list[PIIMatch]:
    """URLs with an ``http``/``https``/``ftp`` scheme or starting with ``www.``: ports, paths, queries, fragments and
    balanced parentheses (``https://en.wikipedia.org/wiki/Foo_(bar)``) included; trailing sentence punctuation,
    unbalanced closing brackets and text of a script written without spaces (CJK, Thai, Hangul: ``詳細は
    https://example.jp/faqをご覧ください``) excluded. A bare domain is a URL when a path follows it
    (``example.com/page``, as in LangChain); alone (``example.com``) it is not."""
    return _detect(text, _find_urls, "url")


# -- email -----------------------------------------------------------------------------------------------------
_LOCAL_FIRST = f"A-Za-z0-9_%+{_INTL}-"
_LABEL = f"A-Za-z0-9{_INTL}"
_DOMAIN = (
    rf"((?:[{_LABEL}](?:[{_LABEL}-]{{0,62}}+)\.)+)"  # labels, each ending with a dot
    rf"((?:xn--[A-Za-z0-9-]{{1,59}}+|[A-Za-z{_INTL}]{{2,24}}+))"  # the top-level domain
    rf"(?![{_WORD}@-]|\.[{_LABEL}])"
)
# The local part: not after another local-part character (a quote may come before: 'ada@example.com'); a quote is
# allowed inside (o'brien) but not first.
_EMAIL = re.compile(rf"(?<![{_WORD}.%+-])[{_LOCAL_FIRST}](?:[{_LOCAL_FIRST}.']{{0,63}}+)@" + _DOMAIN)
# Percent-encoded in a URL query (``?email=ada%40example.com``): no ``%`` in the local part.
_EMAIL_PCT = re.compile(rf"(?<![{_WORD}.+-])[A-Za-z0-9_+{_INTL}-](?:[A-Za-z0-9_+.'{_INTL}-]{{0,63}}+)%40" + _DOMAIN)
_SCALE = re.compile(r"\d{1,2}x")  # logo@2x.png: an image at a scale, not an address


def _email_ok(local: str, domain: str) -> bool:
    if local.endswith(".") or ".." in local or local.startswith("."):
        return False
    labels = domain.split(".")
    if len(labels) == 2 and _SCALE.fullmatch(labels[0]):
        return False
    return not any(label.endswith("-") or label.startswith("-") for label in labels)


def _find_emails(text: str) -> list[tuple[int, int]]:
    found: list[tuple[int, int]] = []
    if "@" in text:
        for m in _EMAIL.finditer(text):
            local, _, domain = m.group().rpartition("@")
            if _email_ok(local, domain):
                found.append(m.span())
    if "%40" in text:
        for m in _EMAIL_PCT.finditer(text):
            local, _, domain = m.group().rpartition("%40")
            if _email_ok(local, domain):
                found.append(m.span())
        found.sort()
    if found and "://" in text:
        # user@host in a URL's authority (ftp://user@files.example.com, https://user:pass@host) is a login, not an
        # address; an address in the path or the query (?to=ada@example.com) is reported.
        logins = [
            (text.index("://", a, b) + 3, _authority_end(text, a, b)) for a, b in _find_urls(text) if "://" in text[a:b]
        ]
        if logins:
            found = [(s, e) for s, e in found if not _inside(logins, s, e)]
    return found


def _authority_end(text: str, start: int, end: int) -> int:
    head = text.index("://", start, end) + 3
    for i in range(head, end):
        if text[i] in "/?#":
            return i
    return end


def detect_email(text: str) -> list[PIIMatch]:
    """Email addresses (``local@domain.tld``), internationalised ones included (``josé.garcía@correo.es``,
    Cyrillic, Greek and Devanagari ones, ``info@münchen.de``), in quotes or brackets (not taken into the span), in a
    URL's path or query (``?to=ada@example.com``, ``?email=ada%40example.com``, ``mailto:``), in fullwidth forms
    (U+FF01-FF5E: the fullwidth commercial at, letters, digits and full stop), split by zero-width characters, or
    written against CJK text. Not reported: a login in a URL's authority (``https://user@host/``), ``@handles``,
    ``name@host`` without a dot-separated top-level domain, image names at a scale (``logo@2x.png``), and all-CJK
    addresses (``用户@例子.中国``: use ``detector=``)."""
    return _detect(text, _find_emails, "email")


def _inside(spans: list[tuple[int, int]], start: int, end: int) -> bool:
    # spans are sorted and disjoint: a binary search keeps the detectors linear-ish (n log n) on many URLs.
    lo, hi = 0, len(spans)
    while lo < hi:
        mid = (lo + hi) // 2
        if spans[mid][1] <= start:
            lo = mid + 1
        else:
            hi = mid
    return lo < len(spans) and spans[lo][0] < end


# -- credit cards ----------------------------------------------------------------------------------------------
_NOT_BEFORE_CARD = f"{_WORD}./+-"
_CARD = re.compile(
    rf"[0-9](?<![{_NOT_BEFORE_CARD}][0-9])"  # a digit first, not inside a word or a dotted/dashed number
    r"(?:"
    # contiguous; a comma may come before or after (a CSV field)
    rf"[0-9]{{12,18}}+(?![{_WORD}]|[./-][0-9])"
    # grouped: not after a number with a thousands comma (1,234 5678 ...), nor after a short digit group
    r"|(?<![0-9],[0-9])(?<!\b[0-9][ -][0-9])(?<!\b[0-9][0-9][ -][0-9])(?<!\b[0-9][0-9][0-9][ -][0-9])"
    r"(?:[0-9]{3}([ -])[0-9]{4}\1[0-9]{4}\1[0-9]{4}(?:\1[0-9]{3})?"  # 4-4-4-4 (Visa, MC, Discover, JCB), 4-4-4-4-3
    r"|[0-9]{3}([ -])[0-9]{6}\2[0-9]{4,5})"  # 4-6-5 (Amex) and 4-6-4 (Diners)
    rf"(?![{_WORD}]|[./-][0-9]|[ -][0-9]{{1,3}}(?![0-9]))"  # a comma may follow (a CSV field)
    r")",
)


def luhn_valid(digits: str) -> bool:
    """The Luhn checksum of a string of ASCII digits."""
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


def _find_cards(text: str) -> list[tuple[int, int]]:
    found: list[tuple[int, int]] = []
    for m in _CARD.finditer(text):
        digits = m.group().replace(" ", "").replace("-", "")
        if _card_network(digits) and luhn_valid(digits):
            found.append(m.span())
    return found


def detect_credit_card(text: str) -> list[PIIMatch]:
    """Payment card numbers: Visa, Mastercard (51-55 and 2221-2720), American Express (15 digits, 34/37), Discover,
    Diners Club and JCB, contiguous or grouped with spaces or dashes, that pass the Luhn check; in CSV fields,
    against CJK text, in fullwidth digits or split by zero-width characters too. Digit strings that fit no network,
    fail Luhn, or run into more digits (phone numbers, ISBNs, long ids) are not reported."""
    return _detect(text, _find_cards, "credit_card")


# -- IP addresses ----------------------------------------------------------------------------------------------
_OCTET = r"(?:25[0-5]|2[0-4][0-9]|1[0-9][0-9]|[1-9][0-9]|[0-9])"
# Not after/before a word or a dot (longer dotted numbers: versions, OIDs; an IPv4 inside an IPv6 address is part of
# that address: its span is skipped); a colon may come before (host:10.0.0.1); a dash is allowed between
# two addresses (a range: 10.0.0.1-10.0.0.9) but not before a suffix (1.2.3.4-beta). A CIDR suffix (/24) may follow.
_IPV4 = re.compile(rf"(?<![{_WORD}.])(?<![A-Za-z_]-){_OCTET}(?:\.{_OCTET}){{3}}(?![{_WORD}]|\.[0-9]|-[A-Za-z_])")
# IPv6 candidates: a run of hex digits, colons and dots (for an embedded IPv4) containing a colon, plus a zone id.
_IPV6 = re.compile(
    rf"(?<![{_WORD}:.%-])(?=[0-9A-Fa-f]{{0,4}}:)[0-9A-Fa-f:.]{{2,45}}+(?:%[A-Za-z0-9_.-]{{1,32}}+)?"
    rf"(?![{_WORD}:%]|-[{_WORD}])"
)
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


def _find_ips(text: str) -> list[tuple[int, int]]:
    found: list[tuple[int, int]] = []
    v6_spans: list[tuple[int, int]] = []
    if ":" in text:
        for m in _IPV6.finditer(text):
            trimmed = m.group().rstrip(".")
            if trimmed.endswith(":") and not trimmed.endswith("::"):
                continue
            if _ipv6_ok(trimmed):
                v6_spans.append((m.start(), m.start() + len(trimmed)))
    if "." in text:
        for m in _IPV4.finditer(text):
            if v6_spans and _inside(v6_spans, m.start(), m.end()):
                continue
            before = text[max(0, m.start() - 12) : m.start()]
            if before and _NOT_IP_BEFORE.search(before):
                continue
            found.append(m.span())
    if v6_spans:
        found = sorted(found + v6_spans)
    return found


def detect_ip(text: str) -> list[PIIMatch]:
    """IPv4 (dotted quad, no leading zeros) and IPv6 addresses (full, compressed ``::``, IPv4-mapped, with a ``%zone``
    id), also inside URLs (``http://10.1.2.3/api``, ``http://[2001:db8::1]:8080/``) and with a CIDR suffix
    (``192.168.1.17/24``: the address is reported, not the ``/24``), fullwidth or against CJK text. Not reported:
    version strings (``1.2.3.4.5``, ``v1.2.3.4``), OIDs (``1.3.6.1.4.1``), MAC addresses, clock times. Write an IPv6
    address with a port in brackets (``[2001:db8::1]:443``)."""
    return _detect(text, _find_ips, "ip")


# -- MAC addresses ---------------------------------------------------------------------------------------------
_MAC = re.compile(
    rf"(?=[0-9A-Fa-f])(?<![{_WORD}.])"  # a hex digit first: positions that cannot start a MAC fail at once
    r"(?:"
    # not the tail of a longer run with the same separator (fingerprints); another separator before is fine
    rf"(?<![0-9A-Fa-f]{{2}}:)[0-9A-Fa-f]{{2}}(?::[0-9A-Fa-f]{{2}}){{5}}(?![{_WORD}]|[:-][0-9A-Fa-f])"
    rf"|(?<![0-9A-Fa-f]{{2}}-)(?<!-)[0-9A-Fa-f]{{2}}(?:-[0-9A-Fa-f]{{2}}){{5}}(?![{_WORD}]|[:-][0-9A-Fa-f])"
    rf"|(?<![:-])[0-9A-Fa-f]{{4}}\.[0-9A-Fa-f]{{4}}\.[0-9A-Fa-f]{{4}}(?![{_WORD}]|\.[0-9A-Fa-f])"
    r")"
)


def _find_macs(text: str) -> list[tuple[int, int]]:
    return [m.span() for m in _MAC.finditer(text)]


def detect_mac_address(text: str) -> list[PIIMatch]:
    """MAC addresses: ``aa:bb:cc:dd:ee:ff``, ``AA-BB-CC-DD-EE-FF`` and Cisco's ``aabb.ccdd.eeff``. Longer runs of hex
    pairs (SSH/GPG fingerprints, IPv6 addresses) are not reported."""
    return _detect(text, _find_macs, "mac_address")


BUILTIN_DETECTORS: dict[str, Detector] = {
    "email": detect_email,
    "credit_card": detect_credit_card,
    "ip": detect_ip,
    "mac_address": detect_mac_address,
    "url": detect_url,
}
"""The detector of each built-in PII type."""
