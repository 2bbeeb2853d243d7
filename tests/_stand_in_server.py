"""The stand-in internet's services, run inside the test's own network namespace
(`_stand_in_internet.py`): an HTTP server on port 80 of every address there, answering
`hello from <address>` and logging each connection's destination address to LOG, and a DNS
server on port 53 answering the test's names. Never reached from outside this machine.

Usage: python _stand_in_server.py LOG NAME=ADDRESS ...
"""

from __future__ import annotations

import contextlib
import socket
import socketserver
import sys
import threading

import dns.message
import dns.rcode
import dns.rrset

LOG = sys.argv[1]
NAMES = dict(arg.split("=", 1) for arg in sys.argv[2:])
_lock = threading.Lock()
HEAD_LINES = 100  # at most, of a request's head


class Http(socketserver.StreamRequestHandler):
    def handle(self) -> None:
        address = self.request.getsockname()[0]
        with _lock, open(LOG, "a") as log:
            log.write(f"{address}\n")
        self.request.settimeout(5)
        # The whole head, not its first line: a socket closed with bytes unread sends a reset,
        # not an end, and the reset can reach the client (through pasta or the proxy, which may
        # pass the head on in parts) before it has read the answer.
        with contextlib.suppress(OSError):
            for _ in range(HEAD_LINES):
                if self.rfile.readline(8192).strip() == b"":
                    break
        body = f"hello from {address}\n".encode()
        self.wfile.write(b"HTTP/1.0 200 OK\r\nContent-Length: %d\r\n\r\n" % len(body) + body)


class Dns(socketserver.BaseRequestHandler):
    def handle(self) -> None:
        data, sock = self.request
        query = dns.message.from_wire(data)
        response = dns.message.make_response(query)
        question = query.question[0]
        name = question.name.to_text(omit_final_dot=True).lower()
        if name not in NAMES:
            response.set_rcode(dns.rcode.NXDOMAIN)
        elif question.rdtype == 1:  # A
            response.answer.append(dns.rrset.from_text(question.name, 30, "IN", "A", NAMES[name]))
        sock.sendto(response.to_wire(), self.client_address)


class ThreadingTcp(socketserver.ThreadingTCPServer):
    allow_reuse_address = True
    daemon_threads = True


def main() -> None:
    http = ThreadingTcp(("0.0.0.0", 80), Http)
    resolver = socketserver.ThreadingUDPServer(("0.0.0.0", 53), Dns)
    threading.Thread(target=resolver.serve_forever, daemon=True).start()
    print("ready", flush=True)
    http.serve_forever()


if __name__ == "__main__":
    socket.setdefaulttimeout(10)
    main()
