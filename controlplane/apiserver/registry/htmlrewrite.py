"""Links inside an HTML page rewritten, so that a page served through ``pods/proxy`` or
``services/proxy`` links back through the proxy (upstream's proxy transport, which
``relay_http`` follows for ``text/html`` answers).

Only the attributes that hold a URL are touched (``a href``, ``img src``, ``form action``...,
upstream's list), and only in start tags; every other byte of the page stays as it was, so a
page that is not well formed comes through as it came.  A tag whose attributes change is
written anew (names lower-case, values quoted and escaped), as upstream's tokenizer renders
it.  The page is read as UTF-8, as upstream assumes; bytes that are not are kept.  A body in a
``Content-Encoding`` other than gzip or deflate is left alone.
"""

from __future__ import annotations

import gzip
import html
import zlib
from collections.abc import Callable
from html.parser import HTMLParser

URL_ATTRIBUTES: dict[str, frozenset[str]] = {
    tag: frozenset(attributes.split())
    for tag, attributes in {
        "a": "href",
        "applet": "codebase",
        "area": "href",
        "audio": "src",
        "base": "href",
        "blockquote": "cite",
        "body": "background",
        "button": "formaction",
        "command": "icon",
        "del": "cite",
        "embed": "src",
        "form": "action",
        "frame": "longdesc src",
        "head": "profile",
        "html": "manifest",
        "iframe": "longdesc src",
        "img": "longdesc src usemap",
        "input": "src usemap formaction",
        "ins": "cite",
        "link": "href",
        "object": "classid codebase data usemap",
        "q": "cite",
        "script": "src",
        "source": "src",
        "video": "poster src",
    }.items()
}
"""The attributes holding a URL, by tag (upstream's ``atomsToAttrs``)."""
ENCODINGS = ("", "gzip", "deflate")


def rewrite_body(body: bytes, encoding: str, rewrite: Callable[[str], str]) -> bytes | None:
    """``body`` (in ``Content-Encoding`` ``encoding``) with its links rewritten and encoded
    the same way; None when the encoding is not one this reads, or the body not in it."""
    encoding = encoding.strip().lower()
    if encoding not in ENCODINGS:
        return None
    try:
        if encoding == "gzip":
            return gzip.compress(rewrite_html(gzip.decompress(body), rewrite))
        if encoding == "deflate":
            return zlib.compress(rewrite_html(zlib.decompress(body), rewrite))
    except (OSError, EOFError, zlib.error):
        return None  # not what it says it is: passed on as it came
    return rewrite_html(body, rewrite)


def rewrite_html(page: bytes, rewrite: Callable[[str], str]) -> bytes:
    """``page`` with ``rewrite`` applied to every URL attribute of its start tags."""
    text = page.decode("utf-8", errors="surrogateescape")
    parser = _Links(text, rewrite)
    parser.feed(text)
    parser.close()
    pieces, at = [], 0
    for start, end, tag in parser.replacements:
        pieces += [text[at:start], tag]
        at = end
    pieces.append(text[at:])
    return "".join(pieces).encode("utf-8", errors="surrogateescape")


class _Links(HTMLParser):
    """Finds the start tags whose URL attributes ``rewrite`` changes, and what to put
    instead, as (start offset, end offset, new tag)."""

    def __init__(self, text: str, rewrite: Callable[[str], str]) -> None:
        super().__init__(convert_charrefs=False)
        self.rewrite = rewrite
        self.replacements: list[tuple[int, int, str]] = []
        # HTMLParser counts lines by "\n" alone, and columns from the last one
        self._line_starts = [0] + [i + 1 for i, c in enumerate(text) if c == "\n"]

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        self._tag(tag, attrs, "")

    def handle_startendtag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        self._tag(tag, attrs, "/")

    def _tag(self, tag: str, attrs: list[tuple[str, str | None]], close: str) -> None:
        urls = URL_ATTRIBUTES.get(tag)
        raw = self.get_starttag_text()
        if urls is None or raw is None:
            return
        changed = [
            (name, self.rewrite(value) if name in urls and value is not None else value)
            for name, value in attrs
        ]
        if changed == attrs:
            return
        line, column = self.getpos()
        start = self._line_starts[line - 1] + column
        rendered = "".join(
            f" {name}" if value is None else f' {name}="{html.escape(value)}"'
            for name, value in changed
        )
        self.replacements.append((start, start + len(raw), f"<{tag}{rendered}{close}>"))
