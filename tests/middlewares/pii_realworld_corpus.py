"""A hand-labeled corpus of real-world text for the PII detectors, written before the detectors were tuned on it.

Every record is text as it turns up in chats, logs, CSV exports, mail headers and web pages, in many languages, with
the PII written the way people actually write it: non-ASCII email local parts and internationalised domains, quoted
addresses, addresses inside URL query strings (plain and percent-encoded), card numbers in CSV rows, values written
directly against CJK/Thai/Korean text with no space, IPs inside URLs and with a CIDR suffix, fullwidth digits and
``＠``, zero-width characters inside a value, decomposed accents. Hard negatives sit next to them (retina image names,
package pins, decorators, phone numbers, national ids, dates, hashes, versions).

``realworld_corpus()`` returns records ``{"text": str, "entities": [{"type", "start", "end"}]}`` with spans in the
ORIGINAL text (a zero-width character inside a value is inside its span). ``bench/pii_eval.py`` scores the detectors
on it (``--corpus realworld``).

Labeling decisions (``docs/middlewares/pii.md`` states them):

- an email inside a URL (``?to=ada@example.com``, ``?to=ada%40example.com``, ``mailto:``) is an email AND part of
  the URL: both are labeled (each ``PIIMiddleware`` handles its own type);
- an IP address inside a URL is an IP and part of the URL; ``192.168.1.17/24`` and ``10.0.0.0/8``: the address is
  labeled, the ``/prefix`` is not;
- quotes, angle brackets, CJK punctuation (``。，、「」（）``) and the surrounding CJK/Thai/Hangul characters are never
  part of an email or a URL; an email's local part and a URL are written in scripts that separate words with spaces
  or punctuation (Latin, Greek, Cyrillic, Devanagari, ...): an all-CJK address such as ``用户@例子.中国`` is outside
  the built-in detector (use ``detector=``);
- a fullwidth or zero-width-split value is labeled over its original characters.
"""

# ruff: noqa: RUF001, RUF002  (the corpus is made of fullwidth, Cyrillic and other lookalike characters on purpose)
from __future__ import annotations

import re
from typing import Any

__all__ = ["HELDOUT", "RECORDS", "heldout_corpus", "realworld_corpus"]

ZW = "\u200b"  # zero-width space
ZWJ = "\u200d"  # zero-width joiner
WJ = "\u2060"  # word joiner
SHY = "\u00ad"  # soft hyphen

