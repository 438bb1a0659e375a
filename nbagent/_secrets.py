"""Secrets out of text: what is shaped like an API key, URL credentials or a password
(:func:`redact_keys`), the secrets a provider names (:func:`provider_secrets`,
:func:`scrub`), and a value's strings redacted for the screen (:func:`redacted`).

A module of its own, importing nothing of nbagent, so the lowest values (a
:class:`~nbagent.ToolCall`'s repr) can use it; ``nbagent._errors`` re-exports it.
"""

from __future__ import annotations

import functools
import re
from collections.abc import Iterable
from typing import Any

_USERINFO = re.compile(r"([A-Za-z][A-Za-z0-9+.-]{0,31}://)[^/@\s]+@")
"""URL credentials: ``scheme://user:password@``. The scheme is bounded (32 characters, as
schemes are short): an unbounded one tried every start of a long word, quadratic (4 s for 40,000
characters and an ``@``)."""
_PASSWORD = re.compile(r"""(?i)\b\w*?(?:password|passwd|pwd)(["']?)\s*[=:]\s*""")
"""A password's name given a value: a libpq DSN's ``password=...``, an environment's
``DB_PASSWORD=`` / ``PGPASSWORD=``, ODBC's ``Pwd=...;``, a query string's, a JSON or YAML
``"password": "..."`` (the value, read by :func:`_value_at`, is hidden, quotes kept, an
escaped quote inside it too; after a colon an unquoted word of letters followed by more words
is prose, left alone; so is a comparison, ``password == ...``: a rule's text)."""
_NAMED = re.compile(r"""(?<![\w.-])-{0,2}([A-Za-z_][\w.-]{0,63})(["']?)\s*[=:]\s*""")
"""A name given a value (``api_key=``, ``"access_token": ``, ``X-Api-Key: ``, ``--api-key=``):
the value is read (:func:`_value_at`) only when :func:`_named_secret` judges the name a secret (a
value read after every name, to the next space, was quadratic in ``b=b=b=...``: 20 s for 80 KB,
107 s for a page's minified data), so a text of many names (``a=a=a=...``) is read once; a name
starts a word (or after ``--``), so a long word is tried once, not from each of its parts."""
_QUOTED = re.compile(r""""(?:[^"\\\n]|\\.)*("?)|'(?:[^'\\\n]|\\.)*('?)""")
"""A quoted value after a secret's name, an escaped quote inside it too, to its closing quote
or, where the line ends first (a text cut short), to the line's end."""
_ESCAPED_QUOTED = {
    '"': re.compile(r'\\"(?:[^"\\\n]|\\[^"\n])*(\\")?'),
    "'": re.compile(r"\\'(?:[^'\\\n]|\\[^'\n])*(\\')?"),
}
"""A value in escaped quotes (``password=\\"...\\"`` in a JSON string, ``\\'...\\'`` in a
repr's), to its closing escaped quote or, where none closes it, to the string's end."""
_TOKEN = re.compile(r"""[^\s"';&]*""")
"""An unquoted value after a secret's name: a token up to a space, a quote, ``;`` or ``&``."""
_GOES_ON = re.compile(r"""\s*(?:(["']?)[A-Za-z_][\w.-]{0,63}\1\s*:|[{\[])""")
"""What follows a comma that goes on with a JSON object, a dict's repr or a list of them: the
next member's name and its colon (``, "door":``, ``, 'door':``, ``, door:``), or the next
object or list (``}, {``)."""
_CLOSING = ",}])"
"""What an unquoted value in JSON or a dict's repr may be cut before (:func:`_value_at`)."""
_NAME_HINTS = ("key", "token", "secret", "auth", "cookie", "credential", "pass")
"""What a secret's name holds (lowercase) for :data:`_NAMED` to be worth reading a text."""
_DATA_WORDS = frozenset(
    {"token", "authorization", "cookie", "cookies", "credential", "credentials"}
)
"""Secrets' names that alone, after a colon (JSON, YAML, a header, prose), are as often data
the model needs (a tokenizer's ``"token": "Hello"``, an ``"authorization": "granted"`` status,
"Invalid token: expired"): their value is hidden when given with ``=`` (a query string, an
argument, an environment line) only. ``access_token: ...``, ``secret: ...`` are hidden; a
name ending in ``bearer`` is read by its token's shape (:data:`_KEY_LIKE`), not as a name,
as ``Authorization: Basic ...`` is (:func:`_basic_hidden`); after ``cookie:`` only the
values of ``name=value`` pairs are hidden (:func:`_cookies_hidden`), so ``"cookie": "none"``
stays."""
_LITERALS = frozenset({"true", "false", "null", "True", "False", "None"})
"""JSON's and Python's literals: under a secret's name they say nothing secret (``"secret":
false``, ``api_key=None``) and the model needs them, so they stay as they are."""
_KEY_PREFIXES = ("sk-", "earer", "gsk_", "xai-", "AIza", "hf_", "pplx-", "nvapi-", "r8_")
"""What a key-shaped token starts with (any of them in a text: it is searched)."""
_KEY_LIKE = re.compile(
    r"(?:\b|(?<=_)(?=sk-|xai-|pplx-|nvapi-))"
    r"(?:(sk-(?:ant-)?|[Bb]earer\s+)([\w.~+/=-]+)"
    r"|(gsk_|xai-|hf_|pplx-|r8_)([A-Za-z0-9]+)|(AIza|nvapi-)([A-Za-z0-9_-]+))"
)
"""An API key's shape: a known provider key prefix (OpenAI's and Anthropic's ``sk-``,
Groq's ``gsk_``, xAI's ``xai-``, Google's ``AIza``, Hugging Face's ``hf_``, Perplexity's
``pplx-``, NVIDIA's ``nvapi-``, Replicate's ``r8_``) or a bearer token, then 12+ token
characters (a digit among them, so prose like "Bearer authentication" is left alone; not a
final dot). A key of another shape is scrubbed where it is known: the chat's provider's
(:func:`scrub`). A prefix with a hyphen is read after ``_`` too (``use_sk-proj-...``: ``\b``
does not match there), as no identifier holds a hyphen; ``gsk_``, ``hf_``, ``r8_`` and ``AIza``
after ``_`` are an identifier's parts (``load_hf_checkpoint2024v1``). Each match takes its
whole token (judged by :func:`_keys_hidden`), so a long run of prefixes (``sk-sk-sk-...``)
is read once, not once a prefix (that was quadratic)."""


