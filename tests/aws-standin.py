#!/usr/bin/python3
"""Stand-ins for the cloud's credential services, for test-creds.

    aws-standin.py PORT DATADIR LIFETIME_S [imds-v1-only]

One server plays, each under its own path:
  IMDS         PUT /latest/api/token, GET /latest/meta-data/iam/
               security-credentials/[ROLE] (with imds-v1-only: the PUT is
               refused and the GETs answer without a token, as an old
               metadata server or proxy does)
  container    GET /container/creds, Authorization: container-auth
  STS          POST /sts/: AssumeRoleWithWebIdentity (WebIdentityToken
               web-identity-token) and AssumeRole (SigV4-signed with the
               source keys AKIDSOURCE / sourcesecret)
  GCS STS      POST /gcs/token (subject token gcs-subject), POST
               /gcs/impersonate (Bearer of an exchanged token); GET
               /gcs/subject (Metadata: yes) gives the subject token as JSON
  S3           GET/HEAD /bucket/KEY and ListObjectsV2 on /bucket, the
               files under DATADIR: every request SigV4-signed with keys
               this server handed out (or the source keys), a session token
               that goes with them, and not expired: an expired one gets
               400 ExpiredToken, as S3 answers it
Every credential handed out expires LIFETIME_S seconds later.

Control, unsigned: GET /_standin/stats answers the counters as JSON;
GET /_standin/revoke makes every credential handed out so far expired;
GET /_standin/fail?count=N makes the next N requests for credentials
(IMDS, container, STS) fail with 500.
"""
import datetime
import hashlib
import hmac
import http.server
import json
import os
import sys
import threading
import urllib.parse

PORT, DATA, LIFETIME = int(sys.argv[1]), sys.argv[2], int(sys.argv[3])
V1_ONLY = len(sys.argv) > 4 and sys.argv[4] == "imds-v1-only"
SOURCE = ("AKIDSOURCE", "sourcesecret")
LOCK = threading.Lock()
KEYS = {}  # access key -> [secret, token, expires (epoch s)]
COUNTS = {"issued": 0, "expired_refused": 0, "denied": 0, "s3_ok": 0,
          "imds_token": 0, "imds_v1_gets": 0, "web_identity": 0,
          "assume_role": 0, "container": 0, "gcs_sts": 0,
          "gcs_impersonate": 0, "imds": 0}
GCS_TOKENS = {}  # token -> expires
serial = [0]
fail_left = [0]


def now():
    return datetime.datetime.now(datetime.timezone.utc).timestamp()


