"""The writer's child process: one WriterCore, driven over its stdin and stdout.

Why a process: SQLite releases the GIL for every call into it and needs it
back on return. In a thread of the serving process, each of those returns
waited on the Trio thread, so under load the writer advanced only when the
event loop paused, and the event loop paid for every hand-over. In its own
process the writer commits while the event loop runs.

Protocol: length-prefixed pickles. A request is (id, lane, method, args); a
batch comes in one pickle, or (if the child cannot load that) again as one
pickle per request. The reply is (id, ok, value, status, logs), the value
pickled on its own (a batch's: one (ok, pickle) per request), so one request
or answer that cannot cross fails alone.

Lane "main" runs open, batch and close in order; lane "checkpoint" runs
checkpoints beside them. Log records of the core travel back with the reply
and are logged by the parent, where the rest of hermes's logs go. The parent
closes stdin after its "close" request; stdin closing without one, while the
file is open, means the parent died, and the process exits at once.
"""

from __future__ import annotations

import importlib
import logging
import os
import pickle
import queue
import signal
import struct
import sys
import threading
import traceback
from pathlib import Path
from typing import Any, BinaryIO

import outcome

from hermes.state.errors import StateError
from hermes.state.writer_core import WriterCore

HEADER = struct.Struct("<I")
LANES = ("main", "checkpoint")


def frame(obj: Any) -> bytes:
    data = pickle.dumps(obj, protocol=pickle.HIGHEST_PROTOCOL)
    return HEADER.pack(len(data)) + data


class FrameReader:
    """Splits a byte stream back into the objects `frame` packed."""

    def __init__(self) -> None:
        self._buffer = bytearray()

    def feed(self, data: bytes) -> list[Any]:
        self._buffer += data
        out = []
        while len(self._buffer) >= HEADER.size:
            (size,) = HEADER.unpack_from(self._buffer)
            end = HEADER.size + size
            if len(self._buffer) < end:
                break
            out.append(pickle.loads(self._buffer[HEADER.size : end]))
            del self._buffer[:end]
        return out


def _portable(result: outcome.Outcome) -> tuple[bool, bytes]:
    """(ok, the value or the error, pickled); what does not pickle becomes a StateError."""
    if isinstance(result, outcome.Value):
        try:
            return True, pickle.dumps(result.value, protocol=pickle.HIGHEST_PROTOCOL)
        except Exception as exc:
            error: BaseException = StateError(
                f"a write returned what cannot leave its process: {exc}"
            )
    else:
        error = result.error
    try:
        return False, pickle.dumps(error, protocol=pickle.HIGHEST_PROTOCOL)
    except Exception:
        return False, pickle.dumps(StateError(f"{type(error).__name__}: {error}"))


def unpack(ok: bool, blob: bytes) -> outcome.Outcome:
    """The parent's side of `_portable`."""
    try:
        value = pickle.loads(blob)
    except Exception as exc:
        return outcome.Error(StateError(f"an answer of the writer's process cannot be read: {exc}"))
    return outcome.Value(value) if ok else outcome.Error(value)


class _Collect(logging.Handler):
    """Keeps the core's log records for the next reply."""

    def __init__(self) -> None:
        super().__init__(logging.INFO)
        self.records: list[tuple[str, int, str]] = []
        self.lock_ = threading.Lock()

    def emit(self, record: logging.LogRecord) -> None:
        with self.lock_:
            self.records.append((record.name, record.levelno, record.getMessage()))

    def take(self) -> list[tuple[str, int, str]]:
        with self.lock_:
            records, self.records = self.records, []
        return records


def _batch(core: WriterCore, payload: bytes | list[bytes]) -> list[outcome.Outcome] | None:
    """The batch in one pickle: None if it cannot be loaded here (say, a function of
    the parent's __main__), and the parent sends it again one pickle per request,
    so that the one that cannot be loaded fails alone."""
    if isinstance(payload, bytes):
        try:
            msgs = pickle.loads(payload)
        except Exception:
            return None
        return core.batch(msgs)
    loaded = [outcome.capture(pickle.loads, blob) for blob in payload]
    good = [r.value for r in loaded if isinstance(r, outcome.Value)]
    results = iter(core.batch(good) if good else [])
    return [
        next(results)
        if isinstance(r, outcome.Value)
        else outcome.Error(StateError(f"the writer's process cannot load this request: {r.error}"))
        for r in loaded
    ]


def serve(core: WriterCore, requests: BinaryIO, replies: BinaryIO) -> None:
    collect = _Collect()
    logging.getLogger("hermes").addHandler(collect)
    logging.getLogger("hermes").setLevel(logging.INFO)
    write_lock = threading.Lock()
    lanes: dict[str, queue.SimpleQueue] = {lane: queue.SimpleQueue() for lane in LANES}

    def answer(method: str, args: tuple) -> tuple[bool, Any]:
        if method != "batch":
            return _portable(outcome.capture(getattr(core, method), *args))
        result = outcome.capture(_batch, core, *args)  # an error here fails the whole batch
        if isinstance(result, outcome.Error):
            return _portable(result)
        if result.value is None:
            return True, None  # send it again, one pickle per request
        return True, [_portable(r) for r in result.value]  # one answer per request

    def run_lane(lane: queue.SimpleQueue) -> None:
        try:
            while (request := lane.get()) is not None:
                req_id, method, args = request
                ok, value = answer(method, args)
                data = frame((req_id, ok, value, core.status(), collect.take()))
                with write_lock:
                    replies.write(data)
                    replies.flush()
        except BaseException:  # never leave the parent waiting on an answer that cannot come
            traceback.print_exc()
            os._exit(1)

    threads = [
        threading.Thread(target=run_lane, args=(lanes[lane],), daemon=True) for lane in LANES
    ]
    for thread in threads:
        thread.start()
    reader = FrameReader()
    closing = False
    while chunk := requests.read1(1 << 16):
        for req_id, lane, method, args in reader.feed(chunk):
            closing = closing or method == "close"
            lanes[lane].put((req_id, method, args))
    if not closing and core.is_open:
        # The parent went away without closing us (it died): stop now, as after
        # a power cut. SQLite rolls back a half-done transaction on the next open.
        os._exit(0)
    for lane in LANES:
        lanes[lane].put(None)
    for thread in threads:
        thread.join()


def main() -> None:
    # Signals are the parent's business: a Ctrl-C at serve's terminal or a service
    # manager's SIGTERM to the whole group must not kill the writer before the
    # parent's drain has flushed through it. It stops when the parent says so.
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    signal.signal(signal.SIGTERM, signal.SIG_IGN)
    requests, replies = sys.stdin.buffer, sys.stdout.buffer
    sys.stdout = sys.stderr  # nothing else may write into the reply stream
    try:
        for module in sys.argv[2:]:  # where the parent's write functions live
            importlib.import_module(module)
        serve(WriterCore(Path(sys.argv[1])), requests, replies)
        replies.flush()
    except BaseException:
        traceback.print_exc()  # to stderr; the parent sees its replies end
        os._exit(1)
    os._exit(0)  # everything is closed: skip the interpreter's teardown, which takes a while


if __name__ == "__main__":
    main()
