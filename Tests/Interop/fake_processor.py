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

Capture, void and refund (the templates' operation sections), idempotent by key (Idempotency-Key or
x-idempotency-key: a repeat answers the first result and acts nothing more; "charged": true marks
the request that acted). Stripe-style: /v1/payment_intents with capture_method=manual holds the
amount (status requires_capture); POST /v1/payment_intents/<id>/capture (amount_to_capture, at most
what is held: else 400 {"error":{"code":"amount_too_large"}}), /cancel (status canceled), POST
/v1/refunds (payment_intent, amount; more than captured minus refunded -> 400
{"error":{"code":"amount_too_large"}}; amount 666 -> 200 {"status":"failed","failure_reason":
"expired_or_canceled_card"}); an unknown intent -> 404. Cashfree-style: POST
/pg/orders/<order_id>/authorization ({"action":"CAPTURE|VOID","amount"}) -> 200
{"cf_payment_id","authorization":{"action","status":"SUCCESS"}}; POST /pg/orders/<order_id>/refunds
({"refund_amount","refund_id"}) -> 200 {"cf_refund_id","refund_id","refund_status":"SUCCESS"}, more
than paid minus refunded -> 400 {"code":"refund_amount_exceeded"}. Either style: an operation of
amount 5000 (50.00) answers 500 and does nothing; of amount 7777 (77.77) acts, then answers after
X-Hang-Seconds (default 10) the first time per key, and at once afterwards.
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
intents = {}    # Stripe-style payment intent / Cashfree order id -> {"amount", "held", "captured", "refunded"}
results = {}    # operation idempotency key -> (status, answer)


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

    def operation(self, raw):
        """Capture, void and refund, idempotent by key (see the module's text)."""
        key = self.headers.get("Idempotency-Key") or self.headers.get("x-idempotency-key") or ""
        with lock:
            first = results.get(key) if key else None
        if first is not None:
            self.record("POST", raw)
            return self.answer(*first)
        parts = self.path.strip("/").split("/")
        if self.path.startswith("/pg/"):
            doc = json.loads(raw or b"{}")
            order = urllib.parse.unquote(parts[2])
            kind = "refund" if parts[3] == "refunds" else doc.get("action", "").lower()
            amount = int(round(float(doc.get("refund_amount" if kind == "refund" else "amount", 0)) * 100))
        else:
            form = dict(urllib.parse.parse_qsl(raw.decode()))
            if parts[1] == "refunds":
                kind, order, amount = "refund", form.get("payment_intent", ""), int(form.get("amount", "0"))
            else:
                order, kind = urllib.parse.unquote(parts[2]), parts[3]
                amount = int(form.get("amount_to_capture", "0"))
        if amount == 5000:
            self.record("POST", raw)
            return self.answer(500, {"error": "internal"})
        with lock:
            intent = intents.get(order)
            if intent is None:
                result = (404, {"error": {"code": "resource_missing"}, "code": "order_not_found"})
            elif kind in ("capture", "void") and intent["held"] == 0:
                result = (400, {"error": {"code": "payment_intent_unexpected_state"}, "code": "request_invalid"})
            elif kind == "capture" and amount > intent["held"]:
                result = (400, {"error": {"code": "amount_too_large"}, "code": "request_invalid"})
            elif kind == "refund" and amount > intent["captured"] - intent["refunded"]:
                result = (400, {"error": {"code": "amount_too_large"}, "code": "refund_amount_exceeded"})
            elif kind == "refund" and amount == 666:
                result = (200, {"id": "re_" + uuid.uuid4().hex[:16], "status": "failed", "failure_reason": "expired_or_canceled_card",
                                "refund_status": "CANCELLED"})
            else:
                if kind == "capture":
                    intent["captured"], intent["held"] = amount, 0
                elif kind in ("void", "cancel"):
                    intent["held"] = 0
                else:
                    intent["refunded"] += amount
                status = {"capture": "succeeded", "cancel": "canceled", "void": "canceled"}.get(kind, "succeeded")
                answer = {"id": intent["id"] if kind != "refund" else "re_" + uuid.uuid4().hex[:16], "status": status}
                if self.path.startswith("/pg/"):
                    answer = {"cf_payment_id": intent["id"], "authorization": {"action": kind.upper(), "status": "SUCCESS"}}
                    if kind == "refund":
                        answer = {"cf_refund_id": "cfr_" + uuid.uuid4().hex[:10], "refund_id": doc.get("refund_id"), "refund_status": "SUCCESS"}
                result = (200, answer)
            acted = result[0] == 200 and result[1].get("status") != "failed"
            if key:
                results[key] = result
        self.record("POST", raw, acted)
        if amount == 7777:
            time.sleep(float(self.headers.get("X-Hang-Seconds", "10")))
        return self.answer(*result)

    def do_POST(self):
        raw = self.rfile.read(int(self.headers.get("Content-Length", "0")))
        if self.path == "/v1/charges":
            return self.idempotent_charge(raw)
        if self.path == "/v1/refunds" or (self.path.startswith("/v1/payment_intents/") and self.path.count("/") == 4) \
                or (self.path.startswith("/pg/orders/") and self.path.endswith(("/authorization", "/refunds"))):
            return self.operation(raw)
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
        manual, order = False, None
        if self.path == "/v1/payment_intents":
            form = dict(urllib.parse.parse_qsl(raw.decode()))
            pan, amount = form.get("payment_method_data[card][number]"), form.get("amount")
            manual = form.get("capture_method") == "manual"
            style = "stripe"
        else:
            doc = json.loads(raw)
            pan, amount = doc["payment_method"]["card"]["card_number"], str(doc["order_amount"])
            order = doc.get("order_id")
            style = "cashfree"
        if amount in ("5000", "50.0", "50.00"):
            return self.answer(500, {"error": "internal"})
        if amount in ("7777", "77.77"):
            time.sleep(10)
            return self.answer(200, {"status": "succeeded", "payment_status": "SUCCESS"})
        declined = pan == "4000000000000002"
        minor = int(round(float(amount) * (100 if style == "cashfree" else 1)))
        if style == "stripe":
            if declined:
                return self.answer(402, {"error": {"type": "card_error", "decline_code": "generic_decline"}})
            intent = {"id": "pi_" + uuid.uuid4().hex[:16], "amount": minor, "held": minor if manual else 0,
                      "captured": 0 if manual else minor, "refunded": 0}
            with lock:
                intents[intent["id"]] = intent
            return self.answer(200, {"id": intent["id"], "status": "requires_capture" if manual else "succeeded"})
        if declined:
            return self.answer(200, {"cf_payment_id": "cf_" + uuid.uuid4().hex[:12], "payment_status": "FAILED",
                                     "error_details": {"error_code": "card_declined"}})
        intent = {"id": "cf_" + uuid.uuid4().hex[:12], "amount": minor, "held": 0, "captured": minor, "refunded": 0}
        with lock:
            intents[intent["id"]] = intent
            if order:
                intents[order] = intent
        return self.answer(200, {"cf_payment_id": intent["id"], "payment_status": "SUCCESS"})


server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
print(server.server_address[1], flush=True)
server.serve_forever()
