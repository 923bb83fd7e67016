"""Splitting an outgoing text to a platform's limit (spec: delivery, "Splitting and formatting")."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from hermes.adapters.platform import Limit
from hermes.adapters.registry import PLATFORMS
from hermes.delivery.split import chunks_for, join, measure, split


def underscores(text: str) -> str:
    return text.replace("_", "\\_")


MARKDOWN_V2 = str.maketrans({c: "\\" + c for c in "_*[]()~`>#+-=|{}.!\\"})


def markdown_v2(text: str) -> str:
    """Roughly Telegram's MarkdownV2 escaping: a backslash before each special character."""
    return text.translate(MARKDOWN_V2)


def fence_lines(text: str) -> int:
    return sum(1 for line in text.split("\n") if line.startswith("```"))


# Texts: words (some with `_`, emoji, astral and CJK characters, stray backticks),
# separators, inline code spans, fenced blocks with and without a language.
letters = "abcxyz_*.é😀𝔘中"
words = st.one_of(
    st.text(letters, min_size=1, max_size=12),
    st.text(letters, min_size=30, max_size=90),  # longer than a small limit: hard cuts
    st.sampled_from(["snake_case", "a```b", "a`b", "👍🏽", "🇫🇷", "😀😀😀"]),
)
separators = st.sampled_from([" ", " ", "\n", "\n\n", "  "])
lines = st.lists(st.one_of(words, separators), max_size=8).map("".join)
inline_code = st.lists(words, min_size=1, max_size=5).map(lambda ws: "`" + " ".join(ws) + "`")
languages = st.sampled_from(["", "python", "js", "c++"])
fenced = st.builds(
    lambda lang, body: f"\n```{lang}\n" + "\n".join(body) + "\n```\n",
    languages,
    st.lists(lines, max_size=6),
)
unclosed = languages.map(lambda lang: f"\n```{lang}\n")
texts = st.lists(
    st.one_of(words, words, separators, separators, inline_code, fenced, unclosed),
    max_size=40,
).map("".join)
limits = st.builds(
    Limit,
    st.one_of(st.integers(40, 120), st.integers(120, 5000)),
    st.sampled_from(["chars", "utf16"]),
)
escapes = st.sampled_from([lambda s: s, underscores, markdown_v2])
PROPERTIES = settings(max_examples=200, deadline=None)


@PROPERTIES
@given(texts, limits, escapes)
def test_every_chunk_fits_once_escaped(text, limit, escape):
    for chunk in split(text, limit, escape):
        assert measure(escape(chunk), limit.unit) <= limit.size


@PROPERTIES
@given(texts, limits, escapes)
def test_chunks_join_back_to_the_text(text, limit, escape):
    assert join(split(text, limit, escape)) == text


@PROPERTIES
@given(texts, limits, escapes)
def test_fences_balanced_in_every_chunk(text, limit, escape):
    chunks = split(text, limit, escape)
    for chunk in chunks[:-1]:
        assert fence_lines(chunk) % 2 == 0, chunk
    if chunks:  # the last one is balanced when the text is
        assert fence_lines(chunks[-1]) % 2 == fence_lines(text) % 2


@PROPERTIES
@given(texts, limits, escapes)
def test_no_empty_chunk_and_a_fitting_text_is_unchanged(text, limit, escape):
    chunks = split(text, limit, escape)
    assert all(chunks)
    if measure(escape(text), limit.unit) <= limit.size:
        assert chunks == ([text] if text else [])


def test_empty_text_has_no_chunk():
    assert split("", Limit(40, "chars")) == []
    assert join([]) == ""


def test_text_under_the_limit_is_one_chunk():
    text = "Hello, *world*!\n\nHere is `code` and ```inline``` too."
    assert split(text, PLATFORMS["discord"].limit) == [text]


def test_paragraph_boundary_preferred_over_line_boundary():
    text = "a" * 30 + "\n\n" + "b" * 20 + "\n" + "c" * 20
    chunks = split(text, Limit(60, "chars"))
    assert chunks == ["a" * 30 + "\n\n", "b" * 20 + "\n" + "c" * 20]