_SHAPED = {"gsk_": "", "xai-": "", "hf_": "", "pplx-": "", "r8_": "", "AIza": "-_", "nvapi-": "-_"}
"""The other providers' prefixes, and what a key of theirs holds after them besides ASCII
letters and digits (16 or more, a digit among them): an identifier such as
``hf_dataset_split_2023`` is no key."""


def _is_key(token: str, prefix: str = "sk-") -> bool:
    also = _SHAPED.get(prefix)
    if also is not None:
        token = token.rstrip(".")  # a final dot is the sentence's
        body = token.translate({ord(c): None for c in also})
        return (
            len(token) >= 16
            and body.isascii()
            and body.isalnum()
            and any(c.isdecimal() for c in body)
        )
    return len(token.rstrip(".")) >= 12 and any(c.isdecimal() for c in token)


def _keys_hidden(text: str, hidden: str) -> str:
    """``text`` with each key-shaped token (:data:`_KEY_LIKE`) as ``hidden``, read once."""
    out: list[str] = []
    pos = 0
    while (match := _KEY_LIKE.search(text, pos)) is not None:
        at = 1 if match.group(1) else 3 if match.group(3) else 5  # which kind of key
        prefix, token = match.group(at), match.group(at + 1)
        if prefix == "sk-ant-" and not _is_key(token):  # "sk-" and a token "ant-..."
            prefix, token = "sk-", "ant-" + token
        if _is_key(token, prefix):
            dots = len(token) - len(token.rstrip("."))  # a final dot is the sentence's
            out += (text[pos : match.start()], prefix, hidden)
            pos = match.end() - dots
            continue
        # not a key; a prefix inside its token has a shorter token with no more digits,
        # but for a "Bearer" it ends with: that one's token is past the space
        bearer = match.end() - 6
        if at == 1 and bearer >= match.start(2) and text[bearer:].startswith(("Bearer", "bearer")):
            out.append(text[pos:bearer])
            pos = bearer
            continue
        out.append(text[pos : match.end()])
        pos = match.end()
    out.append(text[pos:])
    return "".join(out)


def redact_keys(text: str, hidden: str = "***") -> str:
    """``text`` with anything shaped like an API key, URL credentials, a password given
    as ``password=``/``"password": ...`` and a value given under another secret's name
    (:func:`secret_field`: ``api_key=...``, ``"access_token": "..."``; :data:`_DATA_WORDS`
    with ``=`` only) replaced by ``***`` (``hidden``: another marker, e.g. one Markdown does
    not read as emphasis, put back after rendering). HTTP's own forms too: a ``Basic`` token
    after an Authorization header's name, or one that is base64 of ``user:password``
    (:func:`_basic_hidden`), another scheme's token or a lone one after that name
    (:func:`_authorization_hidden`), and each cookie's value after a ``Cookie:`` / ``Set-Cookie:``
    header's name (:func:`_cookies_hidden`). The one reader of text for every path, what
    the model reads included (:func:`scrub`). A value is hidden
    where it is named, nowhere else (``api_key=K and token K`` keeps the second ``K``), and a
    literal under a name (``true``, ``false``, ``null``, ``True``, ``False``, ``None``) stays
    as it is. A bare ``token K`` is not read: "token" alone is prose too often."""
    lowered = text.lower()  # what is hidden below holds none of the words looked for
    if "authorization" in lowered:
        text = _authorization_hidden(text, hidden)
    if any(prefix in text for prefix in _KEY_PREFIXES):
        text = _keys_hidden(text, hidden)
    if "basic" in lowered:
        text = _basic_hidden(text, hidden)
    if "@" in text:
        text = _USERINFO.sub(lambda m: f"{m[1]}{hidden}@", text)
    if "pass" in lowered or "pwd" in lowered:
        text = _values_hidden(text, _PASSWORD, hidden)
    if "cookie" in lowered and ":" in text:
        text = _cookies_hidden(text, hidden)
    if ("=" in text or ":" in text) and any(hint in lowered for hint in _NAME_HINTS):
        text = _values_hidden(text, _NAMED, hidden)
    return text


_BASIC = re.compile(
    r"(?:(?:(?<![\w-])|(?<=\\[nrt]))((?i:(?:http_)?(?:proxy[-_])?authorization))"
    r"\\?[\"']?[ \t]*[:=][ \t]*\\?[\"']?)?"
    r"\b(?:[Bb]asic|BASIC)[ \t]+([A-Za-z0-9+/]+={0,2})([\w.~+/=-]*)"
)
"""HTTP Basic credentials: the scheme and a token (base64, judged by :func:`_credentials`,
and any other of token68's characters after it), and before them an Authorization header's
name if there is one (``Authorization:``, ``Proxy-Authorization:``, a quoted key, a WSGI
environ's ``HTTP_AUTHORIZATION=``, ``authorization=``): after it the token is hidden
whatever it decodes to."""
_AUTHORIZATION = re.compile(
    r"(?:(?<![\w-])|(?<=\\[nrt]))(?i:(?:http_)?(?:proxy[-_])?authorization)"
    r"\\?[\"']?[ \t]*[:=][ \t]*\\?[\"']?([\w.~+/=-]+)(?:[ \t]+([\w.~+/=-]+))?"
)
"""An Authorization header's name (in the forms :data:`_BASIC` reads) and the one or two
words after it: a scheme and its token, or a token alone (:func:`_authorization_hidden`)."""
_AUTH_TOKEN = 16
"""The fewest characters (a digit among them) of a token :func:`_authorization_hidden`
hides: a word of prose or a status (``granted``, ``required``) is shorter or holds none."""


def _authorization_hidden(text: str, hidden: str) -> str:
    """``text`` with the credentials after each Authorization header's name hidden whatever
    their scheme: a token alone (``Authorization: ***``, ``{"Authorization": "***"}``), or
    after a scheme word (``Token ***``, as Django REST framework's; ``Negotiate ***``), of
    :data:`_AUTH_TOKEN` characters or more holding a digit (a final dot is the sentence's).
    ``Basic`` and ``Bearer`` are read here too, and by :func:`_basic_hidden` and
    :data:`_KEY_LIKE` as before; ``"authorization": "granted"`` and "Authorization: required
    for this endpoint" stay. Each word is read once or twice."""
    out: list[str] = []
    pos = 0
    while (match := _AUTHORIZATION.search(text, pos)) is not None:
        at = 1 if _auth_token(match.group(1)) else 2 if _auth_token(match.group(2)) else 0
        if not at:  # the next header's name may follow the first word
            out.append(text[pos : match.end(1)])
            pos = match.end(1)
            continue
        token = match.group(at)
        out += (text[pos : match.start(at)], hidden)
        pos = match.start(at) + len(token.rstrip("."))
    out.append(text[pos:])
    return "".join(out)


