#!/usr/bin/python3
"""test-azure's hands on Azurite, and its stand-in token endpoints.

Blobs go in with Shared Key, signed here independently of wharf's signer:

    azure-tool.py put BASE ACCOUNT KEY CONTAINER NAME FILE
    azure-tool.py many BASE ACCOUNT KEY CONTAINER PREFIX COUNT
    azure-tool.py public BASE ACCOUNT KEY CONTAINER NAME FILE
                                 (put, in a container anyone may read)
    azure-tool.py sas ACCOUNT KEY [EXPIRY] (prints an account SAS, read+list)

BASE is the account's endpoint (http[s]://127.0.0.1:PORT/ACCOUNT).

    azure-tool.py tokens PORT_FILE LIFETIME TENANT CLIENT ASSERTION

serves two token endpoints on a free port (written to PORT_FILE): IMDS
(GET /metadata/identity/oauth2/token, Metadata: true, resource
https://storage.azure.com/) and Entra's (POST /TENANT/oauth2/v2.0/token,
client_credentials with the client assertion ASSERTION read from the
token file).  Each hands out a JWT that Azurite's OAuth check takes, valid
LIFETIME seconds; anything else gets 400.  GET /_stats answers
{"imds": N, "entra": M, "refused": R, "expired": E}; GET /_fail?count=N refuses the
next N token requests (a provider that fails for a while); GET
/_expired?count=N hands out the next N tokens already expired, said to
last an hour (a token the storage refuses before the client renews it).
"""
import base64
import datetime
import email.utils
import hashlib
import hmac
import http.client
import http.server
import json
import ssl
import sys
import threading
import time
import urllib.parse

VERSION = "2021-08-06"


def sign(account, key, method, path, query, headers, length=""):
    xms = sorted((k.lower(), v) for k, v in headers.items()
                 if k.lower().startswith("x-ms-"))
    canon = "".join("%s:%s\n" % kv for kv in xms)
    res = "/" + account + path
    for name, value in sorted(query.items()):
        res += "\n%s:%s" % (name, value)
    sts = "\n".join([method, "", "", length, "", headers.get(
        "Content-Type", ""), "", "", "", "", "", ""]) + "\n" + canon + res
    mac = hmac.new(base64.b64decode(key), sts.encode(), hashlib.sha256)
    return "SharedKey %s:%s" % (account, base64.b64encode(mac.digest()).decode())


class Client:
    def __init__(self, base, account, key):
        u = urllib.parse.urlsplit(base)
        if u.scheme == "https":  # the test's own certificate
            self.conn = http.client.HTTPSConnection(
                u.hostname, u.port, context=ssl._create_unverified_context())
        else:
            self.conn = http.client.HTTPConnection(u.hostname, u.port)
        self.root, self.account, self.key = u.path.rstrip("/"), account, key

    def do(self, method, path, query=None, body=b"", extra=None):
        query = query or {}
        path = self.root + urllib.parse.quote(path)
        headers = {"x-ms-date": email.utils.formatdate(usegmt=True),
                   "x-ms-version": VERSION}
        headers.update(extra or {})
        length = str(len(body)) if body else ""
        headers["Authorization"] = sign(self.account, self.key, method, path,
                                        query, headers, length)
        url = path + ("?" + urllib.parse.urlencode(query) if query else "")
        self.conn.request(method, url, body=body, headers=headers)
        r = self.conn.getresponse()
        data = r.read()
        if r.status >= 300 and not (r.status == 409 and method == "PUT"
                                    and "restype" in query):
            sys.exit("%s %s: %d %s" % (method, url, r.status, data[:300]))

    def container(self, name, public=False):
        self.do("PUT", "/" + name, {"restype": "container"},
                extra={"x-ms-blob-public-access": "container"} if public
                else None)

    def put(self, container, name, body):
        self.do("PUT", "/%s/%s" % (container, name), body=body,
                extra={"x-ms-blob-type": "BlockBlob"})


def account_sas(account, key, expiry):
    v = {"sv": "2019-12-12", "ss": "b", "srt": "sco", "sp": "rl",
         "se": expiry, "spr": "https,http"}
    sts = "\n".join([account, v["sp"], v["ss"], v["srt"], "", v["se"], "",
                     v["spr"], v["sv"], ""])
    mac = hmac.new(base64.b64decode(key), sts.encode(), hashlib.sha256)
    v["sig"] = base64.b64encode(mac.digest()).decode()
    return urllib.parse.urlencode(v)


