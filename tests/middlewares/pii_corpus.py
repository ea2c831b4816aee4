"""A labeled PII corpus, built deterministically: realistic positives and hard negatives for every built-in type.

``corpus()`` returns records ``{"text": str, "entities": [{"type", "start", "end"}]}``. Each record is made from a
template with ``{slot}`` holes; a slot filled with a labeled value becomes an entity, a slot filled with a hard
negative (OIDs, version strings, CIDR blocks, SSH/GPG fingerprints, ISBNs, phone numbers, timestamps, hashes, invalid
Luhn numbers, UUIDs, emails inside URLs, trailing punctuation) does not. ``bench/pii_eval.py`` scores the detectors
on it (exact spans), and ``tests/middlewares/test_pii.py`` asserts the F1 targets.

Labeling decisions (the detectors follow them, and ``docs/middlewares/pii.md`` states them):

- a URL's trailing sentence punctuation and unbalanced closing bracket are not part of it;
- an email in a URL's path or query, and an IP address as a URL's host, are labeled as that type AND as part of the
  URL (each ``PIIMiddleware`` handles its own type); a login in a URL's authority (``ftp://user@host``) is not an email;
- ``10.0.0.0/8`` and ``2001:db8::/32``: the address is labeled (``10.0.0.0``, ``2001:db8::``), the ``/prefix`` is not;
- an IPv6 zone id (``%eth0``) is part of the address.
"""

from __future__ import annotations

import random
import re
from collections.abc import Callable
from typing import Any

__all__ = ["TYPES", "corpus"]

TYPES = ("email", "credit_card", "ip", "mac_address", "url")

EMAILS = [
    "john.doe@example.com",
    "alice+newsletter@mail.example.org",
    "bob_smith@sub.domain.co.uk",
    "o'brien@example.ie",
    "support@acme-corp.io",
    "x@y.co",
    "first.last@university.edu",
    "dev-team@startup.dev",
    "jane2024@gmail.com",
    "billing.dept@company-name.com",
    "USER@EXAMPLE.COM",
    "a.b.c@d.e.fr",
    "security%alerts@example.net",
    "noreply@notifications.github.com",
    "m.mueller@firma.de",
]
CARDS = [
    "4111 1111 1111 1111",
    "4111-1111-1111-1111",
    "4111111111111111",
    "4012888888881881",
    "5555555555554444",
    "5105-1051-0510-5100",
    "2223003122003222",
    "2720 9926 3826 3833",
    "378282246310005",
    "3714 496353 98431",
    "371449635398431",
    "6011111111111117",
    "6011 0009 9013 9424",
    "30569309025904",
    "3852 000002 3237",
    "3530111333300000",
    "3566 0020 2036 0505",
    "4000056655665556",
    "5200828282828210",
    "6221260000000000",
]
IPS = [
    "192.168.1.1",
    "10.0.0.42",
    "172.16.254.1",
    "8.8.8.8",
    "203.0.113.195",
    "127.0.0.1",
    "255.255.255.255",
    "2001:db8:85a3::8a2e:370:7334",
    "2001:0db8:85a3:0000:0000:8a2e:0370:7334",
    "fe80::1%eth0",
    "::1",
    "fe80::a00:27ff:fe4e:66a1%en0",
    "::ffff:192.0.2.128",
    "2606:4700:4700::1111",
    "ff02::1",
    "100.64.0.1",
]
MACS = [
    "00:1A:2B:3C:4D:5E",
    "aa:bb:cc:dd:ee:ff",
    "00-14-22-01-23-45",
    "F8-32-E4-9A-0B-7C",
    "0019.e8a4.5b2c",
    "aabb.ccdd.eeff",
    "3c:22:fb:12:9a:01",
    "DE:AD:BE:EF:00:01",
]
URLS = [
    "https://example.com",
    "http://www.example.org/path/to/page.html",
    "https://api.example.com:8443/v1/users?id=42&sort=asc",
    "ftp://files.example.net/pub/file.tar.gz",
    "www.example.co.uk/about",
    "https://en.wikipedia.org/wiki/Python_(programming_language)",
    "http://localhost:8080/health",
    "https://example.com/search?q=pii+detection#results",
    "https://github.com/org/repo/pull/123",
    "www.company.io",
    "https://docs.python.org/3/library/re.html#re.finditer",
    "http://192.168.0.10:3000/dashboard",
]

