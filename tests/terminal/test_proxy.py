"""The sandbox's way out, on its own: an HTTP proxy on a Unix socket that tunnels CONNECT
and forwards absolute-form requests to allowed addresses only, one request per forwarded
connection, and says why it refused. (The sandbox itself allows public addresses only;
here a test server on loopback is allowed, as nothing public is reachable in a test.)"""

from __future__ import annotations

import os
import socket
from ipaddress import ip_network

import trio
import trio.testing

from hermes.terminal.addresses import AllowList
from hermes.terminal.backends.proxy import (
    HEAD_LIMIT,
    MAX_CONNECTIONS,
    Policy,
    Refused,
    serve_proxy,
    serve_proxy_tcp,
)

LOOPBACK = AllowList(networks=(ip_network("127.0.0.0/8"),))


async def origin(task_status=trio.TASK_STATUS_IGNORED) -> None:
    """A server that answers each connection with what it read of it, then closes."""

    async def answer(stream: trio.SocketStream) -> None:
        data = b""
        while b"\r\n\r\n" not in data and (piece := await stream.receive_some(65536)):
            data += piece
        body = b"seen:" + data
        await stream.send_all(b"HTTP/1.1 200 OK\r\nContent-Length: %d\r\n\r\n%s"
                              % (len(body), body))  # fmt: skip
        await stream.aclose()

    listeners = await trio.open_tcp_listeners(0, host="127.0.0.1")
    task_status.started(listeners[0].socket.getsockname()[1])
    await trio.serve_listeners(answer, listeners)


async def ask(path, request: bytes) -> bytes:
    """Send `request` through the proxy's socket; everything it answers."""
    sock = trio.socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    await sock.connect(str(path))
    stream = trio.SocketStream(sock)
    await stream.send_all(request)
    data = b""
    with trio.fail_after(10):
        while piece := await stream.receive_some(65536):
            data += piece
    await stream.aclose()
    return data


async def test_a_tunnel_and_a_forwarded_request_reach_what_is_allowed(tmp_path, nursery):
    port = await nursery.start(origin)
    path = tmp_path / "proxy.sock"
    await nursery.start(serve_proxy, path, Policy(LOOPBACK))
    tunnel = await ask(path, f"CONNECT 127.0.0.1:{port} HTTP/1.1\r\nHost: x\r\n\r\n"
                             "GET /inner HTTP/1.1\r\nHost: in\r\n\r\n".encode())  # fmt: skip
    assert tunnel.startswith(b"HTTP/1.1 200 Connection established\r\n\r\nHTTP/1.1 200 OK")
    assert b"seen:GET /inner HTTP/1.1" in tunnel
    request = (f"GET http://127.0.0.1:{port}/page?q=1 HTTP/1.1\r\nHost: h\r\n"
               "Proxy-Authorization: x\r\nConnection: keep-alive\r\n\r\n")  # fmt: skip
    forwarded = await ask(path, request.encode())
    seen = forwarded.split(b"seen:", 1)[1]
    assert seen.startswith(b"GET /page?q=1 HTTP/1.1\r\nHost: h\r\n")
    assert b"Proxy-Authorization" not in seen and b"keep-alive" not in seen
    assert b"Connection: close\r\n" in seen  # one request per forwarded connection


async def test_the_sandbox_proxy_refuses_what_is_not_public_and_what_is_not_a_request(
    tmp_path, nursery
):
    port = await nursery.start(origin)
    path = tmp_path / "proxy.sock"
    await nursery.start(serve_proxy, path)  # as the sandbox runs it: public addresses only
    for target, why in [
        (f"127.0.0.1:{port}", b"127.0.0.1 is loopback"),
        ("169.254.169.254:80", b"link-local (a cloud metadata address)"),
        ("10.0.0.1:443", b"10.0.0.1 is private"),
        ("[::1]:443", b"::1 is loopback"),
    ]:
        refused = await ask(path, f"CONNECT {target} HTTP/1.1\r\n\r\n".encode())
        assert refused.startswith(b"HTTP/1.1 403 Forbidden"), refused
        assert why in refused and b"public addresses only" in refused
    assert (await ask(path, b"GET /relative HTTP/1.1\r\n\r\n")).startswith(b"HTTP/1.1 400")
    assert (await ask(path, b"ftp://x HTTP/1.1\r\n\r\n")).startswith(b"HTTP/1.1 400")
    huge = b"GET http://x/ HTTP/1.1\r\nX: " + b"a" * (HEAD_LIMIT + 100) + b"\r\n\r\n"
    assert (await ask(path, huge)).startswith(b"HTTP/1.1 400")


