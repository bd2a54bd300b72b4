#!/usr/bin/env python3
"""A group's etcd locked down (master/group.c, "etcd's TLS and
authentication"; README, "Locking etcd down"): a group of one master on
loopback, its etcd member first with authentication enabled, then with
client-certificate TLS.

Authentication: etcd gets a root user and a "sweepfs" user whose role may
read and write only the group's prefix, then auth is enabled (through
etcd's JSON gateway, as etcdctl would). Then:

- a password file others may read: the master refuses to start, and says
  so (stderr is its log here);
- a wrong password: the master refuses to start with etcd's reason;
- the right one: it leads and serves (status, members added and removed)
  for longer than its prune period, with no permission refused by etcd;
- the sweepfs user's token is revoked under it (its password set again by
  root: etcd drops the user's simple tokens): it authenticates again and
  stays the leader;
- without a token etcd refuses a put of the membership key (and with the
  root token the same key reads back: the request is well formed);
- the user's password changed in etcd (not in the file): the leader's
  token goes, etcd refuses the old password, the lease cannot be renewed
  and the leader exits (status 75), with etcd's refusal in its log.

TLS (if openssl is there): a CA, a server certificate for 127.0.0.1 and
a client certificate made here; etcd with --client-cert-auth. A key file
others may read is refused; with etcd_cacert, etcd_cert and etcd_key the
master leads over https (endpoints without a scheme); a client without
a certificate cannot put the membership key.

Prints one JSON object; exit status 0 pass, 1 fail, 77 skip (no etcd)."""

import base64
import json
import os
import shutil
import ssl
import subprocess
import sys
import time
import urllib.error
import urllib.request

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "..", "..", "scripts"))
import swgroup  # noqa: E402

Fail = swgroup.Error
PREFIX = "/sweepfs/"
PASSWORD = "s3cret-for-sweepfs"
ROOT_PASSWORD = "r00t-pass"


def b64(s):
    return base64.b64encode(s.encode() if isinstance(s, str) else s).decode()


class Group(swgroup.Group):
    """One member; etcd started with extra arguments and a scheme."""

    def __init__(self, a):
        super().__init__(a.tmp, a.build, swgroup.loopback_members(1))
        self.m = self.members[1]
        self.scheme = "http"
        self.etcd_args = []

    @property
    def etcd_url(self):
        return "%s://%s:%d" % (self.scheme, self.m.host, self.m.etcd_client)

    def start_etcd(self, i):
        m = self.m
        d = self.path("etcd%d-%s" % (i, self.scheme))
        os.makedirs(d, exist_ok=True)
        argv = ["etcd", "--name", "e1", "--data-dir", d,
                "--listen-client-urls", self.etcd_url,
                "--advertise-client-urls", self.etcd_url,
                "--listen-peer-urls",
                "http://%s:%d" % (m.host, m.etcd_peer),
                "--initial-advertise-peer-urls",
                "http://%s:%d" % (m.host, m.etcd_peer),
                "--initial-cluster",
                "e1=http://%s:%d" % (m.host, m.etcd_peer),
                "--initial-cluster-state", "new", "--log-level", "warn"]
        self.etcd[i] = self._spawn(argv + self.etcd_args,
                                   self.path("etcd%d.log" % i))

    def stop_etcd(self):
        self.etcd[1].stop(10)

    def master_fails(self, sets, expect):
        """Start the master with @sets: it must exit non-zero within 30 s
        and its log (its stderr) say @expect."""
        self.master_set = sets
        log = self.path("m1.log")
        start = os.path.getsize(log) if os.path.exists(log) else 0
        self.start_master(1)
        st = self.master[1].wait(30)
        with open(log, errors="replace") as f:
            f.seek(start)
            text = f.read()
        if st is None:
            self.master[1].stop(10)
            raise Fail("the master started with %s" % sets)
        if st == 0 or expect not in text:
            raise Fail("the master with %s: status %s, no '%s' in: %s" %
                       (sets, st, expect, text[-2000:]))
        return st


def call(url, path, body, token=None, ctx=None, timeout=5):
    """POST @body (JSON) to etcd's gateway: (HTTP status, reply JSON)."""
    req = urllib.request.Request(url + path, json.dumps(body).encode(),
                                 {"Content-Type": "application/json"})
    if token:
        req.add_header("Authorization", token)
    try:
        with urllib.request.urlopen(req, timeout=timeout,
                                    context=ctx) as r:
            return r.status, json.loads(r.read() or b"{}")
    except urllib.error.HTTPError as e:
        try:
            return e.code, json.loads(e.read() or b"{}")
        except ValueError:
            return e.code, {}


def must(url, path, body, token=None, ctx=None):
    st, r = call(url, path, body, token, ctx)
    if st != 200:
        raise Fail("etcd %s: HTTP %d %s" % (path, st, r))
    return r


def wait_etcd(g, ctx=None):
    deadline = time.monotonic() + 30
    while True:
        try:
            call(g.etcd_url, "/v3/maintenance/status", {}, ctx=ctx,
                 timeout=1)
            return
        except (OSError, ValueError):
            if time.monotonic() > deadline:
                raise Fail("etcd does not answer at %s" % g.etcd_url)
            time.sleep(0.1)


