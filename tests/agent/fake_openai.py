"""A fake OpenAI-compatible server on 127.0.0.1: a real HTTP server speaking the
chat completions protocol (JSON and server-sent events), scripted per test.

Each request takes the next scripted answer: a status code with a JSON body,
a list of SSE chunks (optionally paced), or "refuse" for a dropped connection.
Requests are recorded with their headers and bodies.
"""

from __future__ import annotations

import json
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

import attrs


@attrs.define
class Answer:
    status: int = 200
    body: dict[str, Any] | None = None
    chunks: list[dict[str, Any]] | None = None  # streamed as SSE
    pause: float = 0.0  # between chunks
    headers: dict[str, str] = attrs.Factory(dict)


def text_answer(text: str, prompt_tokens: int = 10) -> Answer:
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


def error_answer(status: int, message: str = "error", **headers: str) -> Answer:
    return Answer(status, {"error": {"message": message}}, headers=headers)


class FakeOpenAI:
    def __init__(self) -> None:
        self.answers: list[Answer] = []
        self.default = text_answer("(no script)")  # when nothing is scripted
        self.requests: list[dict[str, Any]] = []
        self.lock = threading.Lock()
        fake = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"
            disable_nagle_algorithm = True  # headers and body go out at once

            def log_message(self, *args: Any) -> None:
                pass

            def do_POST(self) -> None:  # noqa: N802 - the stdlib's name
                length = int(self.headers.get("content-length", 0))
                body = json.loads(self.rfile.read(length) or b"{}")
                with fake.lock:
                    fake.requests.append({"path": self.path, "body": body,
                                          "auth": self.headers.get("authorization")})  # fmt: skip
                    answer = fake.answers.pop(0) if fake.answers else fake.default
                if body.get("stream") and answer.status == 200 and answer.chunks is None:
                    answer = as_stream(answer)  # a real server streams whatever it answers
                if answer.chunks is not None:
                    self.send_response(200)
                    self.send_header("content-type", "text/event-stream")
                    self.send_header("connection", "close")
                    self.end_headers()
                    try:
                        for chunk in answer.chunks:
                            self.wfile.write(f"data: {json.dumps(chunk)}\n\n".encode())
                            self.wfile.flush()
                            fake.pacing.wait(answer.pause)  # pace the stream
                        self.wfile.write(b"data: [DONE]\n\n")
                        self.wfile.flush()
                    except (BrokenPipeError, ConnectionResetError):
                        fake.aborted += 1
                    self.close_connection = True
                    return
                data = json.dumps(answer.body or {}).encode()
                self.send_response(answer.status)
                self.send_header("content-type", "application/json")
                self.send_header("content-length", str(len(data)))
                for key, value in answer.headers.items():
                    self.send_header(key, value)
                self.end_headers()
                self.wfile.write(data)

        self.aborted = 0
        self.pacing = threading.Event()  # never set: only its timeout is used
        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.server.daemon_threads = True
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)

    @property
    def url(self) -> str:
        host, port = self.server.server_address
        return f"http://{host}:{port}/v1"

    def __enter__(self) -> FakeOpenAI:
        self.thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.server.shutdown()
        self.server.server_close()

    def script(self, *answers: Answer) -> None:
        with self.lock:
            self.answers.extend(answers)


def closed_port_url() -> str:
    """A loopback URL where nothing listens: connections are refused."""
    import socket

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    return f"http://127.0.0.1:{port}/v1"


def main() -> None:
    """Serve in its own process (for benchmarks): every request gets `text`.

    python -m tests.agent.fake_openai TEXT   -> prints the base URL, serves until killed
    """
    import sys

    reply = text_answer(sys.argv[1] if len(sys.argv) > 1 else "pong")
    with FakeOpenAI() as fake:
        fake.default = reply
        print(fake.url, flush=True)
        fake.thread.join()


if __name__ == "__main__":
    main()
