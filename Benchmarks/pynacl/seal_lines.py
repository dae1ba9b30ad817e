#!/usr/bin/env python3
"""The PyNaCl counterpart of `vault seal --lines`: read lines, crypto_box_seal each (PyNaCl's
SealedBox), write `vault:v1:<kid>:<base64>` lines. Buffered stdio, one process, one thread: what a
careful Python tool does. Usage: seal_lines.py <kid> <public key base64> < in > out"""
import base64, sys
from nacl.public import PublicKey, SealedBox

box = SealedBox(PublicKey(base64.b64decode(sys.argv[2])))
prefix = b"vault:v1:" + sys.argv[1].encode() + b":"
out = sys.stdout.buffer
encrypt, b64 = box.encrypt, base64.b64encode
for line in sys.stdin.buffer:
    out.write(prefix + b64(encrypt(line.rstrip(b"\n"))) + b"\n")