NEGATIVES: dict[str, list[str]] = {
    # strings that look like some type and are not PII of any type
    "oid": ["1.3.6.1.4.1.311.21.8", "1.2.840.113549.1.1.11", "2.5.4.3.1"],
    "version": ["v1.2.3.4", "version 2.10.3.1", "1.2.3.4.5", "release 4.19.0.12", "3.11.7", "v10.0.19041.1"],
    "ssh_fp": [
        "SHA256:nThbg6kXUpJWGl7E1IGOCspRomTxdCARLviKw6E5SY8",
        "MD5:16:27:ac:a5:76:28:2d:36:63:1b:56:4d:eb:df:a6:48",
        "43:51:43:a1:b5:fc:8b:b7:0a:3a:a9:b1:0f:66:73:a8",
    ],
    "gpg_fp": ["4AEE 18F8 3AFD EB23", "ABAF 11C6 5A29 70B1 30AB  E3C4 79BE 3E43 0041 1886"],
    "isbn": ["ISBN 978-3-16-148410-0", "ISBN-13: 9780306406157", "0-306-40615-2"],
    "phone": ["+1 (415) 555-0132", "+44 20 7946 0958", "555-867-5309", "+49 30 901820", "(212) 555-0199"],
    "timestamp": ["2024-01-15T10:30:45Z", "2024-01-15 10:30:45", "10:30:45", "12:05:33.123", "1705314645"],
    "hash": [
        "d41d8cd98f00b204e9800998ecf8427e",
        "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855",
        "a94a8fe5ccb19ba61f4c3934b5c5f1c2e4b1f7a3",
    ],
    "bad_luhn": [
        "4111 1111 1111 1112",
        "5555555555554445",
        "378282246310006",
        "1234 5678 9012 3456",
        "9999 9999 9999 9995",
    ],
    "uuid": ["123e4567-e89b-12d3-a456-426614174000", "550e8400-e29b-41d4-a716-446655440000"],
    "handle": ["@alice", "@dev_team", "user@localhost"],
    "code": ["std::vector<int>", "Foo::bar()", "a::b", "10.5", "3.14159", "1,234,567.89"],
    "order": ["order #100234567", "tracking 1Z999AA10123456784", "IBAN DE89 3704 0044 0532 0130 00"],
    "domain": ["example.com", "readme.md", "file.tar.gz"],
}

POSITIVE_TEMPLATES = [
    "Please contact {x} for details.",
    "My {kind} is {x}, thanks!",
    "Logged: {x}.",
    "({x})",
    '"{x}"',
    "- {x}\n- next item",
    "Value={x}; other=1",
    "Send it to {x} and {y} tomorrow.",
    "[{x}]",
    "{x}",
    "On 2024-01-15 at 10:30:45 we saw {x} again (ticket 4411).",
    "Is {x} correct?",
    "| field | {x} |",
    "Customer wrote: I can't log in, my details are {x} and {y}.",
]
NEGATIVE_TEMPLATES = [
    "Reference: {n}.",
    "The value {n} appears in the log.",
    "see {n}",
    "({n})",
    "Build {n} passed on 2024-03-01.",
    "Key fingerprint = {n}",
    "We upgraded to {n} yesterday and compared with {m}.",
]
MIXED_TEMPLATES = [
    "User {email} connected from {ip} ({mac}) and opened {url}.",
    "Card {card} was charged; receipt sent to {email}.",
    "Device {mac} at {ip} reported firmware v1.2.3.4 and OID 1.3.6.1.4.1.9.",
    "Visit {url}, or write to {email}. Phone: +1 (415) 555-0132.",
    "Server {ip} (port 8080) in {net}/8, build 3.11.7, hash d41d8cd98f00b204e9800998ecf8427e.",
    "From: {email}\nTo: {email}\nSubject: invoice for card {card}\n\nSee {url}.",
]
MORE_POSITIVES: list[tuple[str, list[tuple[str, str]]]] = [
    (
        "Networks 10.0.0.0/8, 192.168.0.0/16 and 172.16.0.0/12 are private.",
        [("ip", "10.0.0.0"), ("ip", "192.168.0.0"), ("ip", "172.16.0.0")],
    ),
    ("Documentation prefix: 2001:db8::/32.", [("ip", "2001:db8::")]),
    ("Allowed range: 10.0.0.1-10.0.0.254 only.", [("ip", "10.0.0.1"), ("ip", "10.0.0.254")]),
    ("See [the docs](https://docs.example.com/guide) first.", [("url", "https://docs.example.com/guide")]),
    ("From: Jane Doe <jane.doe@example.com>", [("email", "jane.doe@example.com")]),
    ("Connect to [2001:db8::1]:443 or 198.51.100.7:22.", [("ip", "2001:db8::1"), ("ip", "198.51.100.7")]),
    (
        "pay: 4222222222222, 5105105105105100; thanks",
        [("credit_card", "4222222222222"), ("credit_card", "5105105105105100")],
    ),
    ("arp: 192.168.1.20 at 3c:22:fb:12:9a:01 on en0", [("ip", "192.168.1.20"), ("mac_address", "3c:22:fb:12:9a:01")]),
    (
        "Links: https://a.example.com/x?y=1, https://b.example.com/(z).",
        [("url", "https://a.example.com/x?y=1"), ("url", "https://b.example.com/(z)")],
    ),
]
MORE_NEGATIVES = [
    "Release 1.2.3.4-beta ships today.",
    "Checksum 4111-1111 and PIN 1234.",
    "Serial SN-2024-00-11-22-33 (not a MAC).",
    "The meeting is at 14:30:00 on 2024-05-01.",
    "Coordinates 48.8566, 2.3522 and 1.5.",
    "Phone +1 800 555 0199, fax 555.123.4567.",
    "Git commit 3f786850e387550fdab836ed7e6dc881de23001b.",
    "Email me at jane at example dot com.",
]
URL_EMAIL_RECORDS = [
    "Open https://mail.example.com/?to=jane@example.com now.",
    "ftp://user@files.example.com/pub is the mirror.",
    "Profile: https://mastodon.social/@alice.",
]
URL_EMAIL_LABELS = [
    [("url", "https://mail.example.com/?to=jane@example.com"), ("email", "jane@example.com")],
    [("url", "ftp://user@files.example.com/pub")],
    [("url", "https://mastodon.social/@alice")],
]
NESTED = {"http://192.168.0.10:3000/dashboard": [("ip", "192.168.0.10")]}
"""Values inside a labeled value that are entities of another type."""

