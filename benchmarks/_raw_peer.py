"""The raw-socket reference peer for benchmarks/test_bench_transport.py.

Run as a script it listens on 127.0.0.1 (an OS-chosen port, printed on one line) and serves
each connection on its own thread until its stdin closes. A connection's first 9 bytes pick
its mode for good: one ASCII letter and a u64 size N.

- ``P`` (push): repeat { receive N bytes into one preallocated buffer; send a 1-byte ack }.
- ``L`` (pull): repeat { receive a 1-byte request; send N bytes from a preallocated buffer }.
- ``E`` (echo): repeat { receive N bytes (8 for the ping-pong); send them back }.

Plain CPython: ``recv_into`` a preallocated buffer moves bulk data as fast as C does, so this
is what the machine's loopback TCP gives a careful program, with no protocol at all.
"""

from __future__ import annotations

import socket
import struct
import sys
import threading

MODE = struct.Struct("<cQ")


def recv_exact_into(sock: socket.socket, view: memoryview) -> bool:
    got, n = 0, len(view)
    while got < n:
        k = sock.recv_into(view[got:], n - got)
        if k == 0:
            return False
        got += k
    return True


def serve(conn: socket.socket) -> None:
    conn.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
    head = bytearray(MODE.size)
    with conn:
        if not recv_exact_into(conn, memoryview(head)):
            return
        mode, n = MODE.unpack(head)
        buf = memoryview(bytearray(max(n, 1)))[:n]
        one = bytearray(1)
        try:
            if mode == b"P":
                while recv_exact_into(conn, buf):
                    conn.sendall(b"\x01")
            elif mode == b"L":
                while recv_exact_into(conn, memoryview(one)):
                    conn.sendall(buf)
            elif mode == b"E":
                while recv_exact_into(conn, buf):
                    conn.sendall(buf)
        except OSError:
            return


def main() -> None:
    listener = socket.socket()
    listener.bind(("127.0.0.1", 0))
    listener.listen(64)
    print(listener.getsockname()[1], flush=True)

    def accept() -> None:
        while True:
            try:
                conn, _ = listener.accept()
            except OSError:
                return
            threading.Thread(target=serve, args=(conn,), daemon=True).start()

    threading.Thread(target=accept, daemon=True).start()
    sys.stdin.read()  # the benchmark closes our stdin (or dies): stop


if __name__ == "__main__":
    main()
