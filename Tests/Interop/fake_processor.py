#!/usr/bin/env python3
"""A stand-in for a real processor's API, for the relay tests: it listens on 127.0.0.1 (a free
port, printed on the first line of stdout), records every request it receives (method, path,
headers, body) as one JSON line in the file given as the first argument, and answers like the
two styles the relay templates in deploy/relay/ target:

  /v1/payment_intents (Stripe-style form): 200 {"id","status":"succeeded"}; card 4000000000000002
      -> 402 {"error":{"decline_code":"generic_decline"}}
  /pg/orders/pay (Cashfree-style JSON): 200 {"cf_payment_id","payment_status":"SUCCESS"};
      card 4000000000000002 -> 200 {"payment_status":"FAILED","error_details":{"error_code":"card_declined"}}

Either style: amount 5000 (minor units, or 50.00) -> 500; amount 7777 (77.77) -> no answer for 10 s.

For the relay's hardening tests: POST /redirect/<code> answers <code> with `Location:` set to the
request's X-Redirect-To header (a second listener that must receive nothing); POST /slow answers
{"id","status":"succeeded"} after 2 s. GET requests (a 302 turned into a GET) are recorded too.
"""
import json
import sys
import threading
import time
import urllib.parse
import uuid
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

log_path = sys.argv[1]
lock = threading.Lock()


class Handler(BaseHTTPRequestHandler):
    def log_message(self, *args):
        pass

    def answer(self, status, obj):
        body = json.dumps(obj).encode()
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def record(self, method, raw):
        with lock, open(log_path, "a") as f:
            f.write(json.dumps({"method": method, "path": self.path, "headers": dict(self.headers),
                                "body": raw.decode("utf-8", "replace")}) + "\n")

    def do_GET(self):
        self.record("GET", b"")
        return self.answer(404, {"error": "not here"})

    def do_POST(self):
        raw = self.rfile.read(int(self.headers.get("Content-Length", "0")))
        self.record("POST", raw)
        if self.path.startswith("/redirect/"):
            body = b"{}"
            self.send_response(int(self.path.rsplit("/", 1)[1]))
            self.send_header("Location", self.headers.get("X-Redirect-To", "/"))
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)
            return
        if self.path == "/slow":
            time.sleep(2)
            return self.answer(200, {"id": "pi_" + uuid.uuid4().hex[:16], "status": "succeeded"})
        if self.path == "/v1/payment_intents":
            form = dict(urllib.parse.parse_qsl(raw.decode()))
            pan, amount = form.get("payment_method_data[card][number]"), form.get("amount")
            style = "stripe"
        else:
            doc = json.loads(raw)
            pan, amount = doc["payment_method"]["card"]["card_number"], str(doc["order_amount"])
            style = "cashfree"
        if amount in ("5000", "50.0", "50.00"):
            return self.answer(500, {"error": "internal"})
        if amount in ("7777", "77.77"):
            time.sleep(10)
            return self.answer(200, {"status": "succeeded", "payment_status": "SUCCESS"})
        declined = pan == "4000000000000002"
        if style == "stripe":
            if declined:
                return self.answer(402, {"error": {"type": "card_error", "decline_code": "generic_decline"}})
            return self.answer(200, {"id": "pi_" + uuid.uuid4().hex[:16], "status": "succeeded"})
        if declined:
            return self.answer(200, {"cf_payment_id": "cf_" + uuid.uuid4().hex[:12], "payment_status": "FAILED",
                                     "error_details": {"error_code": "card_declined"}})
        return self.answer(200, {"cf_payment_id": "cf_" + uuid.uuid4().hex[:12], "payment_status": "SUCCESS"})


server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
print(server.server_address[1], flush=True)
server.serve_forever()
