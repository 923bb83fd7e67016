"""What a mail says, for the model: its text part (or its HTML part as text), without the
quoted history and signature a reply carries: the new words only, as a chat message
would give them. The transcript keeps what the model read; the whole mail stays in the
mailbox (or the processed folder).

An HTML part is handed to the parser (trafilatura, on lxml) only for a sender the
adapter's settings or pairing let in, and at most MAX_HTML characters of it: the parser's
time and memory grow with the markup (measured here: 1 MB in about a second and 50 MB
more memory, 5.7 MB in 5 s and 250 MB; the 25 MB mail the adapter reads would take half a
minute and gigabytes), while the model reads at most 100,000 characters of a mail, which
a megabyte of mail HTML (markup is most of it) holds; Gmail shows a mail over 102 kB
clipped.
"""

from __future__ import annotations

import re
from email.message import EmailMessage

import attrs

MAX_HTML = 1_000_000  # characters of an HTML part handed to the parser

# "On Tue, 3 Dec 2026 at 10:00, Ann <ann@example.org> wrote:", in English, German or
# French; Outlook's "-----Original Message-----".
_ATTRIBUTION = re.compile(
    r"^\s*(on\b.{0,200}\bwrote:|am\b.{0,200}\bschrieb\b.*:|le\b.{0,200}\ba écrit\s*:)\s*$", re.I
)
_ORIGINAL = re.compile(r"^\s*-{2,}\s*(original message|forwarded message)\s*-{2,}\s*$", re.I)
_SIGNATURE = "-- "  # RFC 3676's delimiter line


@attrs.frozen
class Body:
    """A mail's text, and a line for the model about what of it was not read (None: all)."""

    text: str
    unread: str | None = None


def body_text(message: EmailMessage, *, html: bool = True) -> Body:
    """The whole text of the mail: its text/plain part, else its HTML part as text (only
    when `html`: otherwise the HTML is not even decoded, and `unread` says so)."""
    part = message.get_body(preferencelist=("plain", "html"))
    if part is None:
        return Body("")
    if part.get_content_type() == "text/html" and not html:
        return Body(
            "",
            "[the mail's text is in HTML, which is read only from senders this"
            " platform's allowed_users, owner or pairing names]",
        )
    content = part.get_content()
    if not isinstance(content, str):
        return Body("")
    if part.get_content_type() != "text/html":
        return Body(content.replace("\r\n", "\n").strip())
    unread = None
    if len(content) > MAX_HTML:
        content = content[:MAX_HTML]
        unread = f"[the mail's HTML goes on: only its first {MAX_HTML:,} characters were read]"
    import trafilatura  # a heavy import, for the mails that need it only

    text = trafilatura.extract(content) or trafilatura.html2txt(content) or ""
    return Body(text.strip(), unread)


def new_words(text: str) -> str:
    """`text` without what a reply quotes: lines from an attribution ("On ... wrote:") or
    an "Original Message" rule on, quoted lines ("> "), and the signature after "-- "."""
    kept: list[str] = []
    for line in text.splitlines():
        if line.rstrip("\n") == _SIGNATURE or line == "--":
            break
        if _ATTRIBUTION.match(line) or _ORIGINAL.match(line):
            break
        if line.lstrip().startswith(">"):
            continue
        kept.append(line)
    return "\n".join(kept).strip() or text.strip()
