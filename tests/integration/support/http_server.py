#!/usr/bin/python3
"""A small HTTP/1.1 server the integration specs start on a loopback port.

Standard library only. Keep-alive works (HTTP/1.1, one thread per
connection), optionally over TLS. Paths (any method unless said):

  /echo             200, JSON {method, path, query, headers, body}; recorded.
                    With ?together=N it first waits (10 s at most) until N
                    requests have been in flight at once
  /status/NNN       status NNN, JSON {"status": NNN} (Location: /echo for 3xx);
                    each ?retry_after=V adds a header line "Retry-After: V"
  /never            reads the request, never answers (until the client or the
                    server goes away)
  /close-mid-body   Content-Length: 1000, then 10 bytes, then the connection closes
  /big?bytes=N[&chunked=1]
                    N bytes of 'x' in 64 KiB writes, Content-Length or chunked
  /slow?ms=N        200 {"slept_ms": N} after N ms
  /outage?ms=N      a dependency's outage: for N ms from the first request to
                    /outage, 503 (each ?retry_after=V adds "Retry-After: V"),
                    counted in /stats as refused; then like /echo (200, recorded)
  /headers?lines=N  200 with N header lines "X-Fill: " + 100 'x' (one name, many lines)
  /stats            JSON {connections, accepted, requests, in_flight, max_concurrent,
                    refused, outage_ms_left}
  /requests         GET: the recorded /echo requests in order; DELETE: clears them
  anything else     404 JSON

/stats and /requests are control paths: they are not counted in /stats, so a
spec reading the numbers does not change them.

Usage: http_server.py --port P [--tls CERT KEY] [--ready-file F] [--verbose]
"""

import argparse
import json
import os
import select
import signal
import socket
import ssl
import sys
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from urllib.parse import parse_qs, urlsplit

PIECE = 64 * 1024
CONTROL_PATHS = ("/stats", "/requests")
METHODS = ("GET", "HEAD", "POST", "PUT", "DELETE", "PATCH", "OPTIONS")


class State:
    """Counters and recorded requests shared by all handler threads."""

    def __init__(self):
        self.lock = threading.Lock()
        self.changed = threading.Condition(self.lock)  # in_flight went up
        self.stop = threading.Event()
        self.accepted = 0      # TCP connections accepted
        self.connections = 0   # connections that carried a counted request
        self.requests = 0      # counted requests (every path but the control ones)
        self.in_flight = 0
        self.max_concurrent = 0
        self.recorded = []
        self.outage_start = None  # monotonic time of the first /outage request
        self.outage_ms = 0
        self.refused = 0          # 503s /outage answered

    def snapshot(self):
        with self.lock:
            return {
                "connections": self.connections,
                "accepted": self.accepted,
                "requests": self.requests,
                "in_flight": self.in_flight,
                "max_concurrent": self.max_concurrent,
                "refused": self.refused,
                "outage_ms_left": self.outage_left_ms(),
            }

    def outage_left_ms(self):
        """What is left of /outage's outage (lock held): 0 once over or not begun."""
        if self.outage_start is None:
            return 0
        return max(0, int(self.outage_ms - (time.monotonic() - self.outage_start) * 1000))


class Server(ThreadingHTTPServer):
    daemon_threads = True
    allow_reuse_address = True
    # Many clients connect at once in the concurrency tests.
    request_queue_size = 1024

    def __init__(self, addr, tls_context, verbose):
        self.state = State()
        self.tls_context = tls_context
        self.verbose = verbose
        super().__init__(addr, Handler)

    def get_request(self):
        sock, addr = self.socket.accept()
        with self.state.lock:
            self.state.accepted += 1
        if self.tls_context is not None:
            # The handshake runs on the connection's own thread (first read),
            # so a client that stalls or fails it never blocks accept().
            sock = self.tls_context.wrap_socket(sock, server_side=True,
                                                do_handshake_on_connect=False)
        return sock, addr

    def handle_error(self, request, client_address):
        # Clients that vanish, fail TLS or reset are part of the tests.
        if self.verbose:
            super().handle_error(request, client_address)


class Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    server_version = "luastream-test-http"

    def setup(self):
        super().setup()
        self.counted_connection = False

    def log_message(self, fmt, *args):
        if self.server.verbose:
            sys.stderr.write("%s - %s\n" % (self.address_string(), fmt % args))

    # ---- reading -----------------------------------------------------------

    def read_body(self):
        if "chunked" in self.headers.get("Transfer-Encoding", "").lower():
            parts = []
            while True:
                line = self.rfile.readline(65537)
                if not line:
                    break
                size = int(line.split(b";", 1)[0].strip() or b"0", 16)
                if size == 0:
                    # trailers up to the empty line
                    while self.rfile.readline(65537) not in (b"\r\n", b"\n", b""):
                        pass
                    break
                parts.append(self.rfile.read(size))
                self.rfile.readline(3)  # CRLF after the chunk
            return b"".join(parts)
        length = int(self.headers.get("Content-Length") or 0)
        return self.rfile.read(length) if length > 0 else b""

    # ---- writing -----------------------------------------------------------

    def send_json(self, status, obj, extra=None):
        body = b"" if status in (204, 304) else json.dumps(obj).encode()
        self.send_response(status)
        for name, value in extra or []:  # (name, value) pairs: a name may come twice
            self.send_header(name, value)
        if status not in (204, 304):
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        if self.command != "HEAD":
            self.wfile.write(body)

    # ---- dispatch ----------------------------------------------------------

    def dispatch(self):
        state = self.server.state
        url = urlsplit(self.path)
        path = url.path
        query = {k: v[-1] for k, v in parse_qs(url.query).items()}
        body = self.read_body()
        counted = path not in CONTROL_PATHS
        if counted:
            with state.lock:
                state.requests += 1
                if not self.counted_connection:
                    self.counted_connection = True
                    state.connections += 1
                state.in_flight += 1
                state.max_concurrent = max(state.max_concurrent, state.in_flight)
                state.changed.notify_all()
        try:
            self.route(path, url.query, query, body)
        finally:
            if counted:
                with state.lock:
                    state.in_flight -= 1

    def route(self, path, raw_query, query, body):
        state = self.server.state
        if path == "/outage":
            with state.lock:
                if state.outage_start is None:
                    state.outage_start = time.monotonic()
                    state.outage_ms = int(query.get("ms", "0"))
                down = state.outage_left_ms() > 0
                if down:
                    state.refused += 1
            if down:
                extra = [("Retry-After", v) for v in parse_qs(raw_query).get("retry_after", [])]
                self.send_json(503, {"status": 503}, extra)
                return
        if path in ("/echo", "/outage"):
            if "together" in query:
                n = int(query["together"])
                with state.lock:
                    state.changed.wait_for(lambda: state.max_concurrent >= n, timeout=10)
            headers = {}
            for name, value in self.headers.items():
                name = name.lower()
                headers[name] = headers[name] + ", " + value if name in headers else value
            record = {
                "method": self.command, "path": path, "query": raw_query,
                "headers": headers, "body": body.decode("utf-8", "replace"),
            }
            with state.lock:
                state.recorded.append(record)
            self.send_json(200, record)
        elif path.startswith("/status/") and path[8:].isdigit() and 200 <= int(path[8:]) <= 599:
            status = int(path[8:])
            extra = [("Location", "/echo")] if 300 <= status < 400 else []
            extra += [("Retry-After", v) for v in parse_qs(raw_query).get("retry_after", [])]
            self.send_json(status, {"status": status}, extra)
        elif path == "/never":
            self.hold_open()
        elif path == "/close-mid-body":
            self.send_response(200)
            self.send_header("Content-Type", "text/plain")
            self.send_header("Content-Length", "1000")
            self.end_headers()
            self.wfile.write(b"x" * 10)
            self.close_connection = True
            try:
                self.connection.shutdown(socket.SHUT_RDWR)
            except OSError:
                pass
        elif path == "/big":
            self.send_big(int(query.get("bytes", "0")), query.get("chunked") == "1")
        elif path == "/headers":
            self.send_response(200)
            for _ in range(int(query.get("lines", "0"))):
                self.send_header("X-Fill", "x" * 100)
            self.send_header("Content-Length", "0")
            self.end_headers()
        elif path == "/slow":
            ms = int(query.get("ms", "0"))
            state.stop.wait(ms / 1000.0)
            self.send_json(200, {"slept_ms": ms})
        elif path == "/stats":
            self.send_json(200, state.snapshot())
        elif path == "/requests":
            with state.lock:
                if self.command == "DELETE":
                    state.recorded.clear()
                    listed = []
                else:
                    listed = list(state.recorded)
            # an empty Lua-friendly array either way
            self.send_json(200, listed)
        else:
            self.send_json(404, {"error": "not found", "path": path})

    def hold_open(self):
        """Waits without answering until the peer closes or the server stops."""
        self.close_connection = True
        conn = self.connection
        while not self.server.state.stop.is_set():
            try:
                readable, _, _ = select.select([conn], [], [], 0.2)
                if readable and not conn.recv(65536):
                    return
            except (OSError, ValueError, ssl.SSLError):
                return

    def send_big(self, n, chunked):
        self.send_response(200)
        self.send_header("Content-Type", "application/octet-stream")
        if chunked:
            self.send_header("Transfer-Encoding", "chunked")
        else:
            self.send_header("Content-Length", str(n))
        self.end_headers()
        if self.command == "HEAD":
            return
        piece = b"x" * PIECE
        left = n
        while left > 0:
            data = piece if left >= PIECE else piece[:left]
            if chunked:
                self.wfile.write(b"%x\r\n" % len(data) + data + b"\r\n")
            else:
                self.wfile.write(data)
            left -= len(data)
        if chunked:
            self.wfile.write(b"0\r\n\r\n")


for _method in METHODS:
    setattr(Handler, "do_" + _method, Handler.dispatch)


def main():
    ap = argparse.ArgumentParser(description="HTTP server for luastream's integration tests")
    ap.add_argument("--port", type=int, required=True)
    ap.add_argument("--tls", nargs=2, metavar=("CERT", "KEY"))
    ap.add_argument("--ready-file")
    ap.add_argument("--verbose", action="store_true")
    args = ap.parse_args()

    ctx = None
    if args.tls:
        ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
        ctx.load_cert_chain(args.tls[0], args.tls[1])

    try:
        server = Server(("127.0.0.1", args.port), ctx, args.verbose)
    except OSError as e:
        sys.stderr.write("http_server: cannot listen on 127.0.0.1:%d: %s\n" % (args.port, e.strerror or e))
        return 2

    def stop(_signum, _frame):
        server.state.stop.set()
        # shutdown() waits for serve_forever(), which runs on this thread.
        threading.Thread(target=server.shutdown, daemon=True).start()

    signal.signal(signal.SIGTERM, stop)
    signal.signal(signal.SIGINT, stop)

    if args.ready_file:
        tmp = args.ready_file + ".tmp"
        with open(tmp, "w") as f:
            f.write("ready\n")
        os.rename(tmp, args.ready_file)

    server.serve_forever(poll_interval=0.1)
    server.server_close()
    return 0


if __name__ == "__main__":
    sys.exit(main())
