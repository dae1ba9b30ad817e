#!/usr/bin/env python3
"""A stand-in processor that remembers every charge, for the payment fault drill
(scripts/payment-drill) and the relay's settlement work. Python stdlib only.

  Tests/Interop/recording_processor.py --db PATH [--port N] [--seed N]
        [--p500-before P] [--p500-after P] [--p-timeout P] [--p-drop P] [--faults-on-replays]
        [--timeout-sleep 30] [--latency 0:0]

It listens on 127.0.0.1 (a free port unless --port; the port is the first line of stdout) and
keeps a durable record of every charge in the SQLite file --db (WAL, synchronous=FULL: a recorded
charge survives a restart of this process). It never stores nor logs a card number or CVC.

  POST /v1/charges   form: amount, currency, card[number], card[exp_month], card[exp_year],
                     card[cvc] (optional), metadata[vault_payment_id]; header Idempotency-Key.
      Idempotent by the key, like Stripe: the first request with a key decides and records the
      outcome; a later one with the key answers the recorded outcome and never charges again
      (another amount or currency: 400 {"error":{"type":"idempotency_error"}}; no CVC on a
      re-send is fine).
      card 4000000000000002 -> 402 {"error":{"type":"card_error","decline_code":"generic_decline"},"id":"ch_…"}
      a card failing Luhn  -> 402 {"error":{"type":"card_error","decline_code":"incorrect_number"},"id":"ch_…"}
      other cards          -> 200 {"id":"ch_…","status":"succeeded"}
      no key, a missing field -> 400 {"error":{"type":"invalid_request_error"}} (nothing recorded)
  GET  /v1/charges/{idempotency_key}
      -> 200 {"id","status":"succeeded"|"failed","failure_code"?} of the recorded outcome
      -> 404 {"error":{"type":"not_found"}}: the key was never charged nor declined
  POST /_faults      JSON {"p500_before","p500_after","p_timeout","p_drop"} (any subset); answers the
                     faults now in force. GET /_faults reads them.
  GET  /_records     JSON list of every record (key, status, charge id, amount, currency, payment
                     id, requests, created; never card data)
  GET  /_injected    JSON list of every fault injected: key, payment id, fault, time (also kept in --db)
  GET  /_stats       counters: charges posted, replays, lookups, faults injected by kind
  GET  /_health      200

Latency (--latency LO:HI seconds): each POST /v1/charges takes a random time in that range, half
before the outcome is decided and recorded, half after (a real processor answers in a second or
so: a gateway that dies meanwhile has sent a request whose outcome it never learns).

Faults, drawn at random for each POST /v1/charges that decides (a replay of a recorded key is
answered normally, unless --faults-on-replays):
  p500_before  answer 500, record nothing (nothing charged)
  p500_after   record the charge, then answer 500
  p_timeout    record the charge, then sleep --timeout-sleep seconds (30) before answering
  p_drop       record the charge, then shut the connection down without any answer
"""
import argparse
import json
import random
import re
import socket
import sqlite3
import sys
import threading
import time
import urllib.parse
import uuid
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
ap.add_argument("--db", required=True, help="the SQLite file of records")
ap.add_argument("--port", type=int, default=0)
ap.add_argument("--seed", type=int, default=None)
ap.add_argument("--p500-before", type=float, default=0.0)
ap.add_argument("--p500-after", type=float, default=0.0)
ap.add_argument("--p-timeout", type=float, default=0.0)
ap.add_argument("--p-drop", type=float, default=0.0)
ap.add_argument("--faults-on-replays", action="store_true")
ap.add_argument("--timeout-sleep", type=float, default=30.0)
ap.add_argument("--latency", default="0:0", help="LO:HI seconds each charge takes (half before deciding, half after)")
args = ap.parse_args()
latency = tuple(float(x) for x in args.latency.split(":"))

FAULTS = ("p500_before", "p500_after", "p_timeout", "p_drop")
faults = {"p500_before": args.p500_before, "p500_after": args.p500_after, "p_timeout": args.p_timeout, "p_drop": args.p_drop}
rng = random.Random(args.seed)
lock = threading.Lock()   # one decision at a time: the first request with a key decides, alone
stats = {"posts": 0, "charges_decided": 0, "replays": 0, "lookups": 0, "lookups_found": 0, "rejected": 0,
         "idempotency_errors": 0, **{f"injected_{f}": 0 for f in FAULTS}}