def open_fds() -> int:
    return len(os.listdir("/proc/self/fd"))


async def connected(path) -> trio.SocketStream:
    sock = trio.socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    await sock.connect(str(path))
    return trio.SocketStream(sock)


async def test_a_flood_of_connections_costs_at_most_the_limit_and_a_bad_name_only_itself(
    tmp_path, nursery
):
    path = tmp_path / "proxy.sock"
    await nursery.start(serve_proxy, path)
    before = open_fds()
    idle = [await connected(path) for _ in range(MAX_CONNECTIONS + 20)]  # they send nothing
    late = await connected(path)  # waits in the backlog behind 20 of them: not accepted
    await late.send_all(b"CONNECT " + b"a" * 64 + b".com:443 HTTP/1.1\r\n\r\n")
    await trio.testing.wait_all_tasks_blocked()
    # ours, and the proxy's MAX_CONNECTIONS: the rest wait in the kernel at no cost
    assert open_fds() - before <= len(idle) + 1 + MAX_CONNECTIONS + 2
    for stream in idle[:21]:  # places free: the late one is served
        await stream.aclose()
    idle = idle[21:]
    with trio.fail_after(10):
        answer = await late.receive_some(65536)
    assert answer.startswith(b"HTTP/1.1 400") and b"not a host name" in answer
    # and the proxy still serves
    assert (await ask(path, b"CONNECT 10.0.0.1:443 HTTP/1.1\r\n\r\n")).startswith(b"HTTP/1.1 403")
    for stream in [*idle, late]:
        await stream.aclose()


async def test_on_a_loopback_port_each_refusal_is_told(nursery):
    """As the browser runs it: on 127.0.0.1, every refused connection reported (host, port,
    why) and answered 403 with the policy's note."""
    told: list[Refused] = []
    policy = Policy(on_refused=told.append, note="the browser reaches public addresses only")
    port = await nursery.start(serve_proxy_tcp, policy)
    stream = await trio.open_tcp_stream("127.0.0.1", port)
    async with stream:
        await stream.send_all(b"CONNECT 169.254.169.254:80 HTTP/1.1\r\n\r\n")
        answer = b""
        while piece := await stream.receive_some():
            answer += piece
    assert answer.startswith(b"HTTP/1.1 403")
    assert b"(the browser reaches public addresses only)" in answer
    assert told == [Refused("169.254.169.254", 80, told[0].why)]
    assert "link-local (a cloud metadata address)" in told[0].why


async def test_a_forwarded_requests_answer_closes_its_connection(tmp_path, nursery):
    """A server that would keep the connection open (keep-alive) gets one exchange: the
    client is told `Connection: close`, so it sends no other site's request down it."""

    async def keeping(stream: trio.SocketStream) -> None:
        data = b""
        while b"\r\n\r\n" not in data and (piece := await stream.receive_some(65536)):
            data += piece
        await stream.send_all(
            b"HTTP/1.1 200 OK\r\nConnection: keep-alive\r\nKeep-Alive: timeout=60\r\n"
            b"Content-Length: 2\r\n\r\nok"
        )
        await trio.sleep_forever()  # held open

    listeners = await trio.open_tcp_listeners(0, host="127.0.0.1")
    port = listeners[0].socket.getsockname()[1]
    nursery.start_soon(trio.serve_listeners, keeping, listeners)
    path = tmp_path / "proxy.sock"
    await nursery.start(serve_proxy, path, Policy(LOOPBACK))
    sock = trio.socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    await sock.connect(str(path))
    stream = trio.SocketStream(sock)
    await stream.send_all(b"GET http://127.0.0.1:%d/ HTTP/1.1\r\nHost: x\r\n\r\n" % port)
    data = b""
    with trio.fail_after(10):
        while not data.endswith(b"ok"):
            data += await stream.receive_some(65536)
    head = data.split(b"\r\n\r\n")[0].lower()
    assert b"connection: close" in head and b"keep-alive" not in head
    await stream.aclose()