_SLOT = re.compile(r"\{(\w+)\}")
_KIND = {"email": "email", "credit_card": "card number", "ip": "IP", "mac_address": "MAC", "url": "website"}
_POOLS = {"email": EMAILS, "credit_card": CARDS, "ip": IPS, "mac_address": MACS, "url": URLS}
_MIXED_SLOTS = {"email": "email", "card": "credit_card", "ip": "ip", "mac": "mac_address", "url": "url", "net": "ip"}


def _fill(template: str, values: Callable[[str], tuple[str, str | None]]) -> dict[str, Any]:
    """Fill ``template``; ``values(slot) -> (text, type or None)``. Returns a record with entity offsets."""
    text_parts: list[str] = []
    entities: list[dict[str, Any]] = []
    pos = 0
    length = 0
    for m in _SLOT.finditer(template):
        literal = template[pos : m.start()]
        text_parts.append(literal)
        length += len(literal)
        value, pii_type = values(m.group(1))
        if pii_type is not None:
            entities.append({"type": pii_type, "start": length, "end": length + len(value)})
            for inner_type, inner in NESTED.get(value, []):
                at = length + value.index(inner)
                entities.append({"type": inner_type, "start": at, "end": at + len(inner)})
        text_parts.append(value)
        length += len(value)
        pos = m.end()
    text_parts.append(template[pos:])
    return {"text": "".join(text_parts), "entities": entities}


def corpus(seed: int = 6) -> list[dict[str, Any]]:
    """The labeled corpus (about 600 records), the same for a given seed."""
    rng = random.Random(seed)
    records: list[dict[str, Any]] = []
    for pii_type, pool in _POOLS.items():
        for value in pool:
            for template in rng.sample(POSITIVE_TEMPLATES, 5):

                def slot(name: str, _v: str = value, _t: str = pii_type) -> tuple[str, str | None]:
                    if name == "kind":
                        return _KIND[_t], None
                    if name == "y":
                        return rng.choice(_POOLS[_t]), _t
                    return _v, _t

                records.append(_fill(template, slot))
    for values in NEGATIVES.values():
        for value in values:
            for template in rng.sample(NEGATIVE_TEMPLATES, 3):

                def neg(name: str, _v: str = value) -> tuple[str, str | None]:
                    if name == "m":
                        return rng.choice(rng.choice(list(NEGATIVES.values()))), None
                    return _v, None

                records.append(_fill(template, neg))
    for _ in range(60):
        template = rng.choice(MIXED_TEMPLATES)

        def mixed(name: str) -> tuple[str, str | None]:
            if name == "net":
                return "10.0.0.0", "ip"
            pii_type = _MIXED_SLOTS[name]
            return rng.choice(_POOLS[pii_type]), pii_type

        records.append(_fill(template, mixed))
    for text, labeled in MORE_POSITIVES:
        entities = []
        for pii_type, value in labeled:
            start = text.index(value)
            entities.append({"type": pii_type, "start": start, "end": start + len(value)})
        records.append({"text": text, "entities": entities})
    records.extend({"text": text, "entities": []} for text in MORE_NEGATIVES)
    for text, labels in zip(URL_EMAIL_RECORDS, URL_EMAIL_LABELS, strict=True):
        entities = []
        for pii_type, value in labels:
            start = text.index(value)
            entities.append({"type": pii_type, "start": start, "end": start + len(value)})
        records.append({"text": text, "entities": entities})
    return records