def _auth_token(word: str | None) -> bool:
    """Whether ``word`` after an Authorization header's name is a token to hide."""
    if word is None:
        return False
    word = word.rstrip(".")
    return len(word) >= _AUTH_TOKEN and any(c.isdecimal() for c in word)


_PROSE_AFTER = re.compile(r"[ \t]+[A-Za-z]")
"""A word after a token: the token was a word of prose (``Basic auth is ...``)."""


def _basic_hidden(text: str, hidden: str) -> str:
    """``text`` with each Basic token that is credentials as ``Basic ***``, wherever it is (a
    header line, a dict's repr, a curl command), as a bearer token is hidden: after an
    Authorization header's name, any token but a lowercase word prose goes on after
    ("Authorization: Basic auth is ..."); elsewhere one :func:`_credentials` reads as
    ``user:password`` ("Basic usage", "Basic Only" stay). A token that is the word Basic
    again is read as the scheme (``Basic Basic <token>``). Each token is read twice at most."""
    out: list[str] = []
    pos = 0
    header = False  # a "Basic" after an Authorization header's name, read as the scheme
    while (match := _BASIC.search(text, pos)) is not None:
        header = (header and match.start() == pos) or match.group(1) is not None
        token = match.group(2) + match.group(3)
        if token.lower() == "basic":  # the scheme again: the token is after it
            out.append(text[pos : match.start(2)])
            pos = match.start(2)
            continue
        end = match.end() - (len(token) - len(token.rstrip(".")))  # a final dot: the sentence's
        prose = token.islower() and token.isalpha() and _PROSE_AFTER.match(text, end)
        if header and not prose:
            secret = True  # after an Authorization header's name: whatever it decodes to
        else:  # base64 alone (a final dot is the sentence's), read as user:password
            secret = not match.group(3).strip(".") and _credentials(match.group(2))
        if secret:
            out += (text[pos : match.start(2)], hidden)
            pos = end
        else:
            out.append(text[pos : match.start(2)])
            pos = match.start(2)
        header = False
    out.append(text[pos:])
    return "".join(out)


_CREDENTIALS_MIN = 6
"""The fewest bytes a Basic token outside an Authorization header decodes to for
:func:`_credentials` (``a:bcde``): fewer matched words of prose (``Only`` is ``:yr``,
``1446`` two bytes and a ``:``)."""


def _credentials(token: str) -> bool:
    """Whether ``token``, a Basic token found outside an Authorization header, is base64
    (its padding may be left off) of ``user:password``: :data:`_CREDENTIALS_MIN` bytes or
    more, UTF-8 or (as requests encodes them) latin-1 text with no control character, a
    ``:`` after a user of printable ASCII with no space and a password not empty; decoded
    as latin-1, no more than a quarter of it beyond ASCII. Of the 324,501 distinct words of
    Python 3.11's stdlib sources 7 pass (3 of them not base64 of credentials:
    ``cloudTrail``, ``ListOutpostsWithS3``, ``bzr+file``); a UTF-8 decode with a ``:``
    alone passed 95 (``Only`` 1,346 times, ``1446``)."""
    if len(token) < 8 or len(token) % 4 == 1:
        return False
    import base64  # only when a text says Basic
    import binascii

    try:
        raw = base64.b64decode(token + "=" * (-len(token) % 4), validate=True)
    except (binascii.Error, ValueError):  # not base64
        return False
    try:
        decoded, latin = raw.decode(), False
    except UnicodeDecodeError:
        decoded, latin = raw.decode("latin-1"), True
    user, colon, password = decoded.partition(":")
    return (
        len(raw) >= _CREDENTIALS_MIN
        and bool(colon and user and password)
        and user.isascii()
        and user.isprintable()
        and " " not in user
        and password.isprintable()  # no control character (C0, DEL, C1)
        and not (latin and 4 * sum(not c.isascii() for c in decoded) > len(decoded))
    )


