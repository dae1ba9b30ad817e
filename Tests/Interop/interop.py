#!/usr/bin/env python3
"""Interop with the vault's formats from outside Swift, using PyNaCl (libsodium's Python binding).

Written from the contracts alone (docs/key-files.md, docs/sealed-value.md, docs/envelope-v1.md),
so that a test passing here means any PyNaCl program can do the same.

  interop.py kid FILE.pub                 print the kid computed with hashlib's BLAKE2b
  interop.py open FILE.key                open vault:v1 lines on stdin, print hex of each plaintext
  interop.py seal FILE.pub                seal each hex line on stdin, print vault:v1 lines
  interop.py open-envelope FILE.key       open an envelope v1 (JSON on stdin), print its fields as JSON
  interop.py make-envelope FILE.pub       seal a card (JSON on stdin) into an envelope v1 in Python
  interop.py tamper-envelope              swap pan and cvc of an envelope (stdin) to prove slot binding
"""
import base64
import hashlib
import json
import os
import sys

from nacl.bindings import (
    crypto_aead_xchacha20poly1305_ietf_decrypt,
    crypto_aead_xchacha20poly1305_ietf_encrypt,
)
from nacl.public import PrivateKey, PublicKey, SealedBox


def read_key(path, kind):
    line = open(path).read().strip()
    prefix = f"vault:{kind}:v1:"
    if not line.startswith(prefix):
        sys.exit(f"{path}: not a vault:{kind}:v1: key")
    raw = base64.b64decode(line[len(prefix):], validate=True)
    assert len(raw) == 32
    return raw


def kid_of(pk_bytes):
    return hashlib.blake2b(pk_bytes, digest_size=32).digest()[:8].hex()


def parse_sealed(line):
    parts = line.split(":")
    assert parts[0] == "vault" and parts[1] == "v1" and len(parts) == 4, line[:20]
    return parts[2], base64.b64decode(parts[3], validate=True)


def ad(kid, env_id, field):
    return f"vault:v1:{kid}:{env_id}:{field}".encode()


def main():
    cmd, args = sys.argv[1], sys.argv[2:]
    if cmd == "kid":
        print(kid_of(read_key(args[0], "pk")))
    elif cmd == "open":
        sk = PrivateKey(read_key(args[0], "sk"))
        kid = kid_of(bytes(sk.public_key))
        box = SealedBox(sk)
        for line in sys.stdin:
            line_kid, ct = parse_sealed(line.rstrip("\n"))
            assert line_kid == kid, "kid mismatch"
            print(box.decrypt(ct).hex())
    elif cmd == "seal":
        pk_bytes = read_key(args[0], "pk")
        box = SealedBox(PublicKey(pk_bytes))
        kid = kid_of(pk_bytes)
        for line in sys.stdin:
            ct = box.encrypt(bytes.fromhex(line.strip()))
            print(f"vault:v1:{kid}:{base64.b64encode(ct).decode()}")
    elif cmd == "open-envelope":
        sk = PrivateKey(read_key(args[0], "sk"))
        env = json.load(sys.stdin)
        assert env["v"] == 1 and env["kid"] == kid_of(bytes(sk.public_key))
        data_key = SealedBox(sk).decrypt(base64.b64decode(env["key"], validate=True))
        assert len(data_key) == 32
        out = {}
        for name, value in env["fields"].items():
            raw = base64.b64decode(value, validate=True)
            nonce, ct = raw[:24], raw[24:]
            out[name] = crypto_aead_xchacha20poly1305_ietf_decrypt(ct, ad(env["kid"], env["id"], name), nonce, data_key).decode()
        out["card"] = env["card"]
        print(json.dumps(out, sort_keys=True))
    elif cmd == "make-envelope":
        pk_bytes = read_key(args[0], "pk")
        kid = kid_of(pk_bytes)
        card = json.load(sys.stdin)
        env_id = "env_" + os.urandom(16).hex()
        data_key = os.urandom(32)
        number = card["number"]
        fields = {"pan": number, "exp": f"{card['exp_month']:02d}/{card['exp_year']}"}
        if card.get("cvc"):
            fields["cvc"] = card["cvc"]
        if card.get("name") is not None:
            fields["name"] = card["name"]
        enc = {}
        for name, text in fields.items():
            nonce = os.urandom(24)
            ct = crypto_aead_xchacha20poly1305_ietf_encrypt(text.encode(), ad(kid, env_id, name), nonce, data_key)
            enc[name] = base64.b64encode(nonce + ct).decode()
        env = {
            "v": 1, "id": env_id, "kid": kid,
            "key": base64.b64encode(SealedBox(PublicKey(pk_bytes)).encrypt(data_key)).decode(),
            "fields": enc,
            "card": {"brand": card["brand"], "bin": number[:8] if len(number) >= 16 else number[:6],
                     "last4": number[-4:], "length": len(number),
                     "exp_month": card["exp_month"], "exp_year": card["exp_year"]},
        }
        print(json.dumps(env))
    elif cmd == "tamper-envelope":
        env = json.load(sys.stdin)
        env["fields"]["pan"], env["fields"]["cvc"] = env["fields"]["cvc"], env["fields"]["pan"]
        print(json.dumps(env))
    else:
        sys.exit(f"unknown command {cmd}")


if __name__ == "__main__":
    main()