# (text, [(type, value), ...]): every occurrence of a value in the text is an entity of that type.
RECORDS: list[tuple[str, list[tuple[str, str]]]] = [
    # -- internationalised emails ------------------------------------------------------------------------------
    ("Escríbeme a josé.garcía@correo.es cuando puedas.", [("email", "josé.garcía@correo.es")]),
    ("Bitte an müller@example.de schicken, danke!", [("email", "müller@example.de")]),
    ("Kontakt: jürgen.weiß@bücher.de (Vertrieb)", [("email", "jürgen.weiß@bücher.de")]),
    ("Пишите на чебурашка@ящик-с-апельсинами.рф сегодня.", [("email", "чебурашка@ящик-с-апельсинами.рф")]),
    ("Στείλτε στο δοκιμή@παράδειγμα.δοκιμή παρακαλώ.", [("email", "δοκιμή@παράδειγμα.δοκιμή")]),
    ("कृपया अजय@डाटा.भारत पर लिखें।", [("email", "अजय@डाटा.भारत")]),
    ("Écrivez à françois.lefèvre@exemple.fr, merci.", [("email", "françois.lefèvre@exemple.fr")]),
    ("Decomposed: jose\u0301@correo.es works too.", [("email", "jose\u0301@correo.es")]),
    (
        "ASCII local, IDN host: info@münchen.de and sales@xn--mnchen-3ya.de",
        [("email", "info@münchen.de"), ("email", "sales@xn--mnchen-3ya.de")],
    ),
    ("Zoë's address is zoë.o'neill@example.ie.", [("email", "zoë.o'neill@example.ie")]),
    # -- quotes and brackets -----------------------------------------------------------------------------------
    ('He wrote "ada@example.com" in the form.', [("email", "ada@example.com")]),
    ("Use 'grace.hopper@navy.mil' as the login.", [("email", "grace.hopper@navy.mil")]),
    ("Set EMAIL='ops@example.org' in .env", [("email", "ops@example.org")]),
    ("`admin@example.com` is the default user.", [("email", "admin@example.com")]),
    (
        "«marie@example.fr» et „hans@example.de“ et “li@example.cn”",
        [("email", "marie@example.fr"), ("email", "hans@example.de"), ("email", "li@example.cn")],
    ),
    ('From: "Ada Lovelace" <ada.lovelace@example.co.uk>', [("email", "ada.lovelace@example.co.uk")]),
    ('{"email": "k.tanaka@example.jp", "name": "Tanaka"}', [("email", "k.tanaka@example.jp")]),
    ("Reply-To: <noreply+bounce-42@mailer.example.com>", [("email", "noreply+bounce-42@mailer.example.com")]),
    # -- emails and IPs inside URLs ----------------------------------------------------------------------------
    (
        "Open https://mail.example.com/compose?to=jane@example.com&subject=hi now.",
        [("url", "https://mail.example.com/compose?to=jane@example.com&subject=hi"), ("email", "jane@example.com")],
    ),
    (
        "Link: https://example.com/unsubscribe?email=bob.smith%40example.org&list=7",
        [
            ("url", "https://example.com/unsubscribe?email=bob.smith%40example.org&list=7"),
            ("email", "bob.smith%40example.org"),
        ],
    ),
    ('<a href="mailto:hello@studio.example">mail us</a>', [("email", "hello@studio.example")]),
    (
        "Dashboard at http://192.168.0.10:3000/d/abc?orgId=1, API at http://10.1.2.3/api.",
        [
            ("url", "http://192.168.0.10:3000/d/abc?orgId=1"),
            ("ip", "192.168.0.10"),
            ("url", "http://10.1.2.3/api"),
            ("ip", "10.1.2.3"),
        ],
    ),
    (
        "IPv6 endpoint: http://[2001:db8::42]:8080/status",
        [("url", "http://[2001:db8::42]:8080/status"), ("ip", "2001:db8::42")],
    ),
    ("curl -s https://203.0.113.9/healthz", [("url", "https://203.0.113.9/healthz"), ("ip", "203.0.113.9")]),
    # -- CIDR suffixes -----------------------------------------------------------------------------------------
    ("inet 192.168.1.17/24 brd 192.168.1.255 scope global eth0", [("ip", "192.168.1.17"), ("ip", "192.168.1.255")]),
    ("allow from 10.0.0.0/8 and 172.16.0.0/12;", [("ip", "10.0.0.0"), ("ip", "172.16.0.0")]),
    ("inet6 2001:db8:abcd:12::5/64 scope global", [("ip", "2001:db8:abcd:12::5")]),
    ("Blocked 198.51.100.23/32 after the scan.", [("ip", "198.51.100.23")]),
    # -- cards in CSV and other tables -------------------------------------------------------------------------
    (
        "id,name,card,expiry\n1,Ada,4111111111111111,12/27\n2,Bob,5555555555554444,01/28",
        [("credit_card", "4111111111111111"), ("credit_card", "5555555555554444")],
    ),
    ('1;"Ana";"4111 1111 1111 1111";"2026-01-01"', [("credit_card", "4111 1111 1111 1111")]),
    ("3\tCarl\t378282246310005\tAmex", [("credit_card", "378282246310005")]),
    (
        'name,card\nDee,"6011 1111 1111 1117"\nEve,3530111333300000,',
        [("credit_card", "6011 1111 1111 1117"), ("credit_card", "3530111333300000")],
    ),
    ("amount,card,cvv\n12.50,4012888888881881,123", [("credit_card", "4012888888881881")]),
    ("| 4 | Flo | 5105-1051-0510-5100 | ok |", [("credit_card", "5105-1051-0510-5100")]),
    # -- values against CJK, Thai, Korean text -----------------------------------------------------------------
    ("请联系ada@example.com谢谢", [("email", "ada@example.com")]),
    ("邮箱：wang.wei@example.cn，电话：13812345678。", [("email", "wang.wei@example.cn")]),
    ("詳細はhttps://example.jp/faqをご覧ください。", [("url", "https://example.jp/faq")]),
    ("サーバー192.168.10.5に接続できません", [("ip", "192.168.10.5")]),
    ("카드번호4111111111111111로 결제했습니다", [("credit_card", "4111111111111111")]),
    ("kim@example.kr으로 보내주세요", [("email", "kim@example.kr")]),
    ("ติดต่อsomchai@example.co.thครับ", [("email", "somchai@example.co.th")]),
    ("请访问https://docs.example.com/zh/guide。", [("url", "https://docs.example.com/zh/guide")]),
    ("（詳しくはwww.example.co.jp/help）", [("url", "www.example.co.jp/help")]),
    ("「support@example.jp」までご連絡ください", [("email", "support@example.jp")]),
    ("MAC地址是00:1A:2B:3C:4D:5E吗？", [("mac_address", "00:1A:2B:3C:4D:5E")]),
    ("设备aa-bb-cc-dd-ee-ff在2001:db8::1上线", [("mac_address", "aa-bb-cc-dd-ee-ff"), ("ip", "2001:db8::1")]),
    # -- fullwidth characters ----------------------------------------------------------------------------------
    ("メール：ｔａｒｏ＠ｅｘａｍｐｌｅ．ｃｏｍ", [("email", "ｔａｒｏ＠ｅｘａｍｐｌｅ．ｃｏｍ")]),
    ("連絡先 yamada＠example.jp まで", [("email", "yamada＠example.jp")]),
    ("カード番号：４１１１ １１１１ １１１１ １１１１", [("credit_card", "４１１１ １１１１ １１１１ １１１１")]),
    ("IPは１９２．１６８．０．１です", [("ip", "１９２．１６８．０．１")]),
    ("Card ４０１２８８８８８８８８１８８１ on file.", [("credit_card", "４０１２８８８８８８８８１８８１")]),
    # -- zero-width and format characters inside a value -------------------------------------------------------
    (f"Mail ada{ZW}@example.com please.", [("email", f"ada{ZW}@example.com")]),
    (f"Mail ada@exam{ZWJ}ple.com please.", [("email", f"ada@exam{ZWJ}ple.com")]),
    (f"Card 4111{ZW}1111{ZW}1111{ZW}1111 ok", [("credit_card", f"4111{ZW}1111{ZW}1111{ZW}1111")]),
    (f"Card 4111 1111 11{SHY}11 1111 ok", [("credit_card", f"4111 1111 11{SHY}11 1111")]),
    (f"Host 10.0{WJ}.0.7 is down", [("ip", f"10.0{WJ}.0.7")]),
    (f"Go to https://evil{ZW}.example.com/login now", [("url", f"https://evil{ZW}.example.com/login")]),
    (f"MAC 00:1A:2B{ZW}:3C:4D:5E seen", [("mac_address", f"00:1A:2B{ZW}:3C:4D:5E")]),
    (f"{ZW}bob@example.com{ZW} at the start", [("email", "bob@example.com")]),
    # -- multi-language messages with several types ------------------------------------------------------------
    (
        "Hallo, meine Karte 4111 1111 1111 1111 wurde abgelehnt. Bitte an hans.müller@firma.de antworten.",
        [("credit_card", "4111 1111 1111 1111"), ("email", "hans.müller@firma.de")],
    ),
    (
        "Bonjour, l'adresse IP 203.0.113.7 a tenté de se connecter à https://intranet.exemple.fr/connexion.",
        [("ip", "203.0.113.7"), ("url", "https://intranet.exemple.fr/connexion")],
    ),
    (
        "Hola, mi correo es maría.lópez@ejemplo.es y mi tarjeta 5555 5555 5555 4444.",
        [("email", "maría.lópez@ejemplo.es"), ("credit_card", "5555 5555 5555 4444")],
    ),
    (
        "Здравствуйте! Мой IP 198.51.100.14, MAC 3c:22:fb:12:9a:01, почта ivan.petrov@example.ru.",
        [("ip", "198.51.100.14"), ("mac_address", "3c:22:fb:12:9a:01"), ("email", "ivan.petrov@example.ru")],
    ),
    (
        "こんにちは。注文の確認メールがtanaka.hiroshi@example.co.jpに届きません。カードは3566002020360505です。",
        [("email", "tanaka.hiroshi@example.co.jp"), ("credit_card", "3566002020360505")],
    ),
    (
        "您好，我的银行卡6221260000000000被冻结了，登录地址是https://bank.example.cn/login?id=8。",
        [("credit_card", "6221260000000000"), ("url", "https://bank.example.cn/login?id=8")],
    ),
    (
        "안녕하세요, 서버 IP는 10.20.30.40이고 관리 페이지는 http://10.20.30.40:9090/admin입니다.",
        [("ip", "10.20.30.40"), ("url", "http://10.20.30.40:9090/admin")],
    ),
    (
        "مرحبا، بريدي هو ahmad@example.sa ورقم بطاقتي 4000 0566 5566 5556 شكرا",
        [("email", "ahmad@example.sa"), ("credit_card", "4000 0566 5566 5556")],
    ),
    (
        "नमस्ते, मेरा ईमेल priya.sharma@example.in है और IP 192.0.2.55 है।",
        [("email", "priya.sharma@example.in"), ("ip", "192.0.2.55")],
    ),
    (
        "Olá! O site https://loja.exemplo.com.br/pedido/123 mostra o cartão 3782 822463 10005.",
        [("url", "https://loja.exemplo.com.br/pedido/123"), ("credit_card", "3782 822463 10005")],
    ),
    (
        "Merhaba, e-posta adresim ayşe.yılmaz@örnek.com.tr ve IP 100.64.1.2.",
        [("email", "ayşe.yılmaz@örnek.com.tr"), ("ip", "100.64.1.2")],
    ),
    # -- logs, headers, configs --------------------------------------------------------------------------------
    (
        '127.0.0.1 - - [15/Jan/2024:10:30:45 +0000] "GET /index.html HTTP/1.1" 200 512 "https://ref.example.com/"',
        [("ip", "127.0.0.1"), ("url", "https://ref.example.com/")],
    ),
    (
        "Jan 15 10:30:45 gw sshd[4242]: Failed password for root from 203.0.113.77 port 52144 ssh2",
        [("ip", "203.0.113.77")],
    ),
    ("Received: from mx.example.net ([198.51.100.3]) by mail.example.org", [("ip", "198.51.100.3")]),
    (
        "DHCPACK on 192.168.1.42 to 00:1a:2b:3c:4d:5e (laptop) via eth0",
        [("ip", "192.168.1.42"), ("mac_address", "00:1a:2b:3c:4d:5e")],
    ),
    (
        "X-Forwarded-For: 203.0.113.195, 70.41.3.18, 150.172.238.178",
        [("ip", "203.0.113.195"), ("ip", "70.41.3.18"), ("ip", "150.172.238.178")],
    ),
    ("server_name=https://api.example.com/v2/; # prod", [("url", "https://api.example.com/v2/")]),
    # -- hard negatives ----------------------------------------------------------------------------------------
    ("Use logo@2x.png and icon@3x.webp for retina screens.", []),
    ("pip install requests==2.31.0 numpy>=1.26.4", []),
    ("@property\ndef name(self): ...  # see @dataclass", []),
    ("npm i @scope/pkg@1.2.3 and @types/node@20.11.5", []),
    ("電話：03-1234-5678、郵便番号〒100-0001", []),
    ("身份证号11010519491231002X，手机13812345678", []),
    ("Version 10.0.19045.3693 released 2024-01-15T10:30:45Z", []),
    ("SHA-256: e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855", []),
    ("Total: 1,234,567,890,123,456 units; ratio 0.000123", []),
    ("IBAN DE89 3704 0044 0532 0130 00, BIC COBADEFFXXX", []),
    ("Tel. +49 (0) 30 1234567 / Fax +49 30 1234568", []),
    ("Die Summe beträgt 4.111,11 € bis zum 12.03.2024.", []),
    ("ping me @ 10am, or user@localhost on the dev box", []),
    ("Timestamp 1705314645123 and order 4111111111111112", []),
    ("std::vector<int> and a::b::c in C++; 12:34:56 UTC", []),
    ("Lot no. 2024.01.15.3 and chapter 1.2.3.4.5", []),
    ("周末见！价格是１２３４元。", []),
]