_COOKIE_HEAD = re.compile(
    r"""(?i)(?:(?<![\w-])|(?<=\\[nrt]))(["']?)((?:set-)?cookie)(\1?)[ \t]*:[ \t]*(["']?)"""
)
"""A ``Cookie:`` or ``Set-Cookie:`` header's name (a header line's, after an escaped line
end too, or a quoted key's in JSON or a dict's repr: its quotes), its colon and the quote
its value opens with, if any; a quote before the name that does not close after it opens a
string holding the header's line (``curl -H 'Cookie: ...'``, ``["Set-Cookie: ..."]``)."""
_COOKIE_NAME = r"([!#$%&*+.^_|~0-9A-Za-z-]+)"
"""A cookie's name: a token's characters (a backtick left out: it closes a Markdown code
span, ``the `Set-Cookie:` header``)."""
_CLOSED_AFTER = r"""(?:,\s*["'{\[(]|[}\])]++(?:,|$)|$)"""
_CLOSED = re.compile(_CLOSED_AFTER)
"""What follows an apostrophe that closes a string a header line is in (a repr's), not a
cookie's (whose next is ``;``, a space or the line's end): the next item, closing brackets
the structure goes on after, or the text's end."""
_DQ_CLOSED = re.compile(r"[\s,:}\])]|$")
"""What follows a ``"`` that closes a string a header line is in (JSON's): a DQUOTE is no
cookie-octet, so one followed by anything else makes the value no cookie's."""
_COOKIE_VALUES = {
    # a header line: a DQUOTE is " (\" in it an escape, as http.cookies writes), or \"
    # where the line is in a string of JSON or a repr; an apostrophe is the value's unless
    # it closes a string the line is in (_CLOSED after it), and so is \' (in a repr's)
    "": (
        r'"(?:[^"\\\r\n]|\\[^\r\n])*"?|\\"(?:[^"\\\r\n]|\\[^"\r\n])*(?:\\")?',
        rf"(?:[^;,\s\"'\\]|'(?!{_CLOSED_AFTER})|\\')*",
    ),
    # in a string quoted with " (JSON, a repr): a DQUOTE is \"; JSON may write / as \/
    '"': (r'\\"(?:[^"\\\r\n]|\\[^"\r\n])*(?:\\")?', r'(?:[^;,\s"\\]|\\/)*'),
    # in a string quoted with ' (a repr, a shell's): an apostrophe is \'
    "'": (r'"(?:[^"\\\'\r\n]|\\[^\r\n])*"?', r"(?:[^;,\s'\"\\]|\\')*"),
}
_COOKIE_PAIRS = {
    quote: re.compile(rf"{_COOKIE_NAME}(?:[ \t]*=[ \t]*({quoted}|{bare}))?(?:[ \t]*([;,])[ \t]*)?")
    for quote, (quoted, bare) in _COOKIE_VALUES.items()
}
"""A cookie's ``name=value`` (a value in DQUOTEs as one), or a lone word (``Secure``), and
the ``;`` after it (``,`` between cookies joined in one line), if any: in a header line, and
in a string quoted with ``"`` or ``'``."""
_COOKIE_RESTS = {
    "": re.compile(r"(?:[^\\\r\n]|\\[^rn\r\n])*"),
    '"': re.compile(r'(?:[^"\\\r\n]|\\[^rn\r\n])*'),
    "'": re.compile(r"(?:[^'\\\r\n]|\\[^rn\r\n])*"),
}
"""The rest of a header's value: to the line's end (or an escaped ``\\r``, ``\\n``), or to
the quote closing the string it is in."""
_COOKIE_RUN = re.compile(rf"""(?:{_COOKIE_NAME[1:-1]}=[^;,\s"'\\]+[ \t]*;[ \t]*)+""")
"""A run of plain ``name=value;`` pairs a Cookie header starts with, read in one match (a
header of thousands of cookies, one at a time, cost 3x an ordinary text of its length)."""
_COOKIE_RUN_VALUE = re.compile(r"=[^;\s]+")
"""A plain value in :data:`_COOKIE_RUN`, after its ``=``."""
_COOKIE_SEP = re.compile(r"[ \t]*([;,])[ \t]*")
"""What follows an ``Expires`` date: the next part's ``;``, or the next cookie's ``,``."""
_COOKIE_DATE = re.compile(r"[A-Za-z]+,[ \t]*[\w:-]+(?:[ \t]+[\w:-]+)*")
"""An ``Expires`` date with its comma: ``Wed, 21 Oct 2015 07:28:00 GMT``."""
_COOKIE_ATTRIBUTES = frozenset(
    {"path", "domain", "expires", "max-age", "samesite", "secure", "httponly"}
    | {"partitioned", "priority", "version", "comment"}
)
"""A ``Set-Cookie``'s attributes after its cookie: kept as they are (the cookie's value is
the secret, not where it is sent)."""
_COOKIE_HEADERS = frozenset({"cookie", "set-cookie"})
_COOKIE_WORD = 16
"""A lone word of letters shorter than this after ``Set-Cookie:`` is data, not a cookie
without a name (``Set-Cookie: yes``, ``{"Set-Cookie": "none"}``)."""


def _cookies_hidden(text: str, hidden: str) -> str:
    """``text`` with each cookie's value after a ``Cookie:`` or ``Set-Cookie:`` header's name
    (:data:`_COOKIE_HEAD`, any case) as ``***``: ``Cookie: session=***; theme=***``,
    ``Set-Cookie: sid=***; Path=/; HttpOnly`` (its attributes kept), in a header line or
    under a quoted key (``{"Cookie": "sid=***"}``, ``"sid=\\"***\\""`` where JSON escapes a
    quoted value's DQUOTEs). Read from the name to the first part that is neither
    ``name=value`` nor an attribute (``Cookie: required`` and a ``"cookie": "none"`` status
    are not read as a cookie, :data:`_DATA_WORDS`); a ``Set-Cookie``'s first part is its
    cookie, with or without a name. A value that goes on with what no cookie holds (a stray
    quote or backslash) hides the rest of the header's value. Each character is read once."""
    out: list[str] = []
    pos = 0
    while (head := _COOKIE_HEAD.search(text, pos)) is not None:
        at = head.end()
        opened, name, closed, value_quote = head.groups()
        out.append(text[pos:at])
        quote = value_quote or ("" if closed else opened)  # the string the value is in
        pos = _pairs_hidden(text, at, len(name) > 6, quote, hidden, out)  # > 6: Set-Cookie
    out.append(text[pos:])
    return "".join(out)


def _cookie_ends(text: str, at: int, quote: str) -> bool:
    """Whether a header's part ends at ``at`` with no ``;`` or ``,``: the text's or the
    line's end (``\\r\\n`` escaped in JSON or a repr too), a space, or the quote closing the
    string it is in (in a header line, a quote :data:`_CLOSED`, :data:`_DQ_CLOSED` follows)."""
    after = text[at : at + 1]
    if not after or after.isspace():
        return True
    if after == "\\":
        return text[at + 1 : at + 2] in ("r", "n", "t")
    if quote:
        return after == quote
    if after == '"':
        return _DQ_CLOSED.match(text, at + 1) is not None
    return after == "'" and _CLOSED.match(text, at + 1) is not None


def _pairs_hidden(
    text: str, at: int, setting: bool, quote: str, hidden: str, out: list[str]
) -> int:
    """The parts of one header's value from ``at`` onto ``out``, each cookie's value as
    ``hidden``; where they end."""
    pairs = _COOKIE_PAIRS[quote]
    first = True  # a Set-Cookie's first part (again after a comma: the next cookie)
    if not setting and (run := _COOKIE_RUN.match(text, at)) is not None:
        out.append(_COOKIE_RUN_VALUE.sub("=" + hidden.replace("\\", "\\\\"), run[0]))
        at = run.end()
    while True:
        pair = pairs.match(text, at)
        if (
            setting
            and first
            and _base64_cut(text, at, pair)
            and (b64 := _NAMELESS.match(text, at)) is not None
            and _nameless(b64)
        ):  # base64 without a name, read as a name and "=" or cut at a "/"
            after = _COOKIE_SEP.match(text, b64.end())
            ends = (quote or text[b64.end() : b64.end() + 1] not in ('"', "'")) and _cookie_ends(
                text, b64.end(), quote
            )  # in a header line a quote after "=" opens a value: a name's "=", no padding
            if after is not None or ends:
                out.append(hidden)
                at = b64.end() if after is None else after.end()
                if after is None:
                    break
                out.append(text[b64.end() : at])
                first = after.group(1) == ","
                continue
        if pair is None:
            break
        name, value, sep = pair.groups()
        end = pair.end()
        if value is not None and (
            (sep is None and not _cookie_ends(text, end, quote))
            or (value[:1] in ('"', "\\") and not _dquoted(value))
        ):  # it goes on with what no cookie holds: the rest of the header's value is hidden
            rest = _COOKIE_RESTS[quote].match(text, pair.start(2))
            assert rest is not None  # it matches nothing at least
            out += (text[at : pair.start(2)], hidden)
            return rest.end()
        if setting and not first and (lowered := name.lower()) in _COOKIE_ATTRIBUTES:
            if sep == "," and lowered == "expires":  # a date: Wed, 21 Oct...
                date = _COOKIE_DATE.match(text, pair.start(2))
                if date is not None:
                    after = _COOKIE_SEP.match(text, date.end())
                    sep = None if after is None else after.group(1)
                    end = date.end() if after is None else after.end()
            out.append(text[at:end])
        elif value is None:  # a word: a Set-Cookie's cookie without a name, or no cookie
            if not (setting and first) or name in _LITERALS:
                break  # prose, a status ("Cookie: required"), a null
            if sep is None and not _cookie_ends(text, end, quote):
                break  # prose: "The Set-Cookie: header tells ..."
            if name.lower() in _COOKIE_ATTRIBUTES if sep else _word(name):
                out.append(text[at:end])  # "Set-Cookie: HttpOnly; ...", "Set-Cookie: yes"
            else:
                out += (hidden, text[pair.end(1) : end])
        elif value == hidden or not value:
            out.append(text[at:end])
        else:
            start, stop = pair.span(2)
            dq = '\\"' if value.startswith('\\"') else '"' if value[0] == '"' else ""
            if dq and value[len(dq) : len(value) - len(dq)] in ("", hidden):
                out.append(text[at:end])
            else:
                out += (text[at:start], dq, hidden, dq, text[stop:end])
        at = end
        if sep is None:
            break
        first = sep == ","
    return at