def secure_etcd(url):
    """root, and sweepfs with read-write on PREFIX only; auth on."""
    must(url, "/v3/auth/user/add", {"name": "root",
                                    "password": ROOT_PASSWORD})
    must(url, "/v3/auth/role/add", {"name": "root"})
    must(url, "/v3/auth/user/grant", {"user": "root", "role": "root"})
    must(url, "/v3/auth/user/add", {"name": "sweepfs",
                                    "password": PASSWORD})
    must(url, "/v3/auth/role/add", {"name": "sweepfs"})
    end = PREFIX[:-1] + chr(ord(PREFIX[-1]) + 1)
    must(url, "/v3/auth/role/grant",
         {"name": "sweepfs", "perm": {"permType": "READWRITE",
                                      "key": b64(PREFIX),
                                      "range_end": b64(end)}})
    must(url, "/v3/auth/user/grant", {"user": "sweepfs", "role": "sweepfs"})
    must(url, "/v3/auth/enable", {})


def token(url, name, password):
    return must(url, "/v3/auth/authenticate",
                {"name": name, "password": password})["token"]


def secret(g, name, text, mode):
    p = g.path(name)
    with open(p, "w") as f:
        f.write(text)
    os.chmod(p, mode)
    return p


def refused_put(url, tok=None, ctx=None):
    """A put of the membership key: etcd's refusal, or Fail if taken."""
    body = {"key": b64(PREFIX + "members"), "value": b64("9=10.0.0.9:1")}
    try:
        st, r = call(url, "/v3/kv/put", body, tok, ctx)
    except OSError as e:   # TLS: no certificate, no connection
        return "refused: %s" % getattr(e, "reason", e)
    if st == 200:
        raise Fail("etcd took a put of the membership key without "
                   "credentials")
    return "HTTP %d: %s" % (st, r.get("error") or r.get("message"))


def change(g, n):
    """Changes the leader must put in etcd: member @n in and out of the
    membership (a transaction on the membership key each)."""
    g.tool("group", "add", "%d=127.0.0.1:%d" % (n, 9000 + n))
    g.tool("group", "remove", str(n))


def log_since(g, start):
    with open(g.path("m1.log"), errors="replace") as f:
        f.seek(start)
        return f.read()


def run_auth(g, r):
    g.start_etcd(1)
    wait_etcd(g)
    secure_etcd(g.etcd_url)
    user = "etcd_user=sweepfs"
    loose = secret(g, "loose.pw", PASSWORD + "\n", 0o644)
    wrong = secret(g, "wrong.pw", "not-the-password\n", 0o600)
    right = secret(g, "right.pw", PASSWORD + "\n", 0o600)

    r["loose_password_file"] = g.master_fails(
        [user, "etcd_password_file=" + loose], "is open to others")
    r["wrong_password"] = g.master_fails(
        [user, "etcd_password_file=" + wrong], "etcd refused user 'sweepfs'")
    r["no_user_for_password"] = g.master_fails(
        ["etcd_password_file=" + right], "go together")

    g.master_set = [user, "etcd_password_file=" + right]
    start = os.path.getsize(g.path("m1.log"))
    g.start_master(1)
    leader, _ = g.leader(60)
    if leader != 1:
        raise Fail("member %s leads, not 1" % leader)
    change(g, 2)
    # The leader prunes every 10 s (compaction, deleterange): past one.
    time.sleep(12)
    change(g, 3)
    text = log_since(g, start)
    for bad in ("permission denied", "HTTP 403", "refused user",
                "HTTP 401"):
        if bad in text:
            raise Fail("etcd refused the member something: '%s' in its "
                       "log" % bad)

    # Root sets the user's password again: etcd drops its tokens.
    root = token(g.etcd_url, "root", ROOT_PASSWORD)
    must(g.etcd_url, "/v3/auth/user/changepw",
         {"name": "sweepfs", "password": PASSWORD}, root)
    deadline = time.monotonic() + 15
    while "authenticating again" not in log_since(g, start):
        if time.monotonic() > deadline:
            raise Fail("the member did not authenticate again after its "
                       "token was revoked")
        time.sleep(0.1)
    change(g, 4)
    leader, _ = g.leader(10)
    if leader != 1 or g.master[1].poll() is not None:
        raise Fail("the member lost the leadership with its token")
    r["reauthenticated"] = True

    # The leader compacts etcd's history once it is 1000 revisions long
    # (not within this test): etcd 3.4 lets a user without root do so.
    mine = token(g.etcd_url, "sweepfs", PASSWORD)
    rev = int(must(g.etcd_url, "/v3/kv/range", {"key": b64(PREFIX)},
                   mine)["header"]["revision"])
    must(g.etcd_url, "/v3/kv/compaction", {"revision": str(rev - 1)}, mine)

    r["unauthenticated_put"] = refused_put(g.etcd_url)
    kv = must(g.etcd_url, "/v3/kv/range", {"key": b64(PREFIX + "members")},
              root)
    if not kv.get("kvs"):
        raise Fail("no membership key under %s" % PREFIX)

    # The password changed in etcd but not in the file: the member's
    # token goes, etcd refuses it, it cannot renew its lease and stops
    # leading (a leader deposed exits, status 75), saying why.
    must(g.etcd_url, "/v3/auth/user/changepw",
         {"name": "sweepfs", "password": "changed-elsewhere"}, root)
    st = g.master[1].wait(30)
    text = log_since(g, start)
    if st != 75 or "etcd refused user 'sweepfs'" not in text or \
            "no longer leading" not in text:
        raise Fail("a leader whose password etcd no longer takes: status "
                   "%s, log: %s" % (st, text[-1500:]))
    r["password_changed_exit"] = st
    g.stop_etcd()


