#!/usr/bin/python3
"""An Azure-like origin for test-sitecache: every blob answers with the
same ETag whatever its query, and with bytes that name the query's
parameters other than the SAS's (snapshot=A, comp=blocklist, ...), as a
snapshot, a version or a block list of one blob differ while a careless
cache key would take them for one.  Ranged GETs only.

Usage: snapshot-origin.py PORT"""
import re
import sys
import urllib.parse
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

SAS = {"sv", "ss", "srt", "sp", "se", "st", "spr", "sig", "sr", "sip"}
SIZE = 100000


def body_of(query):
    own = [kv for kv in query.split("&")
           if kv and kv.split("=", 1)[0].lower() not in SAS]
    tag = ("&".join(own) or "base") + ";"
    return (tag * (SIZE // len(tag) + 1))[:SIZE].encode()


class Blob(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"

    def do_GET(self):
        body = body_of(urllib.parse.urlsplit(self.path).query)
        m = re.fullmatch(r"bytes=(\d+)-(\d*)", self.headers.get("Range", ""))
        if not m:
            self.send_error(400, "ranged GETs only")
            return
        first = int(m.group(1))
        last = min(int(m.group(2) or SIZE - 1), SIZE - 1)
        part = body[first:last + 1]
        self.send_response(206)
        self.send_header("ETag", '"0x8DCSAME"')
        self.send_header("Content-Range", f"bytes {first}-{last}/{SIZE}")
        self.send_header("Content-Length", str(len(part)))
        self.end_headers()
        self.wfile.write(part)


ThreadingHTTPServer(("127.0.0.1", int(sys.argv[1])), Blob).serve_forever()