def _dquoted(value: str) -> bool:
    """Whether a cookie's value that opens with a DQUOTE (``"``, or ``\\"`` in JSON) closes
    it; true of any other value."""
    if value.startswith('\\"'):
        return len(value) >= 4 and value.endswith('\\"')
    if value.startswith('"'):
        return len(value) >= 2 and value.endswith('"')
    return True


_NAMELESS = re.compile(r"([A-Za-z0-9+/_-]+)(=*)")
"""A Set-Cookie's first part that may be base64 without a name (:func:`_nameless`)."""


def _base64_cut(text: str, at: int, pair: re.Match[str] | None) -> bool:
    """Whether a Set-Cookie's first part at ``at``, read as :data:`_COOKIE_PAIRS` reads it
    (``pair``), may be base64 cut short: a ``/`` where a name ends (or none begins), or a name
    given nothing but ``=``."""
    if pair is None or pair.group(2) is None:
        stop = at if pair is None else pair.end(1)
        return text[stop : stop + 1] == "/"
    return not pair.group(2).strip("=")


def _nameless(part: re.Match[str]) -> bool:
    """Whether a Set-Cookie's first part (:data:`_NAMELESS`) is base64, a cookie without a
    name, that :data:`_COOKIE_PAIRS` reads otherwise (``YWRt...cmQ=``: a name and an empty
    value; ``AAAA/A``: a name ending at the ``/``): padded (its length a multiple of 4, and
    not a short word of letters: ``sid=``, as a cookie deleted is sent, and ``session_id=``,
    11 long, keep their names), or holding a ``/`` and :data:`_COOKIE_WORD` long."""
    body, pad = part.groups()
    if pad:
        return len(pad) <= 2 and len(part[0]) % 4 == 0 and not _word(body)
    return "/" in body and len(body) >= _COOKIE_WORD


def _word(part: str) -> bool:
    """Whether a lone part after ``Set-Cookie:`` is a word (:data:`_COOKIE_WORD`)."""
    return part.isascii() and part.isalpha() and len(part) < _COOKIE_WORD


@functools.lru_cache(maxsize=4096)
def _named_secret(name: str, assigned: bool) -> bool:
    """Whether a value given under ``name`` is hidden by :func:`_named_hidden`: a secret's
    name (:func:`secret_field`), not a password's (:data:`_PASSWORD` reads those, prose
    rule and all), and one of :data:`_DATA_WORDS` only when ``assigned`` (with ``=``)."""
    lowered = name.lower()
    if lowered.endswith(("password", "passwd", "pwd")) or not secret_field(name):
        return False
    if not assigned and (
        lowered in _COOKIE_HEADERS or (lowered[0] in "nrt" and lowered[1:] in _COOKIE_HEADERS)
    ):  # a header's (after "\\r\\n" in JSON: nSet-Cookie): _cookies_hidden hides its values
        return False
    words = [w.lower() for w in _NAME_PARTS.split(name) if w]
    if words[-1] == "bearer":
        return False
    return assigned or len(words) > 1 or words[0] not in _DATA_WORDS


def _values_hidden(text: str, names: re.Pattern[str], hidden: str) -> str:
    """``text`` with the value after each name ``names`` finds (:data:`_PASSWORD`, or
    :data:`_NAMED` where :func:`_named_secret` judges the name a secret's) as ``hidden``
    (:func:`_value_at`). A name that is no secret is passed over and what follows it read on
    (``url=https://h/?api_key=...``). The name is judged first, and a value read is taken
    whole, so each character is read a few times at most (a value read after every name was
    quadratic in ``b=b=b=...``)."""
    out: list[str] = []
    pos = 0
    while (head := names.search(text, pos)) is not None:
        at = head.end()
        assigned = text[head.start() : at].rstrip().endswith("=")
        if names is _NAMED and not _named_secret(head.group(1), assigned):
            out.append(text[pos:at])
            pos = at
            continue
        end, shown = _value_at(text, head, assigned, hidden)
        out += (text[pos:at], shown)
        pos = end
    out.append(text[pos:])
    return "".join(out)


_AFTER_SPAN = ")]}.,:;!?"
"""What may follow a Markdown code span's closing backtick in a value's token (``password=...`),``):
the sentence's punctuation, kept with the backtick (:func:`_value_at`)."""
_CONNECTIVES = frozenset({"or", "and", "the", "a", "an", "is", "to", "of", "in", "for", "if"})
"""After ``name=`` and a space, the words that begin prose, not a value (an SDK's hint
"(argument api_key= or the OPENAI_API_KEY environment variable)"); any other word there is
a value (``password = correct horse``, ``PGPASSWORD= swordfish psql``)."""