def iso(t):
    return datetime.datetime.fromtimestamp(
        t, datetime.timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ")


def issue(what):
    with LOCK:
        serial[0] += 1
        n = serial[0]
        key = "ASIASTANDIN%06d" % n
        KEYS[key] = ["secret/%d+x" % n, "token-%d-%s" % (n, "z" * 600),
                     now() + LIFETIME]
        COUNTS["issued"] += 1
        COUNTS[what] += 1
        return key, KEYS[key]


def enc(s, safe):
    return urllib.parse.quote(s, safe=safe)


def hm(key, msg):
    return hmac.new(key, msg.encode(), hashlib.sha256).digest()


def check_sigv4(method, target, headers, body):
    """None when the request is signed by a good key, else (status, code)."""
    auth = headers.get("authorization", "")
    if not auth.startswith("AWS4-HMAC-SHA256 "):
        return 403, "AccessDenied"
    fields = dict(p.strip().split("=", 1)
                  for p in auth[len("AWS4-HMAC-SHA256 "):].split(","))
    key, date, region, service, _ = fields["Credential"].split("/")
    with LOCK:
        known = KEYS.get(key)
    if key == SOURCE[0]:
        secret, token, expires = SOURCE[1], "", None
    elif known:
        secret, token, expires = known
    else:
        return 403, "InvalidAccessKeyId"
    signed = fields["SignedHeaders"].split(";")
    path, _, query = target.partition("?")
    pairs = sorted((enc(k, "-_.~"), enc(v, "-_.~")) for k, v in
                   urllib.parse.parse_qsl(query, keep_blank_values=True))
    creq = "\n".join([
        method, enc(urllib.parse.unquote(path), "/-_.~"),
        "&".join(k + "=" + v for k, v in pairs),
        "".join(h + ":" + " ".join(headers.get(h, "").split()) + "\n"
                for h in signed),
        ";".join(signed),
        headers.get("x-amz-content-sha256") or
        hashlib.sha256(body or b"").hexdigest()])
    sts = "\n".join(["AWS4-HMAC-SHA256", headers.get("x-amz-date", ""),
                     "/".join([date, region, service, "aws4_request"]),
                     hashlib.sha256(creq.encode()).hexdigest()])
    k = hm(("AWS4" + secret).encode(), date)
    for part in (region, service, "aws4_request"):
        k = hm(k, part)
    want = hmac.new(k, sts.encode(), hashlib.sha256).hexdigest()
    if not hmac.compare_digest(want, fields["Signature"]):
        return 403, "SignatureDoesNotMatch"
    if headers.get("x-amz-security-token", "") != token:
        return 403, "InvalidToken"
    if expires is not None and now() >= expires:
        return 400, "ExpiredToken"
    return None


class Handler(http.server.BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"

    def log_message(self, fmt, *args):
        pass

    def answer(self, status, body=b"", ctype="text/plain", extra=()):
        if isinstance(body, str):
            body = body.encode()
        self.send_response(status)
        self.send_header("Content-Type", ctype)
        self.send_header("Content-Length", str(len(body)))
        for k, v in extra:
            self.send_header(k, v)
        self.end_headers()
        if self.command != "HEAD":
            self.wfile.write(body)

    def error(self, status, code):
        with LOCK:
            COUNTS["expired_refused" if code == "ExpiredToken"
                   else "denied"] += 1
        self.answer(status, "<?xml version=\"1.0\"?>\n<Error><Code>" + code +
                    "</Code><Message>refused</Message></Error>",
                    "application/xml")

    def json_creds(self, what, process_style=False):
        key, (secret, token, expires) = issue(what)
        return json.dumps({"Code": "Success", "Type": "AWS-HMAC",
                           "AccessKeyId": key, "SecretAccessKey": secret,
                           "Token": token, "Expiration": iso(expires)})

    # ---- IMDS
    def imds(self):
        lower = {k.lower(): v for k, v in self.headers.items()}
        if self.command == "PUT":
            if V1_ONLY:
                return self.answer(403, "Forbidden")
            if "x-aws-ec2-metadata-token-ttl-seconds" not in lower:
                return self.answer(400, "no ttl")
            with LOCK:
                COUNTS["imds_token"] += 1
            return self.answer(200, "imds-session-token")
        if V1_ONLY:
            with LOCK:
                COUNTS["imds_v1_gets"] += 1
        elif lower.get("x-aws-ec2-metadata-token") != "imds-session-token":
            with LOCK:
                COUNTS["imds_v1_gets"] += 1
            return self.answer(401, "Unauthorized")
        rest = self.path[len("/latest/meta-data/iam/security-credentials/"):]
        if rest == "":
            return self.answer(200, "standin-role\n")
        if rest == "standin-role":
            return self.answer(200, self.json_creds("imds"),
                               "application/json")
        return self.answer(404, "no such role")

    # ---- STS
    def sts(self, body):
        form = dict(urllib.parse.parse_qsl(body.decode()))
        action = form.get("Action")
        lower = {k.lower(): v for k, v in self.headers.items()}
        if action == "AssumeRoleWithWebIdentity":
            if form.get("WebIdentityToken") != "web-identity-token" or \
                    not form.get("RoleArn") or not form.get(
                        "RoleSessionName"):
                return self.answer(403, "<ErrorResponse/>")
            what = "web_identity"
        elif action == "AssumeRole":
            bad = check_sigv4("POST", self.path, lower, body)
            if bad or not form.get("RoleArn"):
                return self.answer(403, "<ErrorResponse/>")
            what = "assume_role"
        else:
            return self.answer(400, "<ErrorResponse/>")
        key, (secret, token, expires) = issue(what)
        doc = ("<%sResponse xmlns=\"https://sts.amazonaws.com/doc/"
               "2011-06-15/\"><%sResult><Credentials>"
               "<AccessKeyId>%s</AccessKeyId>"
               "<SecretAccessKey>%s</SecretAccessKey>"
               "<SessionToken>%s</SessionToken>"
               "<Expiration>%s</Expiration></Credentials>"
               "<AssumedRoleUser><Arn>arn:aws:sts::1:assumed-role/r/s</Arn>"
               "</AssumedRoleUser></%sResult></%sResponse>") % (
                   action, action, key, secret, token, iso(expires),
                   action, action)
        self.answer(200, doc, "text/xml")

    # ---- GCS workload identity federation
    def gcs(self, body):
        if self.path == "/gcs/subject":
            if self.headers.get("Metadata") != "yes":
                return self.answer(403, "{}")
            return self.answer(200, json.dumps({"id_token": "gcs-subject"}),
                               "application/json")
        if self.path == "/gcs/token":
            form = dict(urllib.parse.parse_qsl(body.decode()))
            if form.get("subject_token") != "gcs-subject" or \
                    form.get("grant_type") != ("urn:ietf:params:oauth:"
                                               "grant-type:token-exchange") \
                    or not form.get("audience"):
                return self.answer(400, json.dumps(
                    {"error": "invalid_grant"}), "application/json")
            with LOCK:
                COUNTS["gcs_sts"] += 1
                tok = "gcs-sts-%d" % COUNTS["gcs_sts"]
                GCS_TOKENS[tok] = now() + LIFETIME
            return self.answer(200, json.dumps({
                "access_token": tok, "expires_in": LIFETIME,
                "token_type": "Bearer", "issued_token_type":
                "urn:ietf:params:oauth:token-type:access_token"}),
                "application/json")
        if self.path == "/gcs/impersonate":
            tok = self.headers.get("Authorization", "")[len("Bearer "):]
            with LOCK:
                ok = GCS_TOKENS.get(tok, 0) > now()
                COUNTS["gcs_impersonate"] += ok
                n = COUNTS["gcs_impersonate"]
            if not ok or "scope" not in json.loads(body or b"{}"):
                return self.answer(401, "{}", "application/json")
            return self.answer(200, json.dumps({
                "accessToken": "gcs-sa-%d" % n,
                "expireTime": iso(now() + LIFETIME)}), "application/json")
        return self.answer(404, "")

    # ---- S3
    def s3(self, body):
        lower = {k.lower(): v for k, v in self.headers.items()}
        bad = check_sigv4(self.command, self.path, lower, body)
        if bad:
            return self.error(*bad)
        u = urllib.parse.urlsplit(self.path)
        key = urllib.parse.unquote(u.path[len("/bucket"):].lstrip("/"))
        q = dict(urllib.parse.parse_qsl(u.query, keep_blank_values=True))
        with LOCK:
            COUNTS["s3_ok"] += 1
        if not key:
            return self.listing(q.get("prefix", ""), int(q.get("max-keys",
                                                               1000)))
        path = os.path.join(DATA, key)
        if not os.path.isfile(path):
            return self.error(404, "NoSuchKey")
        data = open(path, "rb").read()
        etag = '"%s"' % hashlib.md5(data).hexdigest()
        if lower.get("if-match") not in (None, etag):
            return self.error(412, "PreconditionFailed")
        rng = lower.get("range")
        extra = [("ETag", etag)]
        if rng and rng.startswith("bytes="):
            a, b = rng[6:].split("-")
            a, b = int(a), min(int(b), len(data) - 1)
            extra.append(("Content-Range",
                          "bytes %d-%d/%d" % (a, b, len(data))))
            return self.answer(206, data[a:b + 1],
                               "application/octet-stream", extra)
        self.answer(200, data, "application/octet-stream", extra)

    def listing(self, prefix, max_keys):
        files, dirs = [], set()
        for root, _, names in os.walk(DATA):
            for n in names:
                k = os.path.relpath(os.path.join(root, n), DATA)
                if not k.startswith(prefix):
                    continue
                rest = k[len(prefix):]
                if "/" in rest:
                    dirs.add(prefix + rest.split("/")[0] + "/")
                else:
                    files.append(k)
        out = ["<?xml version=\"1.0\"?><ListBucketResult>"
               "<IsTruncated>false</IsTruncated>"]
        for k in sorted(files)[:max_keys]:
            data = open(os.path.join(DATA, k), "rb").read()
            out.append("<Contents><Key>%s</Key><Size>%d</Size><ETag>&quot;%s"
                       "&quot;</ETag></Contents>" % (
                           k, len(data), hashlib.md5(data).hexdigest()))
        for d in sorted(dirs):
            out.append("<CommonPrefixes><Prefix>%s</Prefix></CommonPrefixes>"
                       % d)
        out.append("</ListBucketResult>")
        self.answer(200, "".join(out), "application/xml")

    def handle_any(self):
        n = int(self.headers.get("Content-Length") or 0)
        body = self.rfile.read(n) if n else b""
        if self.path == "/_standin/stats":
            with LOCK:
                return self.answer(200, json.dumps(COUNTS),
                                   "application/json")
        if self.path.startswith("/_standin/fail?count="):
            with LOCK:
                fail_left[0] = int(self.path.split("=", 1)[1])
            return self.answer(200, "")
        if self.path.startswith(("/latest/meta-data/iam/security-credentials/",
                                 "/container/", "/sts/")):
            with LOCK:
                failing = fail_left[0] > 0
                fail_left[0] -= failing
            if failing:
                return self.answer(500, "failing on purpose")
        if self.path == "/_standin/revoke":
            with LOCK:
                for v in KEYS.values():
                    v[2] = 0
            return self.answer(200, "")
        if self.path.startswith("/latest/"):
            return self.imds()
        if self.path == "/container/creds":
            if self.headers.get("Authorization") != "container-auth":
                return self.answer(401, "{}", "application/json")
            return self.answer(200, self.json_creds("container"),
                               "application/json")
        if self.path.startswith("/sts/"):
            return self.sts(body)
        if self.path.startswith("/gcs/"):
            return self.gcs(body)
        if self.path.startswith("/bucket"):
            return self.s3(body)
        self.answer(404, "")

    do_GET = do_HEAD = do_PUT = do_POST = handle_any


http.server.ThreadingHTTPServer(("127.0.0.1", PORT),
                                Handler).serve_forever()
