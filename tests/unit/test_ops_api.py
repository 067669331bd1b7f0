"""flows.deploy.ops.api against a local HTTP server: Prefect's retryable answers (429/502/503) are retried, others are not."""
from __future__ import annotations

import http.server
import json
import threading
import urllib.error

import pytest

from flows.deploy import ops


@pytest.fixture
def server():
    """A server answering each POST from `answers` (status, Retry-After) in turn, then 200 with the body it read."""
    state = {"answers": [], "calls": 0}

    class Handler(http.server.BaseHTTPRequestHandler):
        def do_POST(self):  # noqa: N802 (http.server's name)
            body = self.rfile.read(int(self.headers["Content-Length"]))
            state["calls"] += 1
            code, after = state["answers"].pop(0) if state["answers"] else (200, None)
            self.send_response(code)
            if after is not None:
                self.send_header("Retry-After", after)
            self.end_headers()
            self.wfile.write(body if code == 200 else b'{"exception_message": "Service Unavailable"}')

        def log_message(self, *args):
            pass

    httpd = http.server.HTTPServer(("127.0.0.1", 0), Handler)
    threading.Thread(target=httpd.serve_forever, daemon=True).start()
    yield f"http://127.0.0.1:{httpd.server_address[1]}", state
    httpd.shutdown()


def test_a_locked_database_answer_is_retried_and_the_call_succeeds(server, monkeypatch):
    url, state = server
    slept = []
    monkeypatch.setattr(ops.time, "sleep", slept.append)
    state["answers"] = [(503, None), (429, "3"), (502, None)]
    assert ops.api(url, "/deployments/x/create_flow_run", {"parameters": {"a": 1}}) == {"parameters": {"a": 1}}
    assert state["calls"] == 4 and slept == [1.0, 3.0, 4.0]  # backoff 1, Retry-After 3, backoff 4


def test_other_errors_and_the_last_retry_raise(server, monkeypatch):
    url, state = server
    monkeypatch.setattr(ops.time, "sleep", lambda s: None)
    state["answers"] = [(409, None)]
    with pytest.raises(urllib.error.HTTPError, match="409"):
        ops.api(url, "/x", {})
    assert state["calls"] == 1
    state["answers"] = [(503, None)] * 3
    with pytest.raises(urllib.error.HTTPError, match="503"):
        ops.api(url, "/x", {}, retries=2)
    assert state["calls"] == 4
    assert json.loads(json.dumps(ops.api(url, "/x", {"ok": True}))) == {"ok": True}
