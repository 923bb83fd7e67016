"""A fake OpenAI-compatible server on 127.0.0.1: a real HTTP server speaking the
chat completions protocol (JSON and server-sent events), for the tests and the
benches.

The fake counts a prompt as a model would, four characters a token over the
messages and the tool definitions (`prompt_tokens`, per request), and reports
that count in each answer's usage unless the answer says otherwise.

Each request takes the next scripted answer (else `default`): a status code
with a JSON body, or a list of SSE chunks (optionally paced). A 200 JSON answer
is streamed when the request asks for `"stream": true`, the way the real API
does (a scripted function of the request's body makes its answer then:
`last_tool_result`). `answer_when(marker, answer)` answers the requests that mention `marker`
with `answer` instead (a summary call made to fail on demand). Every answer
starts `delay` seconds after its request arrived. Requests are recorded with
their headers and bodies, and the size of each prompt in `prompt_sizes`.

Speech, both ways (recorded apart from `requests`, which holds chat calls only):
`POST /v1/audio/transcriptions` (multipart: `file`, `model`, `response_format`) answers
`{"text": ...}`: the transcript `transcripts` holds for the file's sha256, else the
words of a file whose bytes are `SPEECH:<words>`, else "(inaudible)"; each request is
recorded in `transcriptions` (model, filename, size, sha256, auth). A file over 25 MB
answers 413, as OpenAI's limit. `POST /v1/audio/speech` (JSON: model, input, voice,
response_format) answers the bytes `SPEECH:<input>` (so its own transcription gives the
input back) as audio/ogg, recorded in `speeches`; an input over 4096 characters is a 400.

Many requests can be in flight at once (a thread each, a deep listen queue).
In its own process, for benches:

    python -m tests.fakes.openai [--delay 0.1] [--text pong] [--stream]

prints its base URL (ending in /v1) on one line and serves until killed.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import threading
from collections.abc import Callable
from typing import Any

import attrs

from tests.fakes.kit import Faults, serve_until_killed, wait
from tests.fakes.local_http import BodyError, LocalServer, Reply, TrackedHandler, form_parts


@attrs.define
class Answer:
    status: int = 200
    body: dict[str, Any] | None = None
    chunks: list[dict[str, Any]] | None = None  # streamed as SSE
    pause: float = 0.0  # between chunks
    headers: dict[str, str] = attrs.Factory(dict)
    delay: float = 0.0  # seconds before this answer starts (beside the fake's `delay`)


def text_answer(text: str, prompt_tokens: int | None = None) -> Answer:
    """A reply; its usage reports `prompt_tokens`, or (None) what the fake counted."""
    return Answer(body={
        "id": "cmpl-1", "object": "chat.completion",
        "choices": [{"index": 0, "message": {"role": "assistant", "content": text},
                     "finish_reason": "stop"}],
        "usage": {"prompt_tokens": prompt_tokens, "completion_tokens": len(text.split())},
    })  # fmt: skip


def tool_answer(*calls: tuple[str, dict[str, Any]]) -> Answer:
    return Answer(body={
        "id": "cmpl-2", "object": "chat.completion",
        "choices": [{"index": 0, "finish_reason": "tool_calls", "message": {
            "role": "assistant", "content": None,
            "tool_calls": [{"id": f"call_{i}", "type": "function",
                            "function": {"name": name, "arguments": json.dumps(args)}}
                           for i, (name, args) in enumerate(calls)]}}],
    })  # fmt: skip


def stream_answer(pieces: list[str], pause: float = 0.0) -> Answer:
    chunks = [{"choices": [{"index": 0, "delta": {"content": p}}]} for p in pieces]
    chunks.append({"choices": [{"index": 0, "delta": {}, "finish_reason": "stop"}],
                   "usage": {"prompt_tokens": 5, "completion_tokens": len(pieces)}})  # fmt: skip
    return Answer(chunks=chunks, pause=pause)


def as_stream(answer: Answer) -> Answer:
    """The same reply as server-sent event chunks, the way the real API streams it."""
    message = answer.body["choices"][0]["message"]
    delta: dict[str, Any] = {"role": "assistant"}
    if message.get("content"):
        delta["content"] = message["content"]
    if message.get("tool_calls"):
        delta["tool_calls"] = [{**call, "index": i} for i, call in enumerate(message["tool_calls"])]
    chunks = [{"choices": [{"index": 0, "delta": delta}]},
              {"choices": [{"index": 0, "delta": {}, "finish_reason": "stop"}],
               "usage": answer.body.get("usage")}]  # fmt: skip
    return Answer(chunks=chunks)


def last_tool_result(body: dict[str, Any]) -> Answer:
    """Script it as an answer: the reply quotes the last tool result the request holds
    (a model telling the user what a command printed)."""
    results = [m["content"] for m in body.get("messages") or () if m.get("role") == "tool"]
    return text_answer(f"it said: {results[-1] if results else '(no tool result)'}")


def error_answer(status: int, message: str = "error", **headers: str) -> Answer:
    return Answer(status, {"error": {"message": message}}, headers=headers)


def prompt_size(body: Any) -> int:
    """The characters of all the message contents of a request body (text parts included)."""
    total = 0
    messages = body.get("messages") if isinstance(body, dict) else None
    for message in messages or ():
        content = message.get("content") if isinstance(message, dict) else None
        if isinstance(content, str):
            total += len(content)
        elif isinstance(content, list):  # [{"type": "text", "text": ...}, ...]
            for part in content:
                if isinstance(part, dict) and isinstance(part.get("text"), str):
                    total += len(part["text"])
    return total


CHARS_PER_TOKEN = 4


def count_tokens(body: Any) -> int:
    """The prompt's tokens as this fake's model counts them: messages and tool definitions."""
    tools = body.get("tools") if isinstance(body, dict) else None
    calls = 0
    for message in (body.get("messages") if isinstance(body, dict) else None) or ():
        for call in (message.get("tool_calls") if isinstance(message, dict) else None) or ():
            calls += len(json.dumps(call))
    chars = prompt_size(body) + calls + (len(json.dumps(tools)) if tools else 0)
    return -(-chars // CHARS_PER_TOKEN)


def _with_usage(answer: Answer, tokens: int) -> Answer:
    """A JSON answer whose usage leaves prompt_tokens open gets the fake's own count."""
    usage = (answer.body or {}).get("usage")
    if answer.status != 200 or usage is None or usage.get("prompt_tokens") is not None:
        return answer
    body = {**answer.body, "usage": {**usage, "prompt_tokens": tokens}}
    return attrs.evolve(answer, body=body)