def _value_at(text: str, head: re.Match[str], assigned: bool, hidden: str) -> tuple[int, str]:
    """The value given in ``text`` after ``head`` (a secret's name, the quote closing it if
    any, ``=`` or ``:`` and the spaces after): where it ends, and how it is shown. Quoted, it
    is hidden inside its quotes (to the line's end when they do not close; quotes escaped in
    a JSON string or a repr, ``\\"...\\"``, to the string's end); unquoted, the
    token up to a space, a quote, ``;`` or ``&`` is hidden whole in ``name=value`` (a DSN, an
    environment, argv, a query string: a password holds ``,]`` or ``}}`` as any other
    characters). After a colon or a quoted name (JSON, a dict's repr,
    YAML) a token is cut before the ``,`` ``}`` ``]`` ``)`` it ends with when they close the
    structure (``4711}}``) or a comma goes on with it (``4711, "door":``, ``4711},{``), and
    shows as ``"***"`` under a quoted name, so JSON or a dict's repr still parses. Left as it
    is: nothing (``password=;``, ``""``), a comparison (``password == x``), ``***``, a
    literal (:data:`_LITERALS`), a list or an object opening (its members have names of their
    own), after a colon a word followed by more words (prose: "password: click here"), and
    after ``=`` and a space a connective (:data:`_CONNECTIVES`) followed by more words (an
    SDK's "(argument api_key= or the ... variable)")."""
    at = head.end()
    named = head.group(head.re.groups)  # the last group: the quote closing the name
    first = text[at : at + 1]
    if not first or first in "=;&":
        return at, ""
    if first in "\"'":
        quoted = _QUOTED.match(text, at)
        assert quoted is not None  # it starts at a quote
        closing = quoted.group(1) if first == '"' else quoted.group(2)  # "" where none closes
        inner = quoted.group(0)[1 : len(quoted.group(0)) - len(closing)]
        if not inner or inner == hidden:
            return quoted.end(), quoted.group(0)
        return quoted.end(), f"{first}{hidden}{closing}"
    if first == "\\" and text[at + 1 : at + 2] in ('"', "'"):  # a quote, escaped in a string
        quoted = _ESCAPED_QUOTED[text[at + 1]].match(text, at)
        assert quoted is not None  # it starts at an escaped quote
        closing = quoted.group(1) or ""
        inner = quoted.group(0)[2 : len(quoted.group(0)) - len(closing)]
        if not inner or inner == hidden:
            return quoted.end(), quoted.group(0)
        return quoted.end(), f"{text[at : at + 2]}{hidden}{closing}"
    structured = bool(named) or not assigned  # JSON, a dict's repr, YAML
    if structured and first in "[{":
        return at, ""  # a list or an object opens: read on, into it
    token = _TOKEN.match(text, at)
    assert token is not None  # it matches nothing at least
    end, value = token.end(), token.group(0)
    ticks = ""
    if "`" in value:  # a Markdown code span's backticks are the sentence's, not the value's
        if (stripped := value.rstrip(_AFTER_SPAN)).endswith("`"):  # `api_key=...`, `X:` header
            value = stripped.rstrip("`")  # the span closes: the value ends before it
            end = at + len(value)
        ticks = value[: len(value) - len(value.lstrip("`"))]  # password=`...`: one opens
        value, at = value[len(ticks) :], at + len(ticks)
    if not value.strip(","):  # nothing, or a sentence's comma: "password=, api_key= and"
        return head.end(), ""
    if value in ("[", "{"):  # name=[ then a quoted item: as in JSON
        return head.end(), ""
    opens = value.rstrip("{[")  # compact JSON's next object: 1},{"api_key": ...
    core = (opens if opens.endswith(",") else value).rstrip(_CLOSING)
    if value == hidden or core in _LITERALS:
        return end, ticks + value
    spaced = not structured and text[at - 1 : at].isspace() and core in _CONNECTIVES
    if (structured or spaced) and core.isalpha() and core == value:
        after = text[end : end + 2]
        if len(after) == 2 and after[0] == " " and after[1].isalpha():
            return end, ticks + value  # prose ("password: click here", "api_key= or the")
    tail = value[len(core) :]
    cut = (
        structured
        and tail
        and core
        and not any(c in core for c in "{[(")  # a bracket the value opened: its own
        and (tail[-1] != "," or _GOES_ON.match(text, end) is not None)  # , "door":
    )
    return end, f"{ticks}{named}{hidden}{named}{tail if cut else ''}"


def redact_named(text: str, hidden: str = "***") -> str:
    """``text`` (JSON a person is shown: a call's arguments that did not parse) through
    :func:`redact_keys`, and then a string, a number or a bool under any secret's name
    (:func:`secret_field`: ``"api_key": "..."``, ``"token": true``) as ``***`` too, as
    :func:`redacted` hides it in the object. For the screen only: what the model reads goes
    through :func:`redact_keys` alone (:func:`scrub`), which leaves a lone ``"token":
    "Hello"`` (a tokenizer's piece), an ``"authorization": "granted"`` status and a literal
    (``true``, ``false``, ``null``) as they are."""
    text = redact_keys(text, hidden)
    if '":' in text or '" :' in text:
        text = _JSON_PAIR.sub(lambda m: _named_value(m, hidden), text)
    return text


_JSON_PAIR = re.compile(
    r'"([A-Za-z0-9_.\-]{1,64})"(\s*:\s*)'
    r'(?:"((?:[^"\\\n]|\\.)*)"|(-?[0-9][0-9.eE+-]*|true|false)(?![\w.+-]))'
)
"""A JSON member whose value is a string, a number or a bool: ``"api_key": "abcd..."``,
``"pin": 1234`` (its name judged by :func:`secret_field`, so a JSON text hides what
:func:`redacted` hides of the object; an object or a list under the name is not read here)."""


def _named_value(match: re.Match[str], hidden: str) -> str:
    value = match.group(3) if match.group(4) is None else match.group(4)
    if not value or value == hidden or not secret_field(match.group(1)):
        return match.group(0)
    return f'"{match.group(1)}"{match.group(2)}"{hidden}"'