# Written AFTER the detectors were tuned on RECORDS (bench/pii_eval.py --corpus heldout). Its first score, before any
# change, was macro-F1 0.887 (credit_card 0.857, ip 0.909, mac_address 0.667, email and url 1.0; precision 1.0
# everywhere): it found three bugs (a grouped card followed by ",12/29"; an IP or MAC right after a fullwidth colon),
# which were then fixed, so it is no longer untouched. Not asserted by the tests.
HELDOUT: list[tuple[str, list[tuple[str, str]]]] = [
    (
        "Kontaktieren Sie uns unter kundenservice@stadtwerke-münster.de.",
        [("email", "kundenservice@stadtwerke-münster.de")],
    ),
    ("Mon adresse: élodie.ñúñez@exemple.fr; merci", [("email", "élodie.ñúñez@exemple.fr")]),
    ("メールはsato_ken@example.ne.jpまで。", [("email", "sato_ken@example.ne.jp")]),
    ("Email: <mailto:info@example.com>", [("email", "info@example.com")]),
    (
        "To: 'Li Wei' <li.wei@example.com.cn>, cc: ops@example.io",
        [("email", "li.wei@example.com.cn"), ("email", "ops@example.io")],
    ),
    ("redirect=https%3A%2F%2Fexample.com%2Fx&user=ana%40example.pt", [("email", "ana%40example.pt")]),
    ("email,name\nmax.mustermann@example.de,Max", [("email", "max.mustermann@example.de")]),
    ("the address (bob@example.org) is old", [("email", "bob@example.org")]),
    ("4111-1111-1111-1111,12/29,Alice", [("credit_card", "4111-1111-1111-1111")]),
    ("Tarjeta: 5555-5555-5555-4444.", [("credit_card", "5555-5555-5555-4444")]),
    ("卡号：6011000990139424，有效期12/27", [("credit_card", "6011000990139424")]),
    ("amex;378282246310005;ok", [("credit_card", "378282246310005")]),
    ("ssh admin@192.168.100.2 -p 2222", [("ip", "192.168.100.2")]),
    ("route add 10.8.0.0/24 via 10.8.0.1", [("ip", "10.8.0.0"), ("ip", "10.8.0.1")]),
    ("服务器地址：172.31.5.9，端口8080", [("ip", "172.31.5.9")]),
    ("Endpoint: https://[fd00::1]/metrics", [("url", "https://[fd00::1]/metrics"), ("ip", "fd00::1")]),
    ("The gateway is fe80::1ff:fe23:4567:890a%eth2.", [("ip", "fe80::1ff:fe23:4567:890a%eth2")]),
    ("网卡MAC：AC-DE-48-00-11-22。", [("mac_address", "AC-DE-48-00-11-22")]),
    ("hwaddr 0a:1b:2c:3d:4e:5f,", [("mac_address", "0a:1b:2c:3d:4e:5f")]),
    ("Siehe https://de.wikipedia.org/wiki/Straße.", [("url", "https://de.wikipedia.org/wiki/Straße")]),
    ("リンク：https://example.co.jp/a?b=1&c=２", [("url", "https://example.co.jp/a?b=1&c=２")]),
    ("see <https://example.org/docs>.", [("url", "https://example.org/docs")]),
    ("版本 v2.3.4.5 已发布，见 www.example.cn", [("url", "www.example.cn")]),
    ("Phone: +81-3-1234-5678, order 2024-0001-0002-0003", []),
    ("Build 4.19.0.123, hash 9f86d081884c7d659a2feaa0c55ad015", []),
    ("Quote @jane at 10:30, ref #4111", []),
]


def heldout_corpus() -> list[dict[str, Any]]:
    """The held-out records (see ``HELDOUT``)."""
    return _records(HELDOUT)


def realworld_corpus() -> list[dict[str, Any]]:
    """The labeled records: text plus entity spans (every occurrence of each labeled value)."""
    return _records(RECORDS)


def _records(source: list[tuple[str, list[tuple[str, str]]]]) -> list[dict[str, Any]]:
    records: list[dict[str, Any]] = []
    for text, labeled in source:
        entities: list[dict[str, Any]] = []
        for pii_type, value in labeled:
            spans = [m.span() for m in re.finditer(re.escape(value), text)]
            if not spans:
                raise AssertionError(f"label {value!r} not in {text!r}")
            for start, end in spans:
                entity = {"type": pii_type, "start": start, "end": end}
                if entity not in entities:
                    entities.append(entity)
        records.append({"text": text, "entities": entities})
    return records
