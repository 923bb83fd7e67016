"""A fetched body as the text a model reads: an HTML page's main content as Markdown or
plain text (trafilatura: it drops navigation and boilerplate, which the model does not
need and would pay for in tokens), a PDF's text (pypdf), text, JSON and XML as they are.

CPU-bound on input up to the fetch's size cap: callers run it on a worker thread.
"""

from __future__ import annotations

import io

import attrs

from hermes.agent.tools.base import ToolError

HTML, PDF, TEXT = "html", "pdf", "text"
HTML_TYPES = frozenset({"text/html", "application/xhtml+xml"})
TEXT_TYPES = frozenset({"application/json", "application/xml"})


@attrs.frozen
class Page:
    title: str | None
    text: str


def kind_of(media_type: str) -> str | None:
    """How a body of `media_type` (lower case, no parameters) is read; None: it is not."""
    if media_type in HTML_TYPES:
        return HTML
    if media_type == "application/pdf":
        return PDF
    if media_type.startswith("text/") or media_type in TEXT_TYPES:
        return TEXT
    if media_type.startswith("application/") and media_type.endswith(("+json", "+xml")):
        return TEXT  # application/ld+json, application/rss+xml, ...
    return None


def decoded(body: bytes, charset: str | None) -> str:
    """`body` in the response's charset (UTF-8 when it names none or an unknown one)."""
    try:
        return body.decode(charset or "utf-8", errors="replace")
    except LookupError:
        return body.decode("utf-8", errors="replace")


def html_page(body: bytes, charset: str | None, url: str, markdown: bool) -> Page:
    """The page's main content, its links kept in Markdown (the model may follow them);
    trafilatura's plain-text baseline where it finds no main content."""
    import trafilatura  # heavy: imported by the first fetch, not by every hermes command

    # Without a charset in the header, trafilatura reads the page's own <meta charset>.
    tree = trafilatura.load_html(decoded(body, charset) if charset else body)
    if tree is None:  # nothing lxml can parse as HTML
        return Page(None, decoded(body, charset).strip())
    title = trafilatura.extract_metadata(tree, default_url=url, extensive=False).title
    text = trafilatura.extract(
        tree,
        url=url,
        output_format="markdown" if markdown else "txt",
        include_links=markdown,
    )
    if not text:
        text = trafilatura.baseline(tree)[1]
    return Page(title, text)


def pdf_page(body: bytes) -> Page:
    import pypdf  # imported by the first PDF fetched, not by every hermes command

    try:
        reader = pypdf.PdfReader(io.BytesIO(body))
        if reader.is_encrypted and not reader.decrypt(""):
            raise ToolError("the PDF is encrypted with a password; its text cannot be read")
        texts = [page.extract_text() for page in reader.pages]
        title = reader.metadata.title if reader.metadata is not None else None
    except ToolError:
        raise
    except Exception as exc:  # pypdf's failures on a malformed file are not all PyPdfError
        raise ToolError(f"the PDF cannot be read: {exc}") from exc
    return Page(title, "\n\n".join(text.strip() for text in texts if text.strip()))


def readable(kind: str, body: bytes, charset: str | None, url: str, markdown: bool) -> Page:
    """`body` (fetched from `url`, of a `kind_of` kind) as text."""
    if kind == HTML:
        return html_page(body, charset, url, markdown)
    if kind == PDF:
        return pdf_page(body)
    return Page(None, decoded(body, charset))
