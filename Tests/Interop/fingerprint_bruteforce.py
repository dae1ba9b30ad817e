#!/usr/bin/env python3
"""The brute force of issue 19, item 1, as an attacker runs it against a zone's files.

Usage: fingerprint_bruteforce.py STORE.sqlite PATH...

Reads every token row of a SQLite store (BIN, last 4, length and fingerprint) and every key-shaped
value in the files under PATH... (any base64 string of exactly 32 bytes, which covers
`vault:fk:v1:`, `vault:sk:v1:` and `vault:pk:v1:` lines under any file name). For each row and
each key it tries every Luhn-valid PAN with that visible prefix, length and last 4 (about 100,000
for any card: at least 6 digits stay hidden, DESIGN §1; 1,000 with the 8-digit BIN earlier
versions stored) and compares keyed BLAKE2b-256 with the stored fingerprint.
Prints JSON: rows, rows_with_fingerprint, keys_tried, recovered (rows whose PAN was rebuilt).
It never prints a recovered number.
"""
import base64
import hashlib
import json
import os
import re
import sqlite3
import sys

KEYISH = re.compile(rb"[A-Za-z0-9+/]{43}=")


def luhn_ok(digits):
    return luhn_sum(digits) % 10 == 0


def luhn_sum(digits):
    total = 0
    for i, d in enumerate(reversed(digits)):
        n = ord(d) - 48
        if i % 2 == 1:
            n *= 2
            if n > 9:
                n -= 9
        total += n
    return total


def keys_in(paths):
    found = set()
    for root in paths:
        files = []
        if os.path.isdir(root):
            for d, _, names in os.walk(root):
                files += [os.path.join(d, n) for n in names]
        else:
            files.append(root)
        for f in files:
            try:
                data = open(f, "rb").read()
            except OSError:
                continue
            for m in KEYISH.findall(data):
                raw = base64.b64decode(m)
                if len(raw) == 32:
                    found.add(raw)
    return found


def main():
    db, paths = sys.argv[1], sys.argv[2:]
    rows = sqlite3.connect(db).execute("SELECT bin, last4, fingerprint, envelope FROM vault_tokens").fetchall()
    keys = keys_in(paths)
    with_fp = 0
    recovered = 0
    for bin_, last4, fp, envelope in rows:
        if not fp:
            continue
        with_fp += 1
        length = json.loads(envelope)["card"]["length"]
        middle = length - len(bin_) - 4
        hit = False
        for key in keys:
            for i in range(10 ** (middle - 1)):
                # The last hidden digit is not doubled by Luhn (4 digits follow it): solve it.
                head = bin_ + str(i).zfill(middle - 1)
                pan = head + "0" + last4
                d = (10 - luhn_sum(pan) % 10) % 10
                pan = head + str(d) + last4
                # Named fingerprints (fp1_<fkid>_<hex>) and legacy bare hex both end with the hash.
                if hashlib.blake2b(pan.encode(), key=key, digest_size=32).hexdigest() == fp[-64:]:
                    hit = True
                    break
            if hit:
                break
        recovered += hit
    print(json.dumps({"rows": len(rows), "rows_with_fingerprint": with_fp, "keys_tried": len(keys), "recovered": recovered}))


if __name__ == "__main__":
    main()