class FakeOpenAI:
    def __init__(self, delay: float = 0.0) -> None:
        # An entry may be a function of the request's body that makes its answer.
        self.answers: list[Answer | Callable[[dict[str, Any]], Answer]] = []
        self.default = text_answer("(no script)")  # when nothing is scripted
        self.delay = delay  # seconds before every answer starts; may be changed any time
        self.requests: list[dict[str, Any]] = []
        self.in_flight = 0  # chat requests being answered now
        self.most_in_flight = 0  # the most there were at once
        self.prompt_sizes: list[int] = []  # per request: characters of all message contents
        self.prompt_tokens: list[int] = []  # per request: what the fake counted, in tokens
        self.triggers: Faults[Answer] = Faults()  # by marker
        self.lock = threading.Lock()
        self.arrived = threading.Condition(self.lock)  # notified per request recorded
        fake = self

        class Handler(TrackedHandler):
            def _chunk(self, data: bytes) -> None:
                self.wfile.write(b"%x\r\n%s\r\n" % (len(data), data))
                self.wfile.flush()

            def _serve(self, raw: bytes) -> None:
                if self.path.endswith("/audio/transcriptions"):
                    return self._answer(fake._transcribe(raw, self.headers))
                if self.path.endswith("/audio/speech"):
                    return self._answer(fake._speak(raw, self.headers))
                body = json.loads(raw or b"{}")
                with fake.lock:
                    fake.in_flight += 1
                    fake.most_in_flight = max(fake.most_in_flight, fake.in_flight)
                try:
                    self._complete(raw, body)
                finally:
                    with fake.lock:
                        fake.in_flight -= 1

            def _complete(self, raw: bytes, body: dict[str, Any]) -> None:
                with fake.lock:
                    fake.requests.append({"path": self.path, "body": body,
                                          "auth": self.headers.get("authorization")})  # fmt: skip
                    fake.arrived.notify_all()
                    fake.prompt_sizes.append(prompt_size(body))
                    tokens = count_tokens(body)
                    fake.prompt_tokens.append(tokens)
                    answer = fake._triggered(raw.decode("utf-8", "replace"), body)
                    if answer is None:
                        answer = fake.answers.pop(0) if fake.answers else fake.default
                    if callable(answer):
                        answer = answer(body)
                    delay = max(fake.delay, answer.delay)
                if delay > 0:
                    fake.pacing.wait(delay)  # the model thinking
                answer = _with_usage(answer, tokens)
                if body.get("stream") and answer.status == 200 and answer.chunks is None:
                    answer = as_stream(answer)  # a real server streams whatever it answers
                if answer.chunks is not None:
                    # Chunked, and the connection kept alive for the next request, as a
                    # real API does (a client pays for a new connection per call otherwise).
                    self.send_response(200)
                    self.send_header("content-type", "text/event-stream")
                    self.send_header("transfer-encoding", "chunked")
                    self.end_headers()
                    try:
                        for chunk in answer.chunks:
                            self._chunk(f"data: {json.dumps(chunk)}\n\n".encode())
                            if answer.pause > 0:
                                fake.pacing.wait(answer.pause)  # pace the stream
                        self._chunk(b"data: [DONE]\n\n")
                        self._chunk(b"")  # the end of the body
                    except (BrokenPipeError, ConnectionResetError):
                        with fake.lock:
                            fake.aborted += 1
                        self.close_connection = True
                    return
                reply = Reply(answer.status, answer.body or {}, list(answer.headers.items()))
                self._answer(reply, ascii_json=True)

        self.aborted = 0
        self.pacing = threading.Event()  # never set: only its timeout is used
        self.server = LocalServer(Handler)
        self.thread = self.server.thread

        self.transcripts: dict[str, str] = {}  # by the audio's sha256: what it says
        self.transcriptions: list[dict[str, Any]] = []
        self.speeches: list[dict[str, Any]] = []

    @property
    def url(self) -> str:
        return f"{self.server.url}/v1"

    def _transcribe(self, raw: bytes, headers: Any) -> Reply:
        try:
            form = {p.name: p for p in form_parts(headers.get("content-type", ""), raw)}
        except BodyError:
            form = {}
        audio = form.get("file")
        if audio is None or audio.filename is None:
            return Reply(400, {"error": {"message": "file is required",
                                         "type": "invalid_request_error"}})  # fmt: skip
        filename, data = audio.filename, audio.data
        if len(data) > MAX_AUDIO:
            said = f"Maximum content size limit ({MAX_AUDIO}) exceeded"
            return Reply(413, {"error": {"message": said, "type": "invalid_request_error"}})
        digest = hashlib.sha256(data).hexdigest()
        with self.lock:
            self.transcriptions.append({
                "model": form["model"].text() if "model" in form else "", "filename": filename,
                "size": len(data), "sha256": digest, "auth": headers.get("authorization"),
            })  # fmt: skip
            self.arrived.notify_all()
            text = self.transcripts.get(digest)
        if text is None:
            text = (
                data[7:].decode("utf-8", "replace")
                if data.startswith(b"SPEECH:")
                else "(inaudible)"
            )
        return Reply(200, {"text": text})

    def _speak(self, raw: bytes, headers: Any) -> Reply:
        body = json.loads(raw or b"{}")
        words = body.get("input")
        if not isinstance(words, str) or not words or len(words) > 4096:
            return Reply(400, {"error": {"message": "input must be 1 to 4096 characters",
                                         "type": "invalid_request_error"}})  # fmt: skip
        audio = b"SPEECH:" + words.encode()
        with self.lock:
            self.speeches.append({**body, "auth": headers.get("authorization"),
                                  "sha256": hashlib.sha256(audio).hexdigest()})  # fmt: skip
            self.arrived.notify_all()
        return Reply(200, audio, content_type="audio/ogg")

    def wait_transcriptions(self, count: int = 1, timeout: float = 30.0) -> list[dict[str, Any]]:
        wait(self.arrived, lambda: len(self.transcriptions) >= count, timeout,
             lambda: f"{len(self.transcriptions)} of {count} transcriptions arrived")  # fmt: skip
        return list(self.transcriptions)

    def wait_speeches(self, count: int = 1, timeout: float = 30.0) -> list[dict[str, Any]]:
        wait(self.arrived, lambda: len(self.speeches) >= count, timeout,
             lambda: f"{len(self.speeches)} of {count} speech requests arrived")  # fmt: skip
        return list(self.speeches)

    def __enter__(self) -> FakeOpenAI:
        self.server.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.server.stop()

    def wait_requests(self, count: int, timeout: float = 30.0) -> None:
        """Block (in a thread) until `count` requests have arrived in all."""
        wait(self.arrived, lambda: len(self.requests) >= count, timeout,
             lambda: f"{len(self.requests)} of {count} model requests arrived")  # fmt: skip

    def script(self, *answers: Answer | Callable[[dict[str, Any]], Answer]) -> None:
        with self.lock:
            self.answers.extend(answers)

    def answer_when(self, marker: str, answer: Answer, times: int | None = 1) -> None:
        """The next `times` requests whose body mentions `marker` (None: all of them) get
        `answer` instead of the scripted or default one, which stays for the next request."""
        with self.lock:
            self.triggers.add(answer, target=marker, times=times)

    def _triggered(self, text: str, body: Any) -> Answer | None:
        """The answer of the first trigger matching this request (under the lock)."""
        canonical: list[str] = []

        def mentioned(marker: str) -> bool:
            if marker in text:
                return True
            if not canonical:  # the client may have escaped it (non-ASCII, quotes)
                canonical.append(json.dumps(body, ensure_ascii=False))
            return marker in canonical[0]

        return self.triggers.take(matches=mentioned)


MAX_AUDIO = 25 * 1024 * 1024


def closed_port_url() -> str:
    """A loopback URL where nothing listens: connections are refused."""
    import socket

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    return f"http://127.0.0.1:{port}/v1"


def main() -> None:
    """Serve in its own process (for benchmarks): every request gets the same answer."""
    parser = argparse.ArgumentParser(
        prog="python -m tests.fakes.openai",
        description="A fake OpenAI-compatible server: prints its base URL, serves until killed.",
    )
    parser.add_argument("--delay", type=float, default=0.0,
                        help="seconds before every answer starts (default 0)")  # fmt: skip
    parser.add_argument("--text", default="pong", help="the answer's text (default pong)")
    parser.add_argument("--stream", action="store_true",
                        help="always stream the answer, one chunk per word; without it, a "
                             "JSON answer, streamed in one chunk when the client asks")  # fmt: skip
    args = parser.parse_args()
    if args.stream:
        words = args.text.split(" ")
        reply = stream_answer([w + " " for w in words[:-1]] + words[-1:])
    else:
        reply = text_answer(args.text)
    fake = FakeOpenAI(delay=args.delay)
    fake.default = reply
    serve_until_killed(fake)


if __name__ == "__main__":
    main()