db = sqlite3.connect(args.db, check_same_thread=False, isolation_level=None, timeout=30)
db.execute("PRAGMA journal_mode = WAL")
db.execute("PRAGMA synchronous = FULL")
db.execute("""CREATE TABLE IF NOT EXISTS charges (
    idempotency_key TEXT PRIMARY KEY NOT NULL,
    charge_id TEXT NOT NULL,
    status TEXT NOT NULL,            -- succeeded | failed (declined)
    decline_code TEXT,
    amount INTEGER NOT NULL,
    currency TEXT NOT NULL,
    payment_id TEXT,                 -- metadata[vault_payment_id]
    had_cvc INTEGER NOT NULL,        -- whether the deciding request carried a CVC (never the CVC)
    requests INTEGER NOT NULL,       -- POSTs seen for this key, the deciding one included
    created_at REAL NOT NULL,
    last_request_at REAL NOT NULL
)""")
db.execute("""CREATE TABLE IF NOT EXISTS injected (
    idempotency_key TEXT NOT NULL,
    payment_id TEXT,
    fault TEXT NOT NULL,
    at REAL NOT NULL
)""")
COLUMNS = ["idempotency_key", "charge_id", "status", "decline_code", "amount", "currency", "payment_id", "had_cvc",
           "requests", "created_at", "last_request_at"]


def luhn(digits):
    total = 0
    for i, c in enumerate(reversed(digits)):
        d = ord(c) - 48
        if i % 2:
            d *= 2
            if d > 9:
                d -= 9
        total += d
    return total % 10 == 0


def record_of(key):
    row = db.execute(f"SELECT {', '.join(COLUMNS)} FROM charges WHERE idempotency_key = ?", (key,)).fetchone()
    return dict(zip(COLUMNS, row)) if row else None


def note_fault(fault, key, payment_id):
    with lock:
        stats[f"injected_{fault}"] += 1
        db.execute("INSERT INTO injected (idempotency_key, payment_id, fault, at) VALUES (?, ?, ?, ?)", (key, payment_id, fault, time.time()))


def draw_fault():
    with lock:
        u = rng.random()
    edge = 0.0
    for f in FAULTS:
        edge += faults[f]
        if u < edge:
            return f
    return None


class Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    server_version = "recording-processor/1"

    def log_message(self, *a):   # no request log: nothing here may ever print a request's content
        pass

    def answer(self, status, obj):
        body = json.dumps(obj).encode()
        try:
            self.send_response(status)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)
        except OSError:
            self.close_connection = True   # the client left (after a timeout fault): nothing to do

    @staticmethod
    def outcome_answer(rec):
        if rec["status"] == "succeeded":
            return 200, {"id": rec["charge_id"], "object": "charge", "status": "succeeded"}
        return 402, {"id": rec["charge_id"], "error": {"type": "card_error", "decline_code": rec["decline_code"], "charge": rec["charge_id"]}}

    def apply_fault(self, fault, rec):
        """After a charge was recorded: answer as the fault says."""
        note_fault(fault, rec["idempotency_key"], rec["payment_id"])
        if fault == "p500_after":
            return self.answer(500, {"error": {"type": "api_error", "message": "injected after the charge"}})
        if fault == "p_timeout":
            time.sleep(args.timeout_sleep)
            return self.answer(*self.outcome_answer(rec))
        if fault == "p_drop":
            self.close_connection = True
            try:
                self.connection.shutdown(socket.SHUT_RDWR)
            except OSError:
                pass
            return None
        return self.answer(*self.outcome_answer(rec))

    def do_GET(self):
        path = urllib.parse.urlsplit(self.path).path
        if path == "/_health":
            return self.answer(200, {"ok": True})
        if path == "/_faults":
            return self.answer(200, faults)
        if path == "/_stats":
            with lock:
                return self.answer(200, dict(stats))
        if path == "/_injected":
            with lock:
                rows = db.execute("SELECT idempotency_key, payment_id, fault, at FROM injected ORDER BY at").fetchall()
            return self.answer(200, [dict(zip(["idempotency_key", "payment_id", "fault", "at"], r)) for r in rows])
        if path == "/_records":
            with lock:
                rows = db.execute(f"SELECT {', '.join(COLUMNS)} FROM charges ORDER BY created_at").fetchall()
            return self.answer(200, [dict(zip(COLUMNS, r)) for r in rows])
        m = re.fullmatch(r"/v1/charges/([^/]+)", path)
        if m:
            key = urllib.parse.unquote(m.group(1))
            with lock:
                stats["lookups"] += 1
                rec = record_of(key)
                if rec:
                    stats["lookups_found"] += 1
            if not rec:
                return self.answer(404, {"error": {"type": "not_found", "message": "no charge under this idempotency key"}})
            out = {"id": rec["charge_id"], "object": "charge", "status": rec["status"], "amount": rec["amount"], "currency": rec["currency"]}
            if rec["status"] != "succeeded":
                out["failure_code"] = rec["decline_code"]
            return self.answer(200, out)
        return self.answer(404, {"error": {"type": "not_found"}})

    def do_POST(self):
        raw = self.rfile.read(int(self.headers.get("Content-Length") or 0))
        path = urllib.parse.urlsplit(self.path).path
        if path == "/_faults":
            try:
                change = json.loads(raw or b"{}")
                assert isinstance(change, dict) and set(change) <= set(FAULTS)
                new = {k: float(v) for k, v in change.items()}
                assert all(0 <= v <= 1 for v in new.values())
            except (ValueError, AssertionError, TypeError):
                return self.answer(400, {"error": {"type": "invalid_request_error", "message": "JSON object of " + ", ".join(FAULTS)}})
            with lock:
                faults.update(new)
                now = dict(faults)
            return self.answer(200, now)
        if path != "/v1/charges":
            return self.answer(404, {"error": {"type": "not_found"}})
        form = dict(urllib.parse.parse_qsl(raw.decode("utf-8", "replace"), keep_blank_values=True))
        key = self.headers.get("Idempotency-Key", "")
        number = form.pop("card[number]", "")
        had_cvc = bool(form.pop("card[cvc]", ""))
        try:
            amount, currency = int(form["amount"]), form["currency"].lower()
            assert key and amount > 0 and currency and form.get("card[exp_month]") and form.get("card[exp_year]")
        except (KeyError, ValueError, AssertionError):
            with lock:
                stats["rejected"] += 1
            return self.answer(400, {"error": {"type": "invalid_request_error", "message": "amount, currency, card[number], card[exp_month], card[exp_year] and an Idempotency-Key header are required"}})
        payment_id = form.get("metadata[vault_payment_id]")
        with lock:
            delay = rng.uniform(*latency) if latency[1] > 0 else 0.0
        time.sleep(delay / 2)
        now = time.time()
        with lock:
            stats["posts"] += 1
            rec = record_of(key)
            if rec:
                db.execute("UPDATE charges SET requests = requests + 1, last_request_at = ? WHERE idempotency_key = ?", (now, key))
                rec["requests"] += 1
                stats["replays"] += 1
                if rec["amount"] != amount or rec["currency"] != currency:
                    stats["idempotency_errors"] += 1
                    mismatch = True
                else:
                    mismatch = False
        if rec:
            number = None
            if mismatch:
                return self.answer(400, {"error": {"type": "idempotency_error", "message": "this Idempotency-Key was used with other parameters"}})
            fault = draw_fault() if args.faults_on_replays else None
            if fault == "p500_before":
                note_fault(fault, key, payment_id)
                return self.answer(500, {"error": {"type": "api_error", "message": "injected"}})
            if fault:
                return self.apply_fault(fault, rec)
            return self.answer(*self.outcome_answer(rec))
        fault = draw_fault()
        if fault == "p500_before":
            note_fault(fault, key, payment_id)
            number = None
            return self.answer(500, {"error": {"type": "api_error", "message": "injected before any charge"}})
        digits = number.isdigit() and 12 <= len(number) <= 19
        if digits and number == "4000000000000002":
            status, code = "failed", "generic_decline"
        elif not digits or not luhn(number):
            status, code = "failed", "incorrect_number"
        else:
            status, code = "succeeded", None
        number = None   # only the outcome is kept
        with lock:
            rec = record_of(key)   # a concurrent request with the key may have decided meanwhile
            if rec is None:
                db.execute(
                    f"INSERT INTO charges ({', '.join(COLUMNS)}) VALUES ({', '.join('?' * len(COLUMNS))})",
                    ("%s" % key, "ch_" + uuid.uuid4().hex[:24], status, code, amount, currency, payment_id, int(had_cvc), 1, now, now))
                stats["charges_decided"] += 1
                rec = record_of(key)
                decided = True
            else:
                db.execute("UPDATE charges SET requests = requests + 1, last_request_at = ? WHERE idempotency_key = ?", (now, key))
                rec["requests"] += 1
                stats["replays"] += 1
                decided = False
        time.sleep(delay / 2)
        if decided and fault:
            return self.apply_fault(fault, rec)
        if not decided and (rec["amount"] != amount or rec["currency"] != currency):
            return self.answer(400, {"error": {"type": "idempotency_error", "message": "this Idempotency-Key was used with other parameters"}})
        return self.answer(*self.outcome_answer(rec))


class Server(ThreadingHTTPServer):
    daemon_threads = True
    request_queue_size = 128
    allow_reuse_address = True


server = Server(("127.0.0.1", args.port), Handler)
print(server.server_address[1], flush=True)
try:
    server.serve_forever()
except KeyboardInterrupt:
    pass
