"""The speech providers' keys: a variable named and unset stops serve at start, naming it,
as a model's key does; the key never shows in the settings' repr."""

from __future__ import annotations

import pytest

from hermes.agent.settings import MediaConfig, SpeakConfig, TranscribeConfig
from hermes.agent.speech import Speech
from hermes.config import ConfigError, Secrets


def test_a_named_key_that_is_not_set_is_refused_by_name():
    media = MediaConfig(transcribe=TranscribeConfig(base_url="http://stt/v1", key_env="STT_KEY"))
    with pytest.raises(ConfigError, match="STT_KEY .the key of media.transcribe. is not set"):
        Speech.of(media, Secrets({}, frozenset()))


def test_the_keys_are_kept_out_of_the_repr():
    media = MediaConfig(speak=SpeakConfig(base_url="http://tts/v1", key_env="TTS_KEY"))
    speech = Speech.of(media, Secrets({"TTS_KEY": "sk-very-secret"}, frozenset()))
    assert speech.speak_key == "sk-very-secret" and "sk-very-secret" not in repr(speech)
