#!/usr/bin/python3
"""A gate in front of s3rver for test-s3: what s3rver 3.7 leaves out.

s3rver accepts any SigV4 request whose access key id it knows without
checking the signature, and it ignores If-Match on GET.  This gate checks
both, independently of wharf's C signer, and passes the rest through:

    s3-gate.py LISTEN_PORT UPSTREAM_PORT ACCESS_KEY SECRET_KEY

A bad signature gets 403 SignatureDoesNotMatch, a stale If-Match 412
PreconditionFailed, as S3 answers them.

Counters, unsigned: GET /_gate/stats answers {"get_bytes": N, "refused":
M}: body bytes of the 2xx answers to GETs, and requests refused (403).

Control, unsigned: GET /_gate/stuck-token?count=N makes the next N
ListObjectsV2 answers say IsTruncated true with NextContinuationToken
"stuck" (a buggy server's endless listing); a request carrying that token
goes to s3rver without it, as s3rver refuses tokens it did not make.
"""
import hashlib
import hmac
import http.client
import json
import http.server
import re
import sys
import threading
import urllib.parse

LISTEN, UPSTREAM, ACCESS, SECRET = (int(sys.argv[1]), int(sys.argv[2]),
                                    sys.argv[3], sys.argv[4])
STUCK = "stuck"
LOCK = threading.Lock()
stuck_left = 0  # listing answers still to rewrite
COUNTS = {"get_bytes": 0, "refused": 0}
HOP = {"connection", "keep-alive", "transfer-encoding", "te", "upgrade",
       "proxy-connection", "trailer"}


def enc(s, safe):
    return urllib.parse.quote(s, safe=safe)


def canonical_query(q):
    pairs = urllib.parse.parse_qsl(q, keep_blank_values=True)
    pairs = sorted((enc(k, "-_.~"), enc(v, "-_.~")) for k, v in pairs)
    return "&".join(k + "=" + v for k, v in pairs)


def hm(key, msg):
    return hmac.new(key, msg.encode(), hashlib.sha256).digest()


def expected_signature(method, target, headers, auth):
    fields = dict(p.strip().split("=", 1)
                  for p in auth[len("AWS4-HMAC-SHA256 "):].split(","))
    key, date, region, service, _ = fields["Credential"].split("/")
    signed = fields["SignedHeaders"].split(";")
    path, _, query = target.partition("?")
    creq = "\n".join([
        method,
        enc(urllib.parse.unquote(path), "/-_.~"),
        canonical_query(query),
        "".join(h + ":" + " ".join(headers.get(h, "").split()) + "\n"
                for h in signed),
        ";".join(signed),
        headers.get("x-amz-content-sha256", ""),
    ])
    sts = "\n".join([
        "AWS4-HMAC-SHA256", headers.get("x-amz-date", ""),
        "/".join([date, region, service, "aws4_request"]),
        hashlib.sha256(creq.encode()).hexdigest()
    ])
    k = hm(("AWS4" + SECRET).encode(), date)
    for part in (region, service, "aws4_request"):
        k = hm(k, part)
    return key, hmac.new(k, sts.encode(), hashlib.sha256).hexdigest(), \
        fields["Signature"]


class Gate(http.server.BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"

    def log_message(self, fmt, *args):
        pass

    def refuse(self, status, code, message):
        with LOCK:
            COUNTS["refused"] += status == 403
        body = ("<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n<Error><Code>"
                + code + "</Code><Message>" + message +
                "</Message></Error>").encode()
        self.send_response(status)
        self.send_header("Content-Type", "application/xml")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        if self.command != "HEAD":
            self.wfile.write(body)

    def upstream(self, method, headers, body, path=None):
        c = http.client.HTTPConnection("127.0.0.1", UPSTREAM, timeout=60)
        c.request(method, path or self.path, body=body, headers=headers)
        return c, c.getresponse()

    def control(self):
        global stuck_left
        q = urllib.parse.parse_qs(urllib.parse.urlsplit(self.path).query)
        with LOCK:
            stuck_left = int(q["count"][0])
        self.send_response(200)
        self.send_header("Content-Length", "0")
        self.end_headers()

    def stuck_listing(self):
        """Whether this answer is one to rewrite, and the path for s3rver."""
        global stuck_left
        u = urllib.parse.urlsplit(self.path)
        q = urllib.parse.parse_qsl(u.query, keep_blank_values=True)
        if self.command != "GET" or ("list-type", "2") not in q:
            return False, self.path
        with LOCK:
            rewrite = stuck_left > 0
            stuck_left -= rewrite
        if ("continuation-token", STUCK) not in q:
            return rewrite, self.path
        q = [(k, v) for k, v in q if (k, v) != ("continuation-token", STUCK)]
        return rewrite, u.path + "?" + urllib.parse.urlencode(
            q, quote_via=urllib.parse.quote)

    def stats(self):
        with LOCK:
            body = json.dumps(COUNTS).encode()
        self.send_response(200)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def handle_any(self):
        if self.path.startswith("/_gate/stuck-token?"):
            return self.control()
        if self.path == "/_gate/stats":
            return self.stats()
        n = int(self.headers.get("Content-Length") or 0)
        body = self.rfile.read(n) if n else None
        lower = {k.lower(): v for k, v in self.headers.items()}
        auth = lower.get("authorization")
        if auth:
            key, want, got = expected_signature(self.command, self.path,
                                                lower, auth)
            if key != ACCESS:
                return self.refuse(403, "InvalidAccessKeyId",
                                   "unknown access key")
            if not hmac.compare_digest(want, got):
                return self.refuse(403, "SignatureDoesNotMatch",
                                   "signature mismatch")
        fwd = {k: v for k, v in self.headers.items() if k.lower() not in HOP}
        match = lower.get("if-match")
        if match and self.command in ("GET", "HEAD"):
            c, r = self.upstream("HEAD", {
                k: v for k, v in fwd.items()
                if k.lower() not in ("range", "if-match")}, None)
            r.read()
            etag = r.getheader("ETag")
            c.close()
            if r.status == 200 and match != "*" and match != etag:
                return self.refuse(412, "PreconditionFailed",
                                   "At least one of the pre-conditions you "
                                   "specified did not hold")
        rewrite, path = self.stuck_listing()
        c, r = self.upstream(self.command, fwd, body, path)
        data = r.read()
        if rewrite and r.status == 200:
            data = re.sub(rb"<IsTruncated>\w+</IsTruncated>",
                          b"<IsTruncated>true</IsTruncated>", data)
            data = re.sub(rb"<NextContinuationToken>[^<]*"
                          rb"</NextContinuationToken>", b"", data)
            data = data.replace(b"</ListBucketResult>",
                                b"<NextContinuationToken>" + STUCK.encode()
                                + b"</NextContinuationToken>"
                                b"</ListBucketResult>")
        self.send_response(r.status, r.reason)
        for k, v in r.getheaders():
            if k.lower() not in HOP and k.lower() != "content-length":
                self.send_header(k, v)
        length = r.getheader("Content-Length") if self.command == "HEAD" \
            else None
        self.send_header("Content-Length", length or str(len(data)))
        self.end_headers()
        if self.command != "HEAD":
            self.wfile.write(data)
        if self.command == "GET" and 200 <= r.status < 300:
            with LOCK:
                COUNTS["get_bytes"] += len(data)
        c.close()

    do_GET = do_HEAD = do_PUT = do_DELETE = do_POST = handle_any


http.server.ThreadingHTTPServer(("127.0.0.1", LISTEN), Gate).serve_forever()
