#!/usr/bin/env python3
"""A webhook receiver that verifies the vault's signatures (docs/events.md "Verifying a delivery"),
for tests, the webhook drill and as the recipe's worked example.

  python3 Tests/Interop/webhook_receiver.py --secret-file webhook.secret --unix /tmp/hooks.sock
  python3 Tests/Interop/webhook_receiver.py --secret-file webhook.secret --port 0   # prints the port

Each delivery is checked (signature over "<t>." + body with HMAC-SHA256, timestamp within 5
minutes) and answered 200, or 400 when the check fails. Verified deliveries are appended to
--record (JSON lines: id, type, object id, sha256 of the body, time received)."""
import argparse, hashlib, hmac, http.server, json, os, socket, socketserver, sys, threading, time

TOLERANCE = 300  # seconds


def verify(secret: bytes, header: str, body: bytes, now: float | None = None) -> bool:
    """The recipe: parse `t=<unix seconds>,v1=<hex>` (several v1 may be given), recompute
    HMAC-SHA256(secret, f"{t}." + body), compare in constant time, refuse an old timestamp."""
    try:
        parts = [p.split("=", 1) for p in header.split(",")]
        t = int(next(v for k, v in parts if k == "t"))
        signatures = [v for k, v in parts if k == "v1"]
    except (StopIteration, ValueError):
        return False
    if abs((now or time.time()) - t) > TOLERANCE:
        return False
    expected = hmac.new(secret, f"{t}.".encode() + body, hashlib.sha256).hexdigest()
    return any(hmac.compare_digest(expected, s) for s in signatures)


def read_secret(path: str) -> bytes:
    with open(path, "rb") as f:
        return f.read().rstrip(b"\r\n")


class Receiver:
    """Records verified deliveries; `fail_next` answers 500 to that many verified deliveries first."""

    def __init__(self, secret: bytes, record: str | None = None):
        self.secret, self.lock = secret, threading.Lock()
        self.deliveries, self.bad, self.bad_samples, self.truncated, self.fail_next = [], 0, [], 0, 0
        self.record = open(record, "a") if record else None

    def handle(self, headers, body: bytes) -> int:
        if not verify(self.secret, headers.get("Vault-Signature", ""), body):
            with self.lock:
                self.bad += 1
                self.bad_samples.append({"signature": headers.get("Vault-Signature", ""), "length": len(body),
                                         "received": time.time(), "sha256": hashlib.sha256(body).hexdigest()})
            return 400
        event = json.loads(body)
        with self.lock:
            if self.fail_next > 0:
                self.fail_next -= 1
                return 500
            entry = {"id": event["id"], "type": event["type"], "object": event["data"]["object"].get("id") or event["data"]["object"].get("token"),
                     "sha256": hashlib.sha256(body).hexdigest(), "header_id": headers.get("Vault-Event-Id"), "at": time.time(),
                     "body": body.decode()}
            self.deliveries.append(entry)
            if self.record:
                self.record.write(json.dumps(entry) + "\n")
                self.record.flush()
        return 200

    def handler(self):
        receiver = self

        class Handler(http.server.BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def do_POST(self):
                length = int(self.headers.get("Content-Length", "0"))
                body = self.rfile.read(length)
                if len(body) < length:
                    # The sender died (or the receiver was taken down) mid-body: no delivery was
                    # made, so there is nothing to verify or answer; the vault sends it again.
                    with receiver.lock:
                        receiver.truncated += 1
                    self.close_connection = True
                    return
                status = receiver.handle(self.headers, body)
                self.send_response(status)
                self.send_header("Content-Length", "0")
                self.end_headers()

            def log_message(self, *a):
                pass

            def address_string(self):
                return "unix"

        return Handler


class Quiet:
    """Quiet about senders killed mid-request (the drill's SIGKILLs); `stop()` closes the listening
    socket and every open (keep-alive) connection: the receiver is really down."""

    def get_request(self):
        conn, addr = super().get_request()
        with self._conns_lock:
            self._conns.add(conn)
        return conn, addr

    def shutdown_request(self, request):
        with self._conns_lock:
            self._conns.discard(request)
        super().shutdown_request(request)

    def handle_error(self, request, client_address):
        pass

    def stop(self):
        self.shutdown()
        self.server_close()
        with self._conns_lock:
            for c in list(self._conns):
                try:
                    c.shutdown(socket.SHUT_RDWR)
                except OSError:
                    pass


class UnixServer(Quiet, socketserver.ThreadingMixIn, socketserver.UnixStreamServer):
    daemon_threads = True


class TCPServer(Quiet, socketserver.ThreadingMixIn, http.server.HTTPServer):
    daemon_threads = True


def serve(receiver: Receiver, unix: str | None = None, port: int | None = None):
    """A running server (its thread started); `server.stop()` takes it down."""
    if unix:
        if os.path.exists(unix):
            os.unlink(unix)
        server = UnixServer(unix, receiver.handler(), bind_and_activate=False)
    else:
        server = TCPServer(("127.0.0.1", port or 0), receiver.handler(), bind_and_activate=False)
    server._conns, server._conns_lock = set(), threading.Lock()
    server.server_bind()
    server.server_activate()
    threading.Thread(target=server.serve_forever, daemon=True).start()
    return server


if __name__ == "__main__":
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--secret-file", required=True)
    ap.add_argument("--unix")
    ap.add_argument("--port", type=int)
    ap.add_argument("--record")
    a = ap.parse_args()
    r = Receiver(read_secret(a.secret_file), a.record)
    s = serve(r, a.unix, a.port)
    if not a.unix:
        print(s.server_address[1], flush=True)
    try:
        while True:
            time.sleep(3600)
    except KeyboardInterrupt:
        pass
