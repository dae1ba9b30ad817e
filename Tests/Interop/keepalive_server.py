#!/usr/bin/env python3
"""A stand-in HTTP/1.1 server on a Unix socket for SidecarClient's keep-alive tests.

    keepalive_server.py SOCKET MODE

Answers every request with 200 {"connection":N,"request":M} (N counts accepted connections,
M the requests on this one). MODE:
  keepalive   keeps each connection open (Content-Length answers)
  close-idle  answers, then closes the connection without saying so (a server's idle timeout)
  slow        reads the request, then answers nothing for 5 s
Prints "ready" once it listens.
"""
import json
import os
import signal
import socket
import sys
import threading
import time

signal.signal(signal.SIGTERM, signal.SIG_DFL)  # an ignored SIGTERM may be inherited
path, mode = sys.argv[1], sys.argv[2]
if os.path.exists(path):
    os.unlink(path)
server = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
server.bind(path)
server.listen(16)
count = 0
lock = threading.Lock()


def serve(conn, n):
    buf = b""
    served = 0
    try:
        while True:
            while b"\r\n\r\n" not in buf:
                chunk = conn.recv(65536)
                if not chunk:
                    return
                buf += chunk
            head, _, buf = buf.partition(b"\r\n\r\n")
            length = 0
            for line in head.split(b"\r\n")[1:]:
                if line.lower().startswith(b"content-length:"):
                    length = int(line.split(b":", 1)[1])
            while len(buf) < length:
                buf += conn.recv(65536)
            buf = buf[length:]
            served += 1
            if mode == "slow":
                time.sleep(5)
            body = json.dumps({"connection": n, "request": served}).encode()
            conn.sendall(b"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: %d\r\n\r\n%s" % (len(body), body))
            if mode == "close-idle":
                return
    finally:
        conn.close()


print("ready", flush=True)
while True:
    conn, _ = server.accept()
    with lock:
        count += 1
        n = count
    threading.Thread(target=serve, args=(conn, n), daemon=True).start()
