#!/usr/bin/env python3
"""Writes every fixture under Fixtures/<name>/ from scratch, so each damaged shape is
reproducible and reviewable. Run from anywhere: python3 Fixtures/make-fixtures.py
The expected outcome of each is in Fixtures/README.md and in Tests/OutboxStoreTests/FixtureTests.swift."""
import hashlib, json, os, shutil

HERE = os.path.dirname(os.path.abspath(__file__))
AT = "2026-11-30T12:00:00.000Z"

def crc32c(data: bytes) -> int:
    crc = 0xFFFFFFFF
    for b in data:
        crc ^= b
        for _ in range(8):
            crc = (crc >> 1) ^ 0x82F63B78 if crc & 1 else crc >> 1
    return crc ^ 0xFFFFFFFF

def line(seq, type_, fields, version=1, crc=None):
    head = {"v": version, "seq": seq, "type": type_, "at": AT}
    head.update(fields)
    body = json.dumps(head, separators=(",", ":"), ensure_ascii=False).encode()[:-1]  # drop "}"
    c = crc32c(body) if crc is None else crc
    return body + (',"crc":"%08x"}\n' % c).encode()

def conv(seq, cid="c1"):
    return line(seq, "conversation", {"conversation": cid, "title": "Fixture chat", "originSurface": "cli", "createdAt": AT})

def turn(seq, tid, text="hello", attachments=()):
    return line(seq, "turn", {"id": tid, "conversation": "c1", "text": text, "attachments": list(attachments),
                              "surface": "cli", "createdAt": AT})

def state(seq, tid, st, attempt, **extra):
    f = {"id": tid, "state": st, "attempt": attempt}
    f.update(extra)
    return line(seq, "state", f)

BLOB = b"fixture attachment bytes\n"
SHA = hashlib.sha256(BLOB).hexdigest()
ATT = {"sha256": SHA, "name": "note.txt", "size": len(BLOB), "type": "text/plain"}

def valid_lines():
    return [
        conv(1),
        turn(2, "t1", "first message"),
        turn(3, "t2", "second, with a file", [ATT]),
        state(4, "t1", "syncing", 1),
        state(5, "t1", "synced", 1, engine={"http": 201, "status": "received", "replayed": False}),
        line(6, "reply", {"id": "t1", "status": "answered", "text": "echo: first message"}),
        turn(7, "t3", "third"),
    ]

def write(name, data, blobs=None):
    d = os.path.join(HERE, name)
    shutil.rmtree(d, ignore_errors=True)
    os.makedirs(d)
    with open(os.path.join(d, "turns.jsonl"), "wb") as f:
        f.write(data)
    if blobs:
        os.makedirs(os.path.join(d, "blobs"))
        for fname, content in blobs.items():
            with open(os.path.join(d, "blobs", fname), "wb") as f:
                f.write(content)

def main():
    v = valid_lines()
    good_blobs = {SHA: BLOB}
    write("valid", b"".join(v), good_blobs)
    write("empty", b"")
    write("torn-no-newline", b"".join(v) + turn(8, "t4", "never acknowledged")[:50], good_blobs)
    write("torn-zero-padded", b"".join(v) + turn(8, "t4")[:30] + b"\0" * 1000, good_blobs)
    final_bad = bytearray(turn(8, "t4", "torn final line"))
    final_bad[40] ^= 0x04
    write("final-line-bad-checksum", b"".join(v) + bytes(final_bad), good_blobs)
    write("all-zero-4k", b"\0" * 4096)
    # A power cut filled the unsynced sectors after a torn line with garbage, newlines included.
    garbage = bytes((i * 151 + 7) % 256 for i in range(300)).replace(b"\n", b"\x0b")
    write("torn-garbage-newlines", b"".join(v) + turn(8, "t4", "never acknowledged")[:40] + b"\n" + garbage[:120] + b"\n" + garbage[120:] + b"\n", good_blobs)
    write("garbage-middle", b"".join(v[:3]) + b"\x93garbage that is not a record\n" + b"".join(v[3:]), good_blobs)
    flipped = bytearray(v[1])
    flipped[flipped.index(b"first message") + 2] ^= 0x01  # one bit in the text
    write("bitflip-middle", v[0] + bytes(flipped) + b"".join(v[2:]), good_blobs)
    wrong_crc = line(2, "turn", json.loads(v[1])["id"] and {"id": "t1", "conversation": "c1", "text": "first message",
                     "attachments": [], "surface": "cli", "createdAt": AT}, crc=0xDEADBEEF)
    write("bad-checksum-middle", v[0] + wrong_crc + b"".join(v[2:]), good_blobs)
    write("duplicate-seq", b"".join(v[:3]) + turn(3, "t9", "same seq again") + b"".join(v[3:]), good_blobs)
    write("seq-gap", b"".join(v[:3]) + turn(5, "t9", "skips 4"), good_blobs)
    write("future-version", b"".join(v) + line(8, "turn", {"id": "t8", "conversation": "c1", "text": "from the future",
                                                           "attachments": [], "surface": "cli", "createdAt": AT}, version=2), good_blobs)
    bad_utf8 = turn(8, "t8", "PLACEHOLDER")
    body = bad_utf8[: bad_utf8.index(b',"crc":"')].replace(b"PLACEHOLDER", b"caf\xc3(")
    write("invalid-utf8", b"".join(v) + body + (',"crc":"%08x"}\n' % crc32c(body)).encode() + turn(9, "t9"), good_blobs)
    write("one-mib-line", b"".join(v[:3]) + turn(4, "t4", "x" * (1 << 20)) + turn(5, "t5"), good_blobs)
    write("unknown-turn-transition", b"".join(v[:3]) + state(4, "t-unknown", "syncing", 1) + turn(5, "t5"), good_blobs)
    write("missing-blob", b"".join(v), {})
    write("blob-mismatch", b"".join(v), {SHA: b"these are not the bytes that were hashed\n"})

if __name__ == "__main__":
    main()
