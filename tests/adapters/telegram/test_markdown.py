"""MarkdownV2: code kept, **bold** kept, everything else escaped; and the outbox's
split for Telegram measures each chunk after this escaping."""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

from hermes.adapters.telegram.markdown import to_markdown_v2
from hermes.delivery.split import chunks_for, measure


def test_reserved_characters_are_escaped_outside_code():
    assert to_markdown_v2("1-2. Done! (a_b)") == r"1\-2\. Done\! \(a\_b\)"


def test_code_and_bold_are_kept():
    assert to_markdown_v2("run `a.b()` **now**.") == r"run `a.b()` *now*\."
    fenced = "```python\nx = 'a\\b'.strip()  # `q`\n```"
    assert to_markdown_v2(fenced) == "```python\nx = 'a\\\\b'.strip()  # \\`q\\`\n```"


def test_an_unmatched_backtick_is_plain():
    assert to_markdown_v2("a ` b") == r"a \` b"


@given(st.text(alphabet=st.sampled_from("ab .!-_*`\n😀é#"), max_size=12000))
def test_every_telegram_chunk_fits_after_escaping(text):
    for chunk in chunks_for(text, "telegram"):
        assert measure(to_markdown_v2(chunk), "utf16") <= 4096