_NAME_PARTS = re.compile(r"[^A-Za-z0-9]+|(?<=[a-z0-9])(?=[A-Z])")
_SECRET_WORDS = frozenset(
    {
        "secret",
        "secrets",
        "token",
        "apikey",
        "apikeys",
        "passkey",
        "credential",
        "credentials",
        "authorization",
        "cookie",
        "cookies",
        # a card's or an account's codes: a PIN, a card verification value, a one-time code
        *("pin", "cvv", "cvv2", "cvc", "cvc2", "otp", "totp"),
        "bearer",
    }
)
_SECRET_PAIRS = frozenset(
    {
        ("api", "key"),
        ("api", "keys"),
        ("access", "key"),
        ("secret", "key"),
        ("private", "key"),
        ("ssh", "key"),
        ("signing", "key"),
        ("client", "secret"),
        ("card", "number"),  # cardNumber, card_number (a payment card's number)
        ("pin", "code"),
        ("security", "code"),
        ("mfa", "code"),
        ("otp", "code"),
        ("auth", "code"),  # an OAuth authorization code: exchanged for a token
        ("verification", "code"),
    }
)
_NOT_SECRET_TOKENS = frozenset(
    {"page", "next", "prev", "continuation", "cursor", "sync", "eos", "bos", "pad", "stop"}
    | {"start", "end", "sep", "unk", "mask", "cls", "special", "max", "min", "num"}
)
_FORMAT_WORDS = frozenset(
    {"value", "pem", "str", "string", "b64", "base64", "raw", "plain", "hex", "text"}
    | {"data", "bytes", "der", "encoded", "json"}
)
"""Words after a secret's word that say what form it is in (``private_key_pem``,
``api_key_value``, ``password_plain``): the name is still the secret's."""
"""Words before a final ``token`` that make it no secret: a page's cursor (``page_token``,
``nextPageToken``), a tokenizer's marker (``eos_token``), a count (``max_token``)."""


@functools.lru_cache(maxsize=4096)
def secret_field(name: Any) -> bool:
    """Whether a value named ``name`` (a tool argument, a JSON field) is a secret to show as
    ``***``, whatever its shape: a name that *ends* in a password (``password``,
    ``db_password``, ``PGPASSWORD``, ``db_pwd``, ``passphrase``, ``passcode``, ``passkey``),
    a ``secret`` (``client_secret``, ``secrets``), a ``token`` (``access_token``,
    ``authToken``, not ``page_token``, ``eos_token`` or ``max_tokens``), an API, access,
    secret, private, SSH or signing key (``api_key``, ``apiKey``, ``api_keys``,
    ``ssh_key``), ``credentials``, ``authorization``, a ``cookie``, a card's or an
    account's codes (``pin``, ``cvv``, ``cvc``, ``otp``, ``card_number``, ``pin_code``,
    ``security_code``, ``mfa_code``, ``auth_code``, ``verification_code``). A name that only
    *mentions* one is about it, not it (``password_hint``, ``token_count``,
    ``credential_id``, ``cookie_name``, ``secret_santa``), and ``key``, ``sort_key``,
    ``author`` and a lone ``pwd`` (a directory) are not secrets: an argument named ``key``
    is usually a lookup's."""
    if not isinstance(name, str) or not name:
        return False
    words = [w.lower() for w in _NAME_PARTS.split(name) if w]
    while len(words) > 1 and words[-1] in _FORMAT_WORDS:  # private_key_pem, token_value:
        words.pop()  # the secret in some form is the secret
    if not words:
        return False
    last = words[-1]
    before = words[-2] if len(words) > 1 else ""
    if any(p in last for p in ("password", "passwd", "passphrase", "passcode")):
        return True
    if last == "pwd":
        return len(words) > 1  # db_pwd; a lone pwd is a working directory
    if (before, last) in _SECRET_PAIRS:
        return True
    if last == "token" or (last.endswith("token") and last != "token" and not before):
        return before not in _NOT_SECRET_TOKENS and last[:-5] not in _NOT_SECRET_TOKENS
    return last in _SECRET_WORDS or last.endswith(("secret", "apikey"))


_REDACT_DEPTH = 200
"""A container deeper than this shows as ``…`` in :func:`redacted` (arguments are at most
200 levels deep: deeper ones are refused where they enter the chat)."""


def redacted(value: Any, depth: int = 0) -> Any:
    """``value`` as it may be shown: every string in it (dict keys too, in dicts, lists and
    tuples) through :func:`redact_keys`, and whatever is under a secret's name
    (:func:`secret_field`: ``"password": "hunter2"``, ``"password": 987654``,
    ``"credentials": {...}``) as ``***`` (:func:`shown_as`), as :func:`redact_keys` hides
    a password in JSON text; ``value`` itself when nothing changed. For what is shown only:
    what the model reads is text, read by :func:`scrub`."""
    if isinstance(value, str):
        shown = redact_keys(value)
        return value if shown == value else shown
    if not isinstance(value, dict | list | tuple):
        return value
    if depth >= _REDACT_DEPTH:
        return "…"
    if isinstance(value, dict):
        items = [
            (
                redacted(k, depth),
                _masked(x, depth + 1) if secret_field(k) else redacted(x, depth + 1),
            )
            for k, x in value.items()
        ]
        if all(k is k0 and x is x0 for (k, x), (k0, x0) in zip(items, value.items(), strict=True)):
            return value
        return dict(items)
    out = [redacted(x, depth + 1) for x in value]
    return value if all(x is x0 for x, x0 in zip(out, value, strict=True)) else out


REDACTED = "***"


def _masked(value: Any, depth: int = 0) -> Any:
    """A value found under a secret's name, as shown: ``***`` whatever it holds (a string, a
    number, a bool, a dict whole: its keys may be secrets as well, a token -> user map, and
    an edit left as shown puts it back whole), a list or tuple item by item (a list of
    secrets: how many shows); itself when it holds nothing (``None``, ``""``, an empty
    container) or is ``***`` already."""
    if value is None or (isinstance(value, str | bytes | dict | list | tuple) and not value):
        return value
    if isinstance(value, str) and value == REDACTED:
        return value
    if isinstance(value, list | tuple) and depth < _REDACT_DEPTH:
        out = [_masked(v, depth + 1) for v in value]
        return value if all(x is x0 for x, x0 in zip(out, value, strict=True)) else out
    return REDACTED


def shown_as(value: Any, key: Any = None) -> Any:
    """How :func:`redacted` shows ``value`` found under ``key`` in a dict: under a secret's
    name as ``***`` whatever it holds (a list item by item), else :func:`redacted`."""
    return _masked(value) if secret_field(key) else redacted(value)


def hidden_from(shown: Any, text: Any) -> bool:
    """Whether ``shown`` is ``text`` with parts of it (one character or more each) as
    ``***``: a reason a chat hid its provider's key in (which the store, an inbox cannot
    know) is still the reason given. Its other parts are found in order, each at the first
    place it fits (where a match has it, the parts between being any text): read once."""
    if not isinstance(text, str) or not isinstance(shown, str) or REDACTED not in shown:
        return False
    first, *middle, last = shown.split(REDACTED)
    if not (text.startswith(first) and text.endswith(last)):
        return False
    end = len(text) - len(last)
    pos = len(first) + 1  # a hidden part is one character at least
    for part in middle:
        found = text.find(part, pos, end)
        if found < 0:
            return False
        pos = found + len(part) + 1
    return pos <= end


