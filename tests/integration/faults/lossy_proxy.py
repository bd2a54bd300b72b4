#!/usr/bin/env python3
"""A TCP relay between mounts and the master that loses a reply on demand,
for once.sh.

    lossy_proxy.py PORT MASTER_HOST:MASTER_PORT CTLDIR

Relays each connection made to 127.0.0.1:PORT to the master, reading the
frames both ways (proto/frame.h: a 16-byte big-endian header, len u32,
type u16, flags u16, id u64, then len bytes). Told by files in CTLDIR:

    arm       while it exists, the reply to the next request of a type
              that is not safe to repeat (`once` in proto/frame.c) is not
              passed on: the connection is closed instead, as a broken
              network would, after the master made the change. arm is
              removed, and "dropped" written with the request's type and
              id. When that request comes again, flagged SW_FRAME_AGAIN
              with the same id, "again" is written likewise.
    hold      while it exists, new connections are closed at once (the
              mount keeps trying), so that the master can be restarted
              before the request is sent again.

Prints "ready" once it listens; runs until killed.
"""
import os
import re
import socket
import sys
import threading

HDR = 16
FRAME_REPLY = 0x1
FRAME_AGAIN = 0x4
ONCE_NAMES = ("SETATTR", "MKNOD", "MKDIR", "CREATE", "UNLINK", "RMDIR",
              "RENAME", "LINK", "SYMLINK", "SETXATTR", "REMOVEXATTR")


def once_types():
    """The numbers of the once types, from proto/frame.h."""
    path = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..",
                        "..", "..", "proto", "frame.h")
    with open(path) as f:
        nums = dict(re.findall(r"\bSW_MSG_(\w+) = (\d+),", f.read()))
    return {int(nums[n]) for n in ONCE_NAMES}


ONCE = once_types()


def note(ctl, name, typ, rid):
    with open(os.path.join(ctl, name + ".tmp"), "w") as f:
        f.write("%d %d\n" % (typ, rid))
    os.rename(os.path.join(ctl, name + ".tmp"), os.path.join(ctl, name))


def frames(sock, on_frame):
    """Call on_frame(header, frame bytes) for each whole frame from sock,
    until it ends or on_frame returns False."""
    buf = b""
    while True:
        try:
            data = sock.recv(65536)
        except OSError:
            return
        if not data:
            return
        buf += data
        while len(buf) >= HDR:
            n = HDR + int.from_bytes(buf[0:4], "big")
            if len(buf) < n:
                break
            hdr = (int.from_bytes(buf[4:6], "big"),
                   int.from_bytes(buf[6:8], "big"),
                   int.from_bytes(buf[8:16], "big"))
            if not on_frame(hdr, buf[:n]):
                return
            buf = buf[n:]


class Relay:
    def __init__(self, client, master_addr, ctl):
        self.client = client
        self.master = socket.create_connection(master_addr)
        self.ctl = ctl
        self.once = set()  # ids of once requests, on this link
        self.lock = threading.Lock()

    def close(self):
        for s in (self.client, self.master):
            try:
                s.shutdown(socket.SHUT_RDWR)
            except OSError:
                pass

    def to_master(self, hdr, frame):
        typ, flags, rid = hdr
        if typ in ONCE:
            with self.lock:
                self.once.add(rid)
        if flags & FRAME_AGAIN:
            try:
                with open(os.path.join(self.ctl, "dropped")) as f:
                    if f.read().split() == [str(typ), str(rid)]:
                        note(self.ctl, "again", typ, rid)
            except OSError:
                pass
        self.master.sendall(frame)
        return True

    def to_client(self, hdr, frame):
        typ, flags, rid = hdr
        arm = os.path.join(self.ctl, "arm")
        with self.lock:
            lose = (flags & FRAME_REPLY and rid in self.once and
                    os.path.exists(arm))
            self.once.discard(rid)
        if lose:
            os.unlink(arm)
            note(self.ctl, "dropped", typ, rid)
            self.close()
            return False
        self.client.sendall(frame)
        return True

    def run(self):
        up = threading.Thread(target=self.pump_up, daemon=True)
        up.start()
        try:
            frames(self.master, self.to_client)
        except OSError:
            pass
        self.close()
        up.join()
        self.client.close()
        self.master.close()

    def pump_up(self):
        try:
            frames(self.client, self.to_master)
        except OSError:
            pass
        self.close()


def main():
    port = int(sys.argv[1])
    host, mport = sys.argv[2].rsplit(":", 1)
    ctl = sys.argv[3]
    lsock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    lsock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    lsock.bind(("127.0.0.1", port))
    lsock.listen(16)
    print("ready", flush=True)
    while True:
        client, _ = lsock.accept()
        if os.path.exists(os.path.join(ctl, "hold")):
            client.close()
            continue
        try:
            relay = Relay(client, (host, int(mport)), ctl)
        except OSError:
            client.close()
            continue
        threading.Thread(target=relay.run, daemon=True).start()


if __name__ == "__main__":
    main()
