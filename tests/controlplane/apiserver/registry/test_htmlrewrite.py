"""Links in a page relayed by ``pods/proxy`` and ``services/proxy``, rewritten as upstream's
proxy transport rewrites them, the rest of the page kept byte for byte."""

from __future__ import annotations

import gzip
import zlib
from collections.abc import Callable

import pytest

from controlplane.apiserver.registry.htmlrewrite import rewrite_body, rewrite_html


def _through(url: str) -> str:
    return f"/proxy{url}" if url.startswith("/") else url


PAGE = (
    "<!DOCTYPE html>\n<html><head><link rel=stylesheet href=/s.css>\n"
    '<script src="/app.js"></script></head>\n'
    "<body><!-- <a href=/comment> -->\n"
    "<p>caf\u00e9 &amp; <a class=x href='/docs/?a=1&amp;b=2'>docs</a> "
    '<a href="relative">rel</a> <img src="/i.png" alt="i"/> <br>\n'
    '<div data-href="/not-a-url-attribute">x</div></body></html>\n'
)
EXPECTED = (
    '<!DOCTYPE html>\n<html><head><link rel="stylesheet" href="/proxy/s.css">\n'
    '<script src="/proxy/app.js"></script></head>\n'
    "<body><!-- <a href=/comment> -->\n"
    '<p>caf\u00e9 &amp; <a class="x" href="/proxy/docs/?a=1&amp;b=2">docs</a> '
    '<a href="relative">rel</a> <img src="/proxy/i.png" alt="i"/> <br>\n'
    '<div data-href="/not-a-url-attribute">x</div></body></html>\n'
)


def test_only_url_attributes_of_start_tags_change() -> None:
    assert rewrite_html(PAGE.encode(), _through).decode() == EXPECTED


def test_bytes_that_are_not_utf8_are_kept() -> None:
    page = b"<p>\xff</p><a href=/x>x</a>"
    assert rewrite_html(page, _through) == b'<p>\xff</p><a href="/proxy/x">x</a>'


@pytest.mark.parametrize(
    ("encoding", "encode", "decode"),
    [
        ("gzip", gzip.compress, gzip.decompress),
        ("deflate", zlib.compress, zlib.decompress),
        ("", bytes, bytes),
    ],
    ids=["gzip", "deflate", "identity"],
)
def test_compressed_pages_are_rewritten_and_compressed_again(
    encoding: str, encode: Callable[[bytes], bytes], decode: Callable[[bytes], bytes]
) -> None:
    rewritten = rewrite_body(encode(PAGE.encode()), encoding, _through)
    assert rewritten is not None
    assert decode(rewritten).decode() == EXPECTED


def test_a_body_not_in_a_known_encoding_is_left_alone() -> None:
    assert rewrite_body(b"\x00br", "br", _through) is None
    assert rewrite_body(b"not gzip", "gzip", _through) is None
