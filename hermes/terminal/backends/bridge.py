"""Inside a sandbox with `public` network: 127.0.0.1:PORT bridged to the proxy's socket.

Run by the sandbox (hermes.terminal.backends.sandbox) as
`python3 -I -S bridge.py PORT SOCKET -- COMMAND...`, on whatever Python the sandbox
sees, so it uses the standard library only and imports nothing of hermes. It listens
first, then forks: the child bridges connections, the parent becomes COMMAND (exec), so
the proxy is there before the command's first request, and the bridge dies with the
command's namespace when the command ends.
"""

import os
import socket
import sys
import threading

CHUNK = 65536


def pipe(source, sink):
    try:
        while True:
            piece = source.recv(CHUNK)
            if not piece:
                break
            sink.sendall(piece)
        sink.shutdown(socket.SHUT_WR)
    except OSError:
        pass


def bridge(client, path):
    upstream = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    try:
        upstream.connect(path)
    except OSError:
        client.close()
        return
    back = threading.Thread(target=pipe, args=(upstream, client), daemon=True)
    back.start()
    pipe(client, upstream)
    back.join()
    client.close()
    upstream.close()


def serve(listener, path):
    while True:
        client, _ = listener.accept()
        threading.Thread(target=bridge, args=(client, path), daemon=True).start()


def main():
    port, path, dashes, command = sys.argv[1], sys.argv[2], sys.argv[3], sys.argv[4:]
    if dashes != "--" or not command:
        sys.exit("usage: bridge.py PORT SOCKET -- COMMAND...")
    listener = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    listener.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    listener.bind(("127.0.0.1", int(port)))
    listener.listen(64)
    if os.fork() == 0:
        quiet = os.open(os.devnull, os.O_RDWR)
        for fd in (0, 1, 2):
            os.dup2(quiet, fd)
        serve(listener, path)
        os._exit(0)
    listener.close()
    os.execvp(command[0], command)


if __name__ == "__main__":
    main()
