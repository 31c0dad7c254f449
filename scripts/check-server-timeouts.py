#!/usr/bin/env python3
"""Checks that an example server closes connections that trickle their
request head or sit idle after a response (the header-read timeout the
examples set, examples/common/mod.rs), while a normal request on another
connection is answered meanwhile.

usage: scripts/check-server-timeouts.py HOST:PORT [TIMEOUT_SECONDS]
Exit 0 when every slow connection was closed within TIMEOUT + 5 seconds.
"""
import socket
import sys
import time

host, port = sys.argv[1].rsplit(":", 1)
timeout = float(sys.argv[2]) if len(sys.argv) > 2 else 10.0
limit = timeout + 5.0


def closed_within(sock, seconds):
    """Seconds until the server closed `sock`, or None if it stayed open."""
    sock.settimeout(0.5)
    start = time.monotonic()
    while time.monotonic() - start < seconds:
        try:
            data = sock.recv(65536)
        except socket.timeout:
            continue
        except ConnectionResetError:
            return time.monotonic() - start
        if data == b"":
            return time.monotonic() - start
    return None


# 1. A head that never ends: one header byte a second.
trickle = socket.create_connection((host, int(port)))
trickle.sendall(b"POST /webhooks/stripe HTTP/1.1\r\nHost: x\r\n")
# 2. A keep-alive connection left idle after its response.
idle = socket.create_connection((host, int(port)))
idle.sendall(b"GET /effects HTTP/1.1\r\nHost: x\r\n\r\n")
idle.settimeout(5)
first = idle.recv(65536)
assert first.startswith(b"HTTP/1.1 200"), first[:80]

start = time.monotonic()
trickle.settimeout(0.2)
# Trickle for a while; a normal request on a third connection is answered meanwhile.
probe = socket.create_connection((host, int(port)))
probe.sendall(b"GET /effects HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n")
probe.settimeout(5)
assert probe.recv(65536).startswith(b"HTTP/1.1 200"), "a normal request was not answered"
probe.close()
trickle_closed = None
while time.monotonic() - start < limit:
    try:
        trickle.sendall(b"X")
    except (BrokenPipeError, ConnectionResetError):
        trickle_closed = time.monotonic() - start
        break
    try:
        if trickle.recv(65536) == b"":
            trickle_closed = time.monotonic() - start
            break
    except socket.timeout:
        pass
    except ConnectionResetError:
        trickle_closed = time.monotonic() - start
        break
    time.sleep(0.8)
idle_closed = closed_within(idle, max(0.0, limit - (time.monotonic() - start)) + 1)
print(f"trickled head closed after {trickle_closed} s; idle keep-alive closed after {idle_closed} s more")
if trickle_closed is None or idle_closed is None:
    print(f"a slow connection stayed open past {limit} s", file=sys.stderr)
    sys.exit(1)
