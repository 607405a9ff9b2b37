"""A tiny local HTTP server answering from a script, recording every request: for retries and
failures the real server will not produce on demand (429 and 503 on cue, hangs)."""
from __future__ import annotations

import json
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any, Dict, List, Tuple

Answer = Tuple[int, Dict[str, str], Any]


class Stub:
    def __init__(self, answers: List[Answer], delay: float = 0.0, keep_alive: bool = False) -> None:
        self.answers = list(answers)
        self.delay = delay
        # keep_alive: HTTP/1.1, connections stay open unless close_after_answer is set.
        self.close_after_answer = False
        self.requests: List[Dict[str, Any]] = []
        stub = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1" if keep_alive else "HTTP/1.0"

            def _answer(self) -> None:
                length = int(self.headers.get("content-length") or 0)
                raw = self.rfile.read(length) if length else b""
                stub.requests.append({"port": self.client_address[1], "method": self.command, "path": self.path, "headers": {k.lower(): v for k, v in self.headers.items()}, "body": json.loads(raw) if raw else None})
                if stub.delay:
                    time.sleep(stub.delay)
                status, headers, body = stub.answers.pop(0) if len(stub.answers) > 1 else stub.answers[0]
                data = b"" if body is None else json.dumps(body).encode()
                self.send_response(status)
                for k, v in {"content-type": "application/json", "x-request-id": f"req-{len(stub.requests)}", **headers}.items():
                    self.send_header(k, v)
                self.send_header("content-length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)
                if stub.close_after_answer:
                    self.close_connection = True

            do_GET = do_POST = do_PATCH = do_DELETE = _answer

            def log_message(self, *args: Any) -> None:
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}"
        threading.Thread(target=self.server.serve_forever, daemon=True).start()

    def close(self) -> None:
        self.server.shutdown()
        self.server.server_close()


def closed_port_url() -> str:
    import socket

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    return f"http://127.0.0.1:{port}"
