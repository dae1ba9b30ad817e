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

For the settlement tests, a processor that is idempotent by key (the Idempotency-Key header): POST
/v1/charges charges a key once and answers every later request with that key the first result,
as Stripe does. Its X-Scenario header chooses a fault (per key, counted in requests):
  ok                   charge, answer 200
  fail-N               the first N requests answer 500 and charge nothing; then as ok
  charge-then-fail-N   the first N requests charge (once) and answer 500; then the first result
  hang-once            the first request charges and answers nothing for 10 s; then the first result
  drop-once            the first request charges and closes the connection without an answer
  hang                 every request charges (once) and answers nothing for 10 s
GET /v1/charges/<key> is the status query: 200 with the charge, 404 when the key was never
charged; its X-Status-Scenario header: 500 (answers 500), hang (nothing for 10 s). X-Hang-Seconds
shortens the hangs.
Each recorded line has "charged": true when that request made the charge.
"""
import json
import socket
import sys
import threading
import time
import urllib.parse
import uuid
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

log_path = sys.argv[1]
lock = threading.Lock()
charges = {}    # idempotency key -> the first result (the charge)
requests = {}   # idempotency key -> requests received


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

    def record(self, method, raw, charged=False):
        with lock, open(log_path, "a") as f:
            f.write(json.dumps({"method": method, "path": self.path, "headers": dict(self.headers),
                                "body": raw.decode("utf-8", "replace"), "charged": charged}) + "\n")

    def do_GET(self):
        if self.path.startswith("/v1/charges/"):
            return self.status_query()
        self.record("GET", b"")
        return self.answer(404, {"error": "not here"})

    def status_query(self):
        self.record("GET", b"")
        key = urllib.parse.unquote(self.path.rsplit("/", 1)[1])
        scenario = self.headers.get("X-Status-Scenario", "")
        if scenario == "500":
            return self.answer(500, {"error": "internal"})
        if scenario == "hang":
            time.sleep(float(self.headers.get("X-Hang-Seconds", "10")))
        with lock:
            first = charges.get(key)
        if first is None:
            return self.answer(404, {"error": {"type": "invalid_request_error", "code": "resource_missing"}})
        return self.answer(200, first)

    def idempotent_charge(self, raw):
        key = self.headers.get("Idempotency-Key", "")
        scenario = self.headers.get("X-Scenario", "ok")
        with lock:
            n = requests.get(key, 0) + 1
            requests[key] = n
            first = charges.get(key)
        limit = int(scenario.rsplit("-", 1)[1]) if scenario.startswith(("fail-", "charge-then-fail-")) else 0
        if scenario.startswith("fail-") and n <= limit:
            self.record("POST", raw)
            return self.answer(500, {"error": "internal"})
        charged = False
        if first is None:
            first = {"id": "ch_" + uuid.uuid4().hex[:16], "status": "succeeded"}
            with lock:
                charges[key] = first
            charged = True
        self.record("POST", raw, charged)
        if scenario.startswith("charge-then-fail-") and n <= limit:
            return self.answer(500, {"error": "internal"})
        if scenario == "hang" or (scenario == "hang-once" and n == 1):
            time.sleep(float(self.headers.get("X-Hang-Seconds", "10")))
            return self.answer(200, first)
        if scenario == "drop-once" and n == 1:
            self.close_connection = True
            self.connection.shutdown(socket.SHUT_RDWR)
            return
        return self.answer(200, first)

    def do_POST(self):
        raw = self.rfile.read(int(self.headers.get("Content-Length", "0")))
        if self.path == "/v1/charges":
            return self.idempotent_charge(raw)
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
