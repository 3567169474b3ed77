#!/usr/bin/python3
"""The network path between kube-apiserver and the simulated nodes' kubelet port (tests/cluster).

kube-apiserver reaches a node's kubelet at the node's InternalIP (127.B.x.y, a loopback address of
its own per node) and status.daemonEndpoints.kubeletEndpoint.Port. kwok serves the kubelet API for
every node, but from one listener: on 127.0.0.1 it would never see connections to 127.B.x.y, and on
0.0.0.0 it would also listen on the machine's external interfaces. This relay listens on exactly the
nodes' loopback addresses and passes the bytes of each connection, unread, to kwok on 127.0.0.1:
TLS runs end to end between the real apiserver and the real kwok (it is what an iptables DNAT rule
would do, on machines without iptables).

It also does what a kubelet does when a container stops and kwok cannot: end the log streams of a
node (`close ADDR`), since kwok's CRI stub reports every container as running, so a follow never
ends on its own.

    kubelet_relay.py --port P --target 127.0.0.1:Q --control DIR/kubelet-relay.sock

Control socket (one command per connection, one answer line):
    listen ADDR...   listen on ADDR:P for each address (idempotent)  -> "ok N" (addresses listened on)
    close ADDR       close every open connection accepted on ADDR    -> "closed N"
    ping                                                              -> "pong"
"""
import argparse
import asyncio
import contextlib
import os
import signal
import sys

BUF = 64 * 1024


class Relay:
    def __init__(self, port, target_host, target_port):
        self.port = port
        self.target = (target_host, target_port)
        self.servers = {}     # address -> asyncio server
        self.conns = {}       # address -> set of (client writer, upstream writer)

    async def listen(self, addrs):
        for a in addrs:
            if a not in self.servers:
                self.servers[a] = await asyncio.start_server(
                    lambda r, w, a=a: self.handle(a, r, w), a, self.port, reuse_address=True)
        return len(self.servers)

    async def handle(self, addr, reader, writer):
        try:
            up_r, up_w = await asyncio.open_connection(*self.target)
        except OSError:
            writer.close()
            return
        pair = (writer, up_w)
        self.conns.setdefault(addr, set()).add(pair)
        try:
            await asyncio.gather(self.pump(reader, up_w), self.pump(up_r, writer))
        finally:
            self.conns.get(addr, set()).discard(pair)
            for w in pair:
                w.close()

    @staticmethod
    async def pump(reader, writer):
        try:
            while True:
                data = await reader.read(BUF)
                if not data:
                    break
                writer.write(data)
                await writer.drain()
        except (OSError, asyncio.IncompleteReadError):
            pass
        finally:
            # Half-close first (the peer may still be sending), then the pair's finally closes both.
            with contextlib.suppress(OSError, RuntimeError):
                if writer.can_write_eof():
                    writer.write_eof()

    def close(self, addr):
        pairs = self.conns.pop(addr, set())
        for pair in pairs:
            for w in pair:
                w.close()
        return len(pairs)

    async def control(self, reader, writer):
        try:
            words = (await reader.readline()).decode(errors="replace").split()
            if words and words[0] == "listen":
                answer = "ok %d" % await self.listen(words[1:])
            elif words[:1] == ["close"] and len(words) == 2:
                answer = "closed %d" % self.close(words[1])
            elif words == ["ping"]:
                answer = "pong"
            else:
                answer = "error: unknown command %r" % " ".join(words)
        except OSError as e:
            answer = "error: %s" % e
        writer.write((answer + "\n").encode())
        with contextlib.suppress(OSError):
            await writer.drain()
        writer.close()


async def main_async(a):
    host, _, port = a.target.rpartition(":")
    relay = Relay(a.port, host, int(port))
    with contextlib.suppress(FileNotFoundError):
        os.unlink(a.control)
    old = os.umask(0o077)   # the control socket is for this cluster's owner only
    try:
        ctl = await asyncio.start_unix_server(relay.control, a.control)
    finally:
        os.umask(old)
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for s in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(s, stop.set)
    print("kubelet relay: control %s, port %d -> %s" % (a.control, a.port, a.target), flush=True)
    await stop.wait()
    ctl.close()
    for s in relay.servers.values():
        s.close()
    with contextlib.suppress(FileNotFoundError):
        os.unlink(a.control)


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--port", type=int, required=True, help="the nodes' kubelet port")
    ap.add_argument("--target", required=True, help="kwok's HOST:PORT")
    ap.add_argument("--control", required=True, help="path of the control socket")
    asyncio.run(main_async(ap.parse_args(argv)))
    return 0


if __name__ == "__main__":
    sys.exit(main())
