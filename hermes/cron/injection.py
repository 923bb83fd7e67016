"""The injection scan: prompts that try to take over the agent are refused.

A cron prompt runs unattended with the agent's tools, so text that tries to
override its instructions, exfiltrate secrets or hide content is refused
when a job is created and when `cron run --prompt` adds context.
"""

from __future__ import annotations

import re
import unicodedata

from hermes.actors.errors import Invalid

PATTERNS: list[tuple[str, re.Pattern[str]]] = [
    (
        "tries to override the agent's instructions",
        re.compile(
            r"\b(?:ignore|disregard|forget|override)\b[^.\n]{0,40}\b(?:previous|prior|above|"
            r"earlier|all|system|your)\b[^.\n]{0,20}\b(?:instructions?|prompts?|rules|guidelines)",
            re.IGNORECASE,
        ),
    ),
    (
        "tries to reveal the system prompt",
        re.compile(
            r"\b(?:reveal|print|show|repeat|output|leak)\b[^.\n]{0,30}\b(?:system|hidden|initial)"
            r"\s+(?:prompt|instructions?)",
            re.IGNORECASE,
        ),
    ),
    (
        "pretends to be a system or developer message",
        re.compile(
            r"<\|im_start\|>|<\|system\|>|\[/?INST\]|^\s*(?:system|developer)\s*:|"
            r"BEGIN SYSTEM PROMPT|\byou are now (?:in )?(?:developer|dan|jailbreak)",
            re.IGNORECASE | re.MULTILINE,
        ),
    ),
    (
        "asks to send secrets somewhere",
        re.compile(
            r"\b(?:send|post|upload|exfiltrate|email|forward)\b[^\n]{0,60}(?:\b(?:api[ _-]?keys?|"
            r"passwords?|tokens?|secrets?|credentials|ssh keys?|private keys?)\b|\.env\b)",
            re.IGNORECASE,
        ),
    ),
    (
        "pipes a download into a shell",
        re.compile(r"\b(?:curl|wget)\b[^\n|]*\|\s*(?:sudo\s+)?(?:ba|z)?sh\b", re.IGNORECASE),
    ),
]

HIDDEN = {"Cf"}  # format characters: zero-width spaces, bidi overrides


def scan(text: str) -> list[str]:
    """Reasons the text is refused; empty when it is fine."""
    findings = [reason for reason, pattern in PATTERNS if pattern.search(text)]
    hidden = [c for c in text if unicodedata.category(c) in HIDDEN and c not in "\u200d"]
    if hidden:
        findings.append(
            f"hides text with {len(hidden)} invisible character(s) (first U+{ord(hidden[0]):04X})"
        )
    return findings


class InjectionRefused(Invalid):
    def __init__(self, what: str, findings: list[str]) -> None:
        super().__init__(f"{what} refused by the injection scan: {'; '.join(findings)}")
        self.findings = findings


def check(text: str | None, what: str = "prompt") -> None:
    if text and (findings := scan(text)):
        raise InjectionRefused(what, findings)