def scrub(text: str, secrets: Iterable[str | None]) -> str:
    """``text`` with every secret (4+ characters) as ``***``, then all :func:`redact_keys`
    hides: key-like tokens, URL userinfo, and a value under a secret's name where it is
    named (``api_key=***``, ``"password": "***"``), nowhere else in the text, a literal
    (``"secret": false``, ``api_key=None``) left as it is.

    The one scrubber of error text and of what the model reads (a tool's result, an answer's
    reason): the providers' (the configured key) and the MCP client's (a server's ``env`` and
    ``headers`` values) both use it.
    """
    return redact_keys(_named_scrubbed(text, secrets))


def scrub_keys(text: str, secrets: Iterable[str | None]) -> str:
    """``text`` nbagent composed (an answer of a call it did not run) with ``secrets`` (the
    chat's provider's key), key-shaped tokens and URL credentials as ``***``: what no words
    around them make harmless. Not :func:`redact_keys`' name-value rule, which reads
    nbagent's own ``<tool>: <parameter>:`` as a name given a value; the pieces of others'
    text in it are scrubbed with :func:`scrub` first, alone."""
    text = _named_scrubbed(text, secrets)
    if any(prefix in text for prefix in _KEY_PREFIXES):
        text = _keys_hidden(text, "***")
    if "@" in text:
        text = _USERINFO.sub(lambda m: f"{m[1]}***@", text)
    return text


def _named_scrubbed(text: str, secrets: Iterable[str | None]) -> str:
    """``text`` with every secret of 4+ characters as ``***``."""
    for secret in secrets:
        if secret and len(secret) >= 4:
            text = text.replace(secret, "***")
    return text


KEY_MIN = 16
"""The shortest provider secret scrubbed from text wherever it appears: a real key is
longer; a placeholder (``"test"``, ``"ollama"``, ``"EMPTY"``) replaced as a substring cut
words out of every tool result ("latest test run" read "la*** *** run")."""


def provider_secrets(provider: Any) -> tuple[str, ...]:
    """A provider's own secrets to scrub from what reaches the model, the record and the
    screen (its ``secrets()``: a key of any shape), those of :data:`KEY_MIN` characters or
    more; ``()`` if it names none."""
    named = getattr(provider, "secrets", None)
    if not callable(named):
        return ()
    try:
        return tuple(s for s in named() if isinstance(s, str) and len(s) >= KEY_MIN)
    except Exception:  # a custom provider's own method: never a reason to lose a result
        return ()


SECRET_MIN = 4
"""The shortest value under a secret's name masked in other text (:func:`named_values`,
:func:`token_masks`): shorter ones (``"abc"``, ``"1"``) would hide common words and numbers
all over a text, and a value that short is no secret worth the name anyway."""


def named_values(*values: Any) -> set[str]:
    """The strings (and numbers, as text) in ``values`` (a call's arguments, its edited
    ones...) that stand under a secret's name (:func:`secret_field`) at any depth (all of a
    ``credentials`` dict), of :data:`SECRET_MIN` characters or more: what a tool's error, a
    prompt or an answer may quote, for :func:`token_masks`."""
    found: set[str] = set()
    for value in values:
        _named_values(value, False, found, 0)
    return found


def _named_values(value: Any, secret: bool, found: set[str], depth: int) -> None:
    if depth > 200:
        return
    if isinstance(value, str):
        if secret and len(value) >= SECRET_MIN:
            found.add(value)
    elif isinstance(value, dict):
        for k, v in value.items():
            _named_values(v, secret or secret_field(k), found, depth + 1)
    elif isinstance(value, list | tuple):
        for v in value:
            _named_values(v, secret, found, depth + 1)
    elif secret and isinstance(value, int | float) and not isinstance(value, bool):
        text = str(value)  # a PIN, as an error or an answer may quote it
        if len(text) >= SECRET_MIN:
            found.add(text)


_WORD = re.compile(r"\w")


class Masks:
    """Secrets to hide in text, as one pattern (longest first: a secret holding another is
    masked whole), and each form as it may appear (a quick look before the pattern runs)."""

    __slots__ = ("forms", "pattern")

    def __init__(self, forms: tuple[str, ...], pattern: re.Pattern[str]):
        self.forms = forms
        self.pattern = pattern

    def hide(self, text: str) -> str:
        """``text`` with each secret as ``***``."""
        if not any(form in text for form in self.forms):
            return text  # the usual case: a look for each form, no pattern run
        return self.pattern.sub(REDACTED, text)


def token_masks(anywhere: Iterable[str] = (), tokens: Iterable[str] = ()) -> Masks:
    """``anywhere``: secrets hidden wherever they appear, as :func:`scrub` hides a provider's
    key (those of :data:`SECRET_MIN` characters or more); ``tokens``: values given under a
    secret's name (:func:`named_values`), hidden only as a whole token: no word character
    right before one starting with a word character, nor right after one ending with one. A
    short value (``passcode=2026``, ``password="test"``) hidden as a substring cut other
    numbers and words apart ("1***0", "la*** run"), as :data:`KEY_MIN` says. Each as given,
    and as ``repr()`` and JSON quote it (``C:\\\\vault`` for ``C:\\vault``)."""
    token_only: dict[str, bool] = {}
    for secret in anywhere:
        if secret and len(secret) >= SECRET_MIN:
            for form in _quoted(secret):
                token_only[form] = False
    for secret in tokens:
        for form in _quoted(secret):
            token_only.setdefault(form, True)
    forms = tuple(sorted(token_only, key=len, reverse=True))
    parts = []
    for form in forms:
        part = re.escape(form)
        if token_only[form]:
            if _WORD.match(form[0]):
                part = r"(?<!\w)" + part
            if _WORD.match(form[-1]):
                part += r"(?!\w)"
        parts.append(part)
    return Masks(forms, re.compile("|".join(parts) or "(?!)"))


def _quoted(secret: str) -> set[str]:
    """``secret`` as text may show it: as it is, and inside ``repr()``'s and JSON's quotes."""
    import json  # a secret's quoted forms are asked for rarely (a trace's, a judge's text)

    return {
        secret,
        repr(secret)[1:-1],
        json.dumps(secret)[1:-1],
        json.dumps(secret, ensure_ascii=False)[1:-1],
    }


__all__ = [
    "KEY_MIN",
    "SECRET_MIN",
    "Masks",
    "named_values",
    "provider_secrets",
    "redact_keys",
    "redacted",
    "scrub",
    "scrub_keys",
    "token_masks",
]
