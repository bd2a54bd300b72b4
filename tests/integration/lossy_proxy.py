#!/usr/bin/env python3
"""A TCP relay between mounts and the master that loses a reply on demand,
for once.sh.

    lossy_proxy.py PORT MASTER_HOST:MASTER_PORT CTLDIR

Relays each connection made to 127.0.0.1:PORT to the master, reading the
frames both ways (proto/frame.h: a 16-byte big-endian header, len u32,
type u16, flags u16, id u64, then len bytes). Told by files in CTLDIR:

    arm       while it exists, the reply to the next request flagged
              SW_FRAME_ONCE is not passed on: the connection is closed
              instead, as a broken network would, after the master made
              the change. arm is removed, and "dropped" written with the
              request's type and id.
    hold      while it exists, new connections are closed at once (the
              mount keeps trying), so that the master can be restarted
              before the request is sent again.

Prints "ready" once it listens; runs until killed.
"""
import os
import socket
import sys
import threading

HDR = 16
FRAME_REPLY = 0x1
FRAME_ONCE = 0x4


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
        self.once = set()  # ids of requests flagged once, on this link
        self.lock = threading.Lock()

    def close(self):
        for s in (self.client, self.master):
            try:
                s.shutdown(socket.SHUT_RDWR)
            except OSError:
                pass

    def to_master(self, hdr, frame):
        typ, flags, rid = hdr
        if flags & FRAME_ONCE:
            with self.lock:
                self.once.add(rid)
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
            with open(os.path.join(self.ctl, "dropped.tmp"), "w") as f:
                f.write("%d %d\n" % (typ, rid))
            os.rename(os.path.join(self.ctl, "dropped.tmp"),
                      os.path.join(self.ctl, "dropped"))
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