def b64url(obj):
    raw = json.dumps(obj).encode()
    return base64.urlsafe_b64encode(raw).decode().rstrip("=")


def serve_tokens(port_file, lifetime, tenant, client, assertion_want):
    stats = {"imds": 0, "entra": 0, "refused": 0, "expired": 0}
    failing = [0]  # token requests still to refuse (GET /_fail?count=N)
    expired = [0]  # tokens still to hand out expired (/_expired?count=N)
    lock = threading.Lock()

    def token():
        """A token and the lifetime to say it has."""
        now = int(time.time())
        with lock:
            dead = expired[0] > 0
            expired[0] -= dead
            stats["expired"] += dead
        claims = {"aud": "https://storage.azure.com",
                  "iss": "https://sts.windows.net/%s/" % tenant,
                  "nbf": now - 60, "iat": now - (120 if dead else 0),
                  "exp": now - 60 if dead else now + lifetime}
        return ("%s.%s.c2ln" % (b64url({"alg": "RS256", "typ": "JWT"}),
                                b64url(claims)),
                3600 if dead else lifetime)

    class H(http.server.BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"

        def answer(self, code, obj):
            body = json.dumps(obj).encode()
            self.send_response(code)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def failing(self):
            with lock:
                if failing[0] > 0:
                    failing[0] -= 1
                    return True
            return False

        def refuse(self, why):
            with lock:
                stats["refused"] += 1
            self.answer(400, {"error": "invalid_request",
                              "error_description": why})

        def do_GET(self):
            u = urllib.parse.urlsplit(self.path)
            q = urllib.parse.parse_qs(u.query)
            if u.path == "/_stats":
                with lock:
                    return self.answer(200, stats)
            if u.path == "/_fail":
                with lock:
                    failing[0] = int(q["count"][0])
                return self.answer(200, {})
            if u.path == "/_expired":
                with lock:
                    expired[0] = int(q["count"][0])
                return self.answer(200, {})
            if self.failing():
                return self.refuse("told to fail")
            if u.path != "/metadata/identity/oauth2/token":
                return self.refuse("no such path")
            if self.headers.get("Metadata") != "true":
                return self.refuse("Metadata: true missing")
            if q.get("resource") != ["https://storage.azure.com/"]:
                return self.refuse("resource")
            with lock:
                stats["imds"] += 1
            tok, life = token()
            # IMDS writes its numbers as strings
            self.answer(200, {"access_token": tok,
                              "expires_in": str(life),
                              "resource": "https://storage.azure.com/",
                              "token_type": "Bearer"})

        def do_POST(self):
            n = int(self.headers.get("Content-Length", "0"))
            form = urllib.parse.parse_qs(self.rfile.read(n).decode())
            one = {k: v[0] for k, v in form.items()}
            if self.failing():
                return self.refuse("told to fail")
            if self.path != "/%s/oauth2/v2.0/token" % tenant:
                return self.refuse("no such tenant")
            if (one.get("grant_type") != "client_credentials"
                    or one.get("client_id") != client
                    or one.get("client_assertion") != assertion_want
                    or one.get("scope") != "https://storage.azure.com/.default"
                    or not one.get("client_assertion_type", "").endswith(
                        "jwt-bearer")):
                return self.refuse("bad grant")
            with lock:
                stats["entra"] += 1
            tok, life = token()
            self.answer(200, {"token_type": "Bearer", "expires_in": life,
                              "ext_expires_in": life,
                              "access_token": tok})

        def log_message(self, *args):
            pass

    srv = http.server.ThreadingHTTPServer(("127.0.0.1", 0), H)
    with open(port_file + ".tmp", "w") as f:
        f.write("%d\n" % srv.server_address[1])
    import os
    os.rename(port_file + ".tmp", port_file)
    srv.serve_forever()


def main():
    cmd, a = sys.argv[1], sys.argv[2:]
    if cmd == "sas":
        print(account_sas(a[0], a[1], a[2] if len(a) > 2
                          else "2099-01-01T00:00:00Z"))
    elif cmd == "tokens":
        serve_tokens(a[0], int(a[1]), a[2], a[3], a[4])
    else:
        c = Client(a[0], a[1], a[2])
        c.container(a[3], cmd == "public")
        if cmd in ("put", "public"):
            with open(a[5], "rb") as f:
                c.put(a[3], a[4], f.read())
        elif cmd == "many":
            for i in range(int(a[5])):
                c.put(a[3], "%s%05d" % (a[4], i), b"%d\n" % i)


if __name__ == "__main__":
    main()
