"""What a mail says, for the model: its text part (or its HTML part as text), without the
quoted history and signature a reply carries: the new words only, as a chat message
would give them. The transcript keeps what the model read; the whole mail stays in the
mailbox (or the processed folder).
"""

from __future__ import annotations

import re
from email.message import EmailMessage

# "On Tue, 3 Dec 2026 at 10:00, Ann <ann@example.org> wrote:", in English, German or
# French; Outlook's "-----Original Message-----".
_ATTRIBUTION = re.compile(
    r"^\s*(on\b.{0,200}\bwrote:|am\b.{0,200}\bschrieb\b.*:|le\b.{0,200}\ba écrit\s*:)\s*$", re.I
)
_ORIGINAL = re.compile(r"^\s*-{2,}\s*(original message|forwarded message)\s*-{2,}\s*$", re.I)
_SIGNATURE = "-- "  # RFC 3676's delimiter line


def body_text(message: EmailMessage) -> str:
    """The whole text of the mail: its text/plain part, else its HTML part as text."""
    part = message.get_body(preferencelist=("plain", "html"))
    if part is None:
        return ""
    content = part.get_content()
    if not isinstance(content, str):
        return ""
    if part.get_content_type() == "text/html":
        import trafilatura  # a heavy import, for the mails that need it only

        return (trafilatura.extract(content) or trafilatura.html2txt(content) or "").strip()
    return content.replace("\r\n", "\n").strip()


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