def test_split_inside_a_fenced_block_reopens_its_language():
    body = "\n".join(f"x_{i} = {i}" for i in range(40))
    text = "Intro.\n\n```python\n" + body + "\n```\n\nOutro."
    chunks = split(text, Limit(100, "chars"), underscores)
    assert len(chunks) > 2
    assert chunks[0].startswith("Intro.\n\n```python\n") and chunks[0].endswith("\n```")
    for chunk in chunks[1:-1]:
        assert chunk.startswith("```python\n") and chunk.endswith("\n```")
    assert chunks[-1].startswith("```python\n") and chunks[-1].endswith("```\n\nOutro.")
    assert all(len(underscores(c)) <= 100 for c in chunks)
    assert join(chunks) == text


def test_telegram_counts_utf16_units():
    text = "😀" * 5000  # 10000 UTF-16 units, 5000 code points
    limit = PLATFORMS["telegram"].limit
    chunks = split(text, limit)
    assert [measure(c, "utf16") for c in chunks] == [4096, 4096, 1808]
    assert join(chunks) == text


def test_inline_code_kept_whole_when_a_space_outside_is_available():
    text = "alpha beta `one two three four` gamma"
    chunks = split(text, Limit(30, "chars"))
    assert chunks == ["alpha beta ", "`one two three four` gamma"]


def test_inline_code_broken_at_a_space_when_nothing_else_fits():
    text = "`one two three four five six seven`"
    chunks = split(text, Limit(20, "chars"))
    assert all(len(c) <= 20 for c in chunks) and join(chunks) == text
    assert chunks[0].endswith(" ")


def test_hard_cut_when_there_is_no_boundary():
    text = "x" * 95
    assert split(text, Limit(40, "chars")) == ["x" * 40, "x" * 40, "x" * 15]


def test_a_midline_fence_never_starts_a_chunk():
    text = "x" * 40 + "```" + "y" * 20  # the hard cut at 40 would make "```yyy" a fence line
    chunks = split(text, Limit(40, "chars"))
    assert chunks == ["x" * 39, "x```" + "y" * 20]


def test_added_fences_count_against_the_limit():
    text = "```\n" + "\n".join(["y" * 10] * 10) + "\n```"
    for chunk in split(text, Limit(25, "chars")):
        assert len(chunk) <= 25 and fence_lines(chunk) % 2 == 0


def test_too_small_limit_raises():
    with pytest.raises(ValueError, match="too small"):
        split("```python\n" + "x" * 100 + "\n```", Limit(8, "chars"))
    with pytest.raises(ValueError):
        Limit(0, "chars")


def test_limits_of_platforms():
    limits = {name: platform.limit for name, platform in PLATFORMS.items()}
    assert limits == {
        "telegram": Limit(4096, "utf16"),
        "discord": Limit(2000, "chars"),
        "slack": Limit(39000, "chars"),
        "local": Limit(1_000_000, "chars"),
        "whatsapp": Limit(4096, "chars"),
        "teams": Limit(14000, "utf16"),
        "email": Limit(1_000_000, "chars"),
        "matrix": Limit(6000, "chars"),
        "signal": Limit(2000, "utf16"),
        "webhook": Limit(4000, "chars"),
        "api": Limit(1_000_000, "chars"),
        "mattermost": Limit(16383, "chars"),
        "homeassistant": Limit(4000, "chars"),
        "imessage": Limit(10000, "chars"),
        "sms": Limit(1600, "utf16"),
    }
    assert [len(c) for c in chunks_for("x" * 4001, "irc")] == [4000, 1]  # unknown: 4000


def test_measure():
    assert measure("a😀中", "chars") == 3
    assert measure("a😀中", "utf16") == 4


def test_join_rejects_chunks_split_did_not_make():
    with pytest.raises(ValueError, match="not made by split"):
        join(["```python\ncode\n```", "more"])