def openssl(*args, cwd):
    subprocess.run(["openssl"] + list(args), cwd=cwd, check=True,
                   capture_output=True, timeout=60)


def make_certs(d):
    """ca.pem, server.pem/-key.pem (127.0.0.1), client.pem/-key.pem."""
    os.makedirs(d, exist_ok=True)
    openssl("req", "-x509", "-newkey", "rsa:2048", "-nodes", "-days", "2",
            "-subj", "/CN=sweepfs test CA", "-keyout", "ca-key.pem",
            "-out", "ca.pem", cwd=d)
    # etcd's JSON gateway dials etcd's own gRPC port with the server's
    # certificate: with --client-cert-auth it must be a client's too.
    for name, ext in (("server", "subjectAltName=IP:127.0.0.1\n"
                       "extendedKeyUsage=serverAuth,clientAuth\n"),
                      ("client", "extendedKeyUsage=clientAuth\n")):
        with open(os.path.join(d, name + ".ext"), "w") as f:
            f.write(ext)
        openssl("req", "-newkey", "rsa:2048", "-nodes", "-subj",
                "/CN=sweepfs-" + name, "-keyout", name + "-key.pem",
                "-out", name + ".csr", cwd=d)
        openssl("x509", "-req", "-in", name + ".csr", "-CA", "ca.pem",
                "-CAkey", "ca-key.pem", "-CAcreateserial", "-days", "2",
                "-extfile", name + ".ext", "-out", name + ".pem", cwd=d)
    for f in os.listdir(d):
        os.chmod(os.path.join(d, f), 0o600)


def run_tls(g, r):
    # A new member on a new etcd: a directory of its own.
    g.workdir = g.path("tls")
    d = g.path("pki")
    make_certs(d)
    pki = lambda f: os.path.join(d, f)  # noqa: E731
    g.scheme = "https"
    g.etcd_args = ["--cert-file", pki("server.pem"),
                   "--key-file", pki("server-key.pem"),
                   "--client-cert-auth", "--trusted-ca-file", pki("ca.pem")]
    g.start_etcd(1)
    ctx = ssl.create_default_context(cafile=pki("ca.pem"))
    ctx.load_cert_chain(pki("client.pem"), pki("client-key.pem"))
    wait_etcd(g, ctx)
    tls = ["etcd_cacert=" + pki("ca.pem"), "etcd_cert=" + pki("client.pem")]
    loose = pki("loose-key.pem")
    shutil.copy(pki("client-key.pem"), loose)
    os.chmod(loose, 0o644)
    r["tls_loose_key"] = g.master_fails(tls + ["etcd_key=" + loose],
                                        "is open to others")
    # A CA that did not sign etcd's certificate: the member says why it
    # stays out.
    other = g.path("other")
    make_certs(other)
    g.master_set = ["etcd_cacert=" + os.path.join(other, "ca.pem")] + \
        tls[1:] + ["etcd_key=" + pki("client-key.pem")]
    start = os.path.getsize(g.path("m1.log")) \
        if os.path.exists(g.path("m1.log")) else 0
    g.start_master(1)
    deadline = time.monotonic() + 15
    while "certificate" not in log_since(g, start).split("following;")[-1]:
        if time.monotonic() > deadline:
            raise Fail("no word of etcd's certificate from a member given "
                       "another CA")
        time.sleep(0.1)
    p = g.tool("status", "--json", check=False)
    if p.returncode == 0 and json.loads(p.stdout).get("role") == "leader":
        raise Fail("a member that cannot trust etcd leads")
    g.master[1].stop(20)
    g.master_set = tls + ["etcd_key=" + pki("client-key.pem")]
    g.start_master(1)
    leader, _ = g.leader(60)
    if leader != 1:
        raise Fail("member %s leads over TLS, not 1" % leader)
    change(g, 5)
    nocert = ssl.create_default_context(cafile=pki("ca.pem"))
    r["tls_put_without_certificate"] = refused_put(g.etcd_url, ctx=nocert)


def run(g, r):
    run_auth(g, r)
    if shutil.which("openssl"):
        run_tls(g, r)
    else:
        r["tls"] = "skipped: no openssl"


if __name__ == "__main__":
    sys.exit(swgroup.scenario(Group, run))
