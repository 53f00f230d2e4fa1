#!/usr/bin/env python3
"""Slow and idle clients against a running expanse-server (issue 16, class 3).

usage: slow_clients.py HOST PORT

Holds 40 TCP connections that never start TLS, 10 TLS connections that send a request header
one byte every 0.4 s and 5 that send a complete header and then their body at that pace, then
checks, and prints what it saw:
  - while they are all open, GET /healthz over TLS answers 200 (slow clients hold no worker);
  - 30 further connections from the same address take it past the per-address cap (64): the
    ones over the cap are closed at once, before any byte is exchanged;
  - every idle connection is closed by the server (handshake deadline) and every trickler is
    cut with most of its header or body unsent (the deadlines are absolute, not inactivity).
Exits 1 with a reason when any of these does not hold. The only clock is a 60 s safety bound.
"""
import socket
import ssl
import sys
import threading
import time

HOST, PORT = sys.argv[1], int(sys.argv[2])
HEADER = b"GET /healthz HTTP/1.1\r\nHost: x\r\nX-Padding: " + b"p" * 200 + b"\r\n\r\n"
# The body deadline is 10 s plus the length at 64 KiB/s: 11.5 s for this one, sent in ~11 h.
BODY_REQUEST = (b"POST /cp/v1/heartbeat HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
                b"Content-Length: 100000\r\n\r\n" + b" " * 100000)
HEADER_TRICKLERS, BODY_TRICKLERS = 10, 5
SAFETY_S = 60


def tls_context():
    context = ssl.create_default_context()
    context.check_hostname = False
    context.verify_mode = ssl.CERT_NONE
    return context


def closed_by_server(sock, wait_s):
    """True when the server closes `sock` (EOF or reset) within wait_s."""
    sock.settimeout(wait_s)
    try:
        return sock.recv(1) == b""
    except (ConnectionResetError, ssl.SSLError, OSError) as error:
        return not isinstance(error, socket.timeout)


def fail(message):
    print("FAIL: " + message)
    sys.exit(1)


idle = [socket.create_connection((HOST, PORT)) for _ in range(40)]

tricklers = []
total = HEADER_TRICKLERS + BODY_TRICKLERS
payloads = [HEADER] * HEADER_TRICKLERS + [BODY_REQUEST] * BODY_TRICKLERS
sent = [0] * total
cut = [False] * total


def trickle(index):
    sock = tls_context().wrap_socket(socket.create_connection((HOST, PORT)))
    tricklers.append(sock)
    deadline = time.monotonic() + SAFETY_S
    payload = payloads[index]
    try:
        if payload is BODY_REQUEST:  # the header at once, then the body a byte at a time
            head_end = payload.index(b"\r\n\r\n") + 4
            sock.sendall(payload[:head_end])
            sent[index] = head_end
            payload = payload[head_end:]
        for byte in payload:
            sock.send(bytes([byte]))
            sent[index] += 1
            if time.monotonic() > deadline:
                return
            time.sleep(0.4)
    except (BrokenPipeError, ConnectionResetError, ssl.SSLError, OSError):
        cut[index] = True


threads = [threading.Thread(target=trickle, args=(i,)) for i in range(total)]
for thread in threads:
    thread.start()
time.sleep(1.0)  # every trickler has its TLS session and a few bytes in

# An ordinary request while 55 slow connections are open.
with tls_context().wrap_socket(socket.create_connection((HOST, PORT), timeout=10)) as sock:
    sock.sendall(b"GET /healthz HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n")
    answer = b""
    while True:
        piece = sock.recv(65536)
        if not piece:
            break
        answer += piece
if not answer.startswith(b"HTTP/1.1 200"):
    fail("GET /healthz while 55 slow clients were open: " + repr(answer[:80]))
print("GET /healthz answered 200 while 40 idle and 15 trickling connections were open")

# Past the cap: 55 open + 30 more = 85 from one address, cap 64.
extra = [socket.create_connection((HOST, PORT)) for _ in range(30)]
refused = sum(1 for sock in extra if closed_by_server(sock, 1.0))
if refused < 85 - 64 - 2:  # the healthz connection may still be closing
    fail(f"only {refused} of 30 connections over the per-address cap were closed at accept")
print(f"{refused} of 30 connections past the per-address cap of 64 were closed at accept")
for sock in extra:
    sock.close()

still_open = [sock for sock in idle if not closed_by_server(sock, SAFETY_S)]
if still_open:
    fail(f"{len(still_open)} idle connections were never closed")
print("all 40 connections that never started TLS were closed by the server")

for thread in threads:
    thread.join(SAFETY_S)
if not all(cut):
    fail(f"tricklers not cut: {[i for i, c in enumerate(cut) if not c]}; bytes sent {sent}")
headers, bodies = sent[:HEADER_TRICKLERS], sent[HEADER_TRICKLERS:]
if max(headers) >= len(HEADER) or max(bodies) >= len(BODY_REQUEST):
    fail(f"a trickler sent its whole request: {sent}")
print(f"all {HEADER_TRICKLERS} header tricklers were cut after {min(headers)}-{max(headers)} of "
      f"{len(HEADER)} header bytes, all {BODY_TRICKLERS} body tricklers after "
      f"{min(bodies)}-{max(bodies)} of {len(BODY_REQUEST)} bytes")
