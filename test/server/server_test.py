#!/usr/bin/env python3
"""stowage-server driven by real clients: Python's standard library (http.client) and curl.

Each test starts the server on 127.0.0.1 with a free port (--port 0, the port read from its first
line), talks to it, and stops it with SIGTERM (it must exit 0). Usage:

    server_test.py --server build/bin/stowage-server --models DIR [--run build/bin/stowage-run] TEST

TEST: basic, concurrent, bad_requests, disconnect, queue, shutdown, chat, embeddings, cli (the load test,
not in ctest, is scripts/server-load-test.py). Exit 0 on success, 77 when skipped (a model, curl or the
server binary absent), 1 on failure.
"""
import argparse
import http.client
import json
import os
import re
import shutil
import signal
import socket
import subprocess
import sys
import threading
import tempfile
import time

SKIP = 77
MODEL = "stories260K.gguf"
PROMPTS = [
    "Once upon a time",
    "The little dog",
    "Lily and Tom went to the park",
    "One day, a bird",
    "The sun was shining and",
    "Ben had a red ball",
    "In a small house there lived",
    "The cat was very hungry",
]


class Failure(Exception):
    pass


def check(cond, what):
    if not cond:
        raise Failure(what)


class Server:
    """A stowage-server process; its port is read from its 'listening on' line."""

    def __init__(self, binary, model, *args):
        self.proc = subprocess.Popen([binary, "-m", model, "--port", "0", *args], stdout=subprocess.PIPE,
                                     stderr=subprocess.PIPE, text=True)
        deadline = time.time() + 60
        line = ""
        while time.time() < deadline:
            line = self.proc.stdout.readline()
            if not line:
                break
            m = re.search(r"listening on http://([\d.]+):(\d+)", line)
            if m:
                self.host, self.port = m.group(1), int(m.group(2))
                return
        err = self.proc.stderr.read() if self.proc.poll() is not None else ""
        self.proc.kill()
        raise Failure("the server did not start: %r %s" % (line, err))

    def url(self, path):
        return "http://%s:%d%s" % (self.host, self.port, path)

    def stop(self, sig=signal.SIGTERM, timeout=15):
        """Sends `sig` and checks that the server exits 0 (graceful shutdown) in time."""
        self.proc.send_signal(sig)
        try:
            rc = self.proc.wait(timeout)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            raise Failure("the server did not stop within %d s of signal %d" % (timeout, sig))
        err = self.proc.stderr.read()
        check(rc == 0, "the server exited %d after signal %d: %s" % (rc, sig, err[-2000:]))

    def kill(self):
        if self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait()

    def __enter__(self):
        return self

    def __exit__(self, exc_type, exc, tb):
        """Stops the server (it must exit 0) after a test that passed; kills it after one that failed."""
        if exc_type is None and self.proc.poll() is None:
            self.stop()
        self.kill()
        return False


def request(srv, method, path, body=None, headers=None, raw=None, timeout=60):
    """(status, parsed JSON or text) of one request."""
    conn = http.client.HTTPConnection(srv.host, srv.port, timeout=timeout)
    data = raw if raw is not None else (json.dumps(body) if body is not None else None)
    h = {"Content-Type": "application/json"}
    h.update(headers or {})
    conn.request(method, path, body=data, headers=h)
    resp = conn.getresponse()
    text = resp.read().decode("utf-8")
    conn.close()
    ctype = resp.getheader("Content-Type", "")
    return resp.status, (json.loads(text) if ctype.startswith("application/json") else text)


def complete(srv, body, path="/v1/completions", headers=None):
    status, j = request(srv, "POST", path, body, headers)
    check(status == 200, "%s %s: HTTP %d %s" % (path, body, status, j))
    return j


def stream(srv, body, path="/v1/completions", headers=None, on_event=None):
    """Streams a completion; returns (text, finish_reason, events). `on_event(i, event)` may return
    False to hang up after event i (the connection is closed: a client that went away)."""
    conn = http.client.HTTPConnection(srv.host, srv.port, timeout=60)
    body = dict(body, stream=True)
    h = {"Content-Type": "application/json"}
    h.update(headers or {})
    conn.request("POST", path, body=json.dumps(body), headers=h)
    sock = conn.sock  # kept: hanging up closes it
    resp = conn.getresponse()
    if resp.status != 200:
        raise Failure("stream %s: HTTP %d %s" % (body, resp.status, resp.read()[:300]))
    check(resp.getheader("Content-Type", "").startswith("text/event-stream"), "not an event stream")
    text, finish, events, done = "", None, [], False
    while True:
        line = resp.readline()
        if not line:
            break
        line = line.decode("utf-8").rstrip("\n")
        if not line:
            continue
        check(line.startswith("data: "), "not an SSE data line: %r" % line)
        payload = line[len("data: "):]
        if payload == "[DONE]":
            done = True
            break
        ev = json.loads(payload)
        check("error" not in ev, "stream error: %s" % ev)
        events.append(ev)
        for c in ev["choices"]:
            if "delta" in c:
                text += c["delta"].get("content") or ""
            else:
                text += c["text"]
            finish = c["finish_reason"] or finish
        if on_event is not None and on_event(len(events) - 1, ev) is False:
            sock.shutdown(socket.SHUT_RDWR)
            sock.close()
            resp.close()
            return text, None, events
    conn.close()
    check(done, "the stream did not end with data: [DONE]")
    return text, finish, events


# llama-server's /metrics (server_context, llamacpp:*) and the counters only Stowage has.
LLAMACPP_METRICS = {"prompt_tokens_total", "prompt_seconds_total", "tokens_predicted_total",
                    "tokens_predicted_seconds_total", "n_decode_total", "n_busy_slots_per_decode",
                    "prompt_tokens_seconds", "predicted_tokens_seconds", "requests_processing", "requests_deferred"}
STOWAGE_METRICS = {"requests_total", "requests_cancelled_total"}


def metrics(srv):
    status, text = request(srv, "GET", "/metrics")
    check(status == 200, "/metrics: HTTP %d" % status)
    out = {}
    for line in text.splitlines():
        if line and not line.startswith("#"):
            name, value = line.split(" ")
            prefix, name = name.split(":", 1)
            # llama-server's metrics under its names (a dashboard for llama-server works), ours as stowage:*.
            expected = "stowage" if name in STOWAGE_METRICS else "llamacpp"
            check(prefix == expected, "/metrics: %s:%s, expected %s:%s" % (prefix, name, expected, name))
            out[name] = float(value)
    check(LLAMACPP_METRICS <= set(out), "/metrics lacks llama-server's %s" % (LLAMACPP_METRICS - set(out)))
    return out


def busy_slots(srv):
    status, slots = request(srv, "GET", "/slots")
    check(status == 200, "/slots: HTTP %d" % status)
    return sum(1 for s in slots if s["is_processing"])


def wait_for(cond, what, timeout=10):
    deadline = time.time() + timeout
    while time.time() < deadline:
        if cond():
            return
        time.sleep(0.02)
    raise Failure("timed out waiting for: " + what)


def greedy(prompt, n):
    return {"prompt": prompt, "max_tokens": n, "temperature": 0}


# --- tests ---------------------------------------------------------------------------------------

def test_basic(args, model):
    """Every endpoint once, through Python and curl; the greedy text equals stowage-run's."""
    with Server(args.server, model, "-c", "512") as srv:
        status, j = request(srv, "GET", "/health")
        check(status == 200 and j == {"status": "ok"}, "/health: %s" % j)
        status, j = request(srv, "GET", "/v1/models")
        check(status == 200 and j["object"] == "list" and j["data"][0]["id"] == MODEL, "/v1/models: %s" % j)
        j = complete(srv, dict(greedy(PROMPTS[0], 24), model=MODEL))
        check(j["object"] == "text_completion" and j["id"].startswith("cmpl-"), "shape: %s" % j)
        text = j["choices"][0]["text"]
        check(j["choices"][0]["finish_reason"] == "length", "finish_reason: %s" % j)
        check(j["usage"]["completion_tokens"] == 24 and j["usage"]["prompt_tokens"] == 5, "usage: %s" % j)
        stext, finish, events = stream(srv, greedy(PROMPTS[0], 24))
        check(stext == text and finish == "length", "streamed %r != %r (%s)" % (stext, text, finish))
        check(all(e["object"] == "text_completion" for e in events), "chunk objects")
        _, _, events = stream(srv, dict(greedy(PROMPTS[0], 24), stream_options={"include_usage": True}))
        check(events[-1]["choices"] == [] and events[-1]["usage"]["completion_tokens"] == 24, "usage chunk: %s" %
              events[-1])
        # A stop string: the text ends before it, finish_reason "stop".
        cut = text.index(" girl") if " girl" in text else len(text) // 2
        j = complete(srv, dict(greedy(PROMPTS[0], 24), stop=[text[cut:cut + 5]]))
        check(j["choices"][0]["text"] == text[:cut] and j["choices"][0]["finish_reason"] == "stop",
              "stop string: %s vs %r" % (j, text[:cut]))
        stext, finish, _ = stream(srv, dict(greedy(PROMPTS[0], 24), stop=[text[cut:cut + 5]]))
        check(stext == text[:cut] and finish == "stop", "streamed stop string: %r %s" % (stext, finish))
        # The same text as stowage-run (one sequence, same greedy sampler).
        if args.run and os.path.exists(args.run):
            out = subprocess.run([args.run, "-m", model, "-c", "512", "-p", PROMPTS[0], "-n", "24", "--temp", "0",
                                  "-q", "--no-display-prompt"], capture_output=True, text=True, timeout=60)
            check(out.returncode == 0 and out.stdout.rstrip("\n") == text,
                  "stowage-run printed %r, the server %r" % (out.stdout, text))
        m = metrics(srv)
        check(m["requests_total"] == 5 and m["tokens_predicted_total"] >= 24 * 2 and m["requests_processing"] == 0,
              "/metrics: %s" % m)
        check(m["prompt_tokens_total"] == 25 and m["n_decode_total"] > 0, "/metrics counts: %s" % m)
        # curl: the same non-streamed text, and an SSE stream ending with [DONE].
        if shutil.which("curl"):
            out = subprocess.run(["curl", "-sS", srv.url("/v1/completions"), "-H", "Content-Type: application/json",
                                  "-d", json.dumps(greedy(PROMPTS[0], 24))], capture_output=True, text=True,
                                 timeout=30)
            check(json.loads(out.stdout)["choices"][0]["text"] == text, "curl: %s" % out.stdout)
            out = subprocess.run(["curl", "-sSN", srv.url("/v1/completions"), "-d",
                                  json.dumps(dict(greedy(PROMPTS[0], 24), stream=True))], capture_output=True,
                                 text=True, timeout=30)
            lines = [l for l in out.stdout.split("\n\n") if l]
            check(lines[-1] == "data: [DONE]" and len(lines) == 24 + 2, "curl stream: %r" % out.stdout[-300:])
            # A body over httplib's 8 KiB form limit sent without a Content-Type (curl's form default), read
            # as JSON as llama-server reads it: the same text.
            with tempfile.NamedTemporaryFile("w", suffix=".json") as big:
                json.dump(dict(greedy(PROMPTS[0], 24), user="x" * 9000), big)
                big.flush()
                out = subprocess.run(["curl", "-sS", srv.url("/v1/completions"), "--data-binary", "@" + big.name],
                                     capture_output=True, text=True, timeout=30)
            check(json.loads(out.stdout).get("choices", [{}])[0].get("text") == text,
                  "curl --data-binary of 9 KiB: %s" % out.stdout[:300])
            out = subprocess.run(["curl", "-sS", "-o", "/dev/null", "-w", "%{http_code}", srv.url("/health")],
                                 capture_output=True, text=True, timeout=30)
            check(out.stdout == "200", "curl /health: %s" % out.stdout)
        else:
            print("note: curl not found, its checks skipped")


def test_concurrent(args, model):
    """8 streaming clients at once (4 slots: 4 run, 4 queue) get the texts each request gets alone."""
    # Products over several tokens in the orders over one (--llamacpp-numerics): the texts then stay
    # equal where a near tie of two tokens would otherwise flip (the default mode differs ~1e-2).
    with Server(args.server, model, "-c", "1024", "-np", "4", "--llamacpp-numerics") as srv:
        alone = [stream(srv, greedy(p, 40))[0] for p in PROMPTS]
        before = metrics(srv)
        check(len(set(alone)) == len(alone), "the prompts should give different texts")
        results = [None] * len(PROMPTS)
        errors = []

        go = threading.Barrier(len(PROMPTS))

        def client(i):
            try:
                go.wait(10)  # all at once
                results[i] = stream(srv, greedy(PROMPTS[i], 40))
            except Exception as e:  # reported below
                errors.append("client %d: %s" % (i, e))

        threads = [threading.Thread(target=client, args=(i,)) for i in range(len(PROMPTS))]
        for t in threads:
            t.start()
        for t in threads:
            t.join(60)
        check(not errors, "; ".join(errors))
        for i, (text, finish, _) in enumerate(results):
            check(text == alone[i], "client %d: %r alone, %r concurrently" % (i, alone[i], text))
            check(finish == "length", "client %d finish %s" % (i, finish))
        m = metrics(srv)
        busy_per_decode = (m["n_busy_slots_per_decode"] * m["n_decode_total"] - before["n_busy_slots_per_decode"] *
                           before["n_decode_total"]) / (m["n_decode_total"] - before["n_decode_total"])
        check(busy_per_decode > 1.2, "continuous batching: %.2f busy slots per decode" % busy_per_decode)
        check(m["requests_total"] == 16 and m["requests_processing"] == 0, "/metrics: %s" % m)


def test_bad_requests(args, model):
    """Each bad request gets a 4xx with an OpenAI-style JSON error, and the next good one works."""
    with Server(args.server, model, "-c", "256", "--api-key", "sekrit,other") as srv:
        auth = {"Authorization": "Bearer sekrit"}
        good = greedy(PROMPTS[0], 8)
        expected = complete(srv, good, headers=auth)["choices"][0]["text"]
        cases = [
            ("no API key", "POST", "/v1/completions", json.dumps(good), {}, 401, "authentication_error"),
            ("wrong API key", "POST", "/v1/completions", json.dumps(good), {"Authorization": "Bearer nope"}, 401,
             "authentication_error"),
            ("malformed JSON", "POST", "/v1/completions", '{"prompt": "Once', auth, 400, "invalid_request_error"),
            ("not an object", "POST", "/v1/completions", "[1, 2]", auth, 400, "invalid_request_error"),
            ("unknown model", "POST", "/v1/completions", json.dumps(dict(good, model="gpt-5")), auth, 404,
             "not_found_error"),
            ("over the context", "POST", "/v1/completions", json.dumps(dict(good, max_tokens=300)), auth, 400,
             "exceed_context_size_error"),
            ("prompt over the context", "POST", "/v1/completions",
             json.dumps({"prompt": "Once upon a time " * 80}), auth, 400, "exceed_context_size_error"),
            ("wrong type", "POST", "/v1/completions", json.dumps(dict(good, temperature="hot")), auth, 400,
             "invalid_request_error"),
            ("token id out of range", "POST", "/v1/completions", json.dumps({"prompt": [1, 99999]}), auth, 400,
             "invalid_request_error"),
            ("no prompt", "POST", "/v1/completions", json.dumps({"max_tokens": 3}), auth, 400,
             "invalid_request_error"),
            ("bad messages", "POST", "/v1/chat/completions", json.dumps({"messages": "hi"}), auth, 400,
             "invalid_request_error"),
            ("unknown path", "GET", "/v2/nothing", None, auth, 404, "not_found_error"),
            ("embeddings without --embeddings", "POST", "/v1/embeddings", json.dumps({"input": "x"}), auth, 501,
             "not_supported_error"),
            ("a body over 64 MiB", "POST", "/v1/completions", "x" * (65 << 20), auth, 413, "invalid_request_error"),
            ("a body over 64 MiB as a form", "POST", "/v1/completions", "x" * (65 << 20),
             dict(auth, **{"Content-Type": "application/x-www-form-urlencoded"}), 413, "invalid_request_error"),
            ("a multipart form", "POST", "/v1/completions",
             '--b\r\nContent-Disposition: form-data; name="prompt"\r\n\r\nOnce\r\n--b--\r\n',
             dict(auth, **{"Content-Type": "multipart/form-data; boundary=b"}), 415, "invalid_request_error"),
            ("several choices", "POST", "/v1/completions", json.dumps(dict(good, n=2)), auth, 501,
             "not_supported_error"),
            # What this server does not do is refused, not silently left out of the reply.
            ("log probabilities", "POST", "/v1/completions", json.dumps(dict(good, logprobs=True)), auth, 501,
             "not_supported_error"),
            ("top log probabilities", "POST", "/v1/chat/completions",
             json.dumps({"messages": [{"role": "user", "content": "x"}], "top_logprobs": 3}), auth, 501,
             "not_supported_error"),
            ("echo", "POST", "/v1/completions", json.dumps(dict(good, echo=True)), auth, 501, "not_supported_error"),
            ("tools", "POST", "/v1/chat/completions",
             json.dumps({"messages": [{"role": "user", "content": "x"}],
                         "tools": [{"type": "function", "function": {"name": "f"}}]}), auth, 501,
             "not_supported_error"),
            ("a JSON response format", "POST", "/v1/chat/completions",
             json.dumps({"messages": [{"role": "user", "content": "x"}], "response_format": {"type": "json_object"}}),
             auth, 501, "not_supported_error"),
            ("a response format that is not an object", "POST", "/v1/completions",
             json.dumps(dict(good, response_format="json")), auth, 400, "invalid_request_error"),
            ("a number out of double's range", "POST", "/v1/completions", '{"prompt": "x", "max_tokens": 1e400}',
             auth, 400, "invalid_request_error"),
            ("a content part's type a number", "POST", "/v1/chat/completions",
             json.dumps({"messages": [{"role": "user", "content": [{"type": 5, "text": "x"}]}]}), auth, 400,
             "invalid_request_error"),
            # Named in the error, never dumped (the dump recursed once per level: a stack overflow).
            ("a content part nested a million deep", "POST", "/v1/chat/completions",
             '{"messages": [{"role": "user", "content": [' + "[" * 1000000 + "]" * 1000000 + "]}]}", auth, 400,
             "invalid_request_error"),
        ]
        for what, method, path, raw, headers, code, etype in cases:
            status, j = request(srv, method, path, raw=raw, headers=headers)
            check(status == code, "%s: HTTP %d, expected %d: %s" % (what, status, code, j))
            check(isinstance(j, dict) and j["error"]["type"] == etype and j["error"]["code"] == code and
                  j["error"]["message"], "%s: error body %s" % (what, j))
            again = complete(srv, good, headers=auth)["choices"][0]["text"]
            check(again == expected, "after %s: %r != %r" % (what, again, expected))
        # The same fields asking for nothing are accepted.
        off = dict(good, logprobs=False, top_logprobs=0, echo=False, tools=[], logit_bias={}, suffix="",
                   response_format={"type": "text"})
        check(complete(srv, off, headers=auth)["choices"][0]["text"] == expected, "fields asking for nothing")
        # Public endpoints need no key.
        check(request(srv, "GET", "/health")[0] == 200, "/health needs no key")
        check(request(srv, "GET", "/v1/models")[0] == 200, "/v1/models needs no key")
        check(request(srv, "GET", "/metrics")[0] == 401, "/metrics needs the key")
        check(request(srv, "GET", "/metrics", headers={"Authorization": "Bearer other"})[0] == 200,
              "the second key of the list")


def test_disconnect(args, model):
    """A client that hangs up mid-stream frees its slot: with every slot busy, a 5th request then
    runs while the other streams go on."""
    with Server(args.server, model, "-c", "4096", "-np", "4") as srv:
        long_req = {"prompt": PROMPTS[1], "max_tokens": 900, "temperature": 0, "ignore_eos": True}
        started = threading.Barrier(5)
        hung_up = threading.Event()
        hang_up = threading.Event()
        finished = []

        def long_client(i):
            def on_event(k, ev):
                if k == 2:
                    started.wait(10)
                if i == 0 and k == 4:
                    hang_up.wait(10)  # once the test saw every slot busy
                    return False  # hang up
                return True
            text, finish, _ = stream(srv, long_req, on_event=on_event)
            if i == 0:
                hung_up.set()
            else:
                finished.append((time.time(), finish))

        threads = [threading.Thread(target=long_client, args=(i,)) for i in range(4)]
        for t in threads:
            t.start()
        started.wait(20)  # all four streams running: every slot busy
        check(busy_slots(srv) == 4, "4 slots busy")
        hang_up.set()
        hung_up.wait(10)
        wait_for(lambda: busy_slots(srv) == 3, "the hung-up client's slot to be free")
        check(metrics(srv)["requests_cancelled_total"] == 1, "one cancelled request")
        t0 = time.time()
        j = complete(srv, greedy(PROMPTS[2], 8))
        t1 = time.time()
        check(j["choices"][0]["finish_reason"] == "length", "the 5th request: %s" % j)
        check(not finished, "the 5th request should run while the 3 other streams go on (%s)" % finished)
        for t in threads:
            t.join(60)
        check(len(finished) == 3 and all(f == "length" for _, f in finished), "the other streams: %s" % finished)
        print("5th request: %.3f s while 3 streams ran; they ended %.2f s after it" %
              (t1 - t0, min(f for f, _ in finished) - t1))
        m = metrics(srv)
        check(m["requests_processing"] == 0 and m["tokens_predicted_total"] == 3 * 900 + 8, "/metrics: %s" % m)


def test_queue(args, model):
    """With every slot busy, requests wait in a FIFO queue (/metrics requests_deferred) and all end."""
    with Server(args.server, model, "-c", "2048", "-np", "2") as srv:
        req = {"prompt": PROMPTS[3], "max_tokens": 600, "temperature": 0, "ignore_eos": True}
        results, errors = {}, []
        seen = {"queued while full": 0, "processing": 0}

        def client(i):
            try:
                results[i] = stream(srv, req)
            except Exception as e:
                errors.append("client %d: %s" % (i, e))

        threads = [threading.Thread(target=client, args=(i,)) for i in range(4)]
        for t in threads:
            t.start()
        deadline = time.time() + 30
        while any(t.is_alive() for t in threads) and time.time() < deadline:
            m = metrics(srv)
            seen["processing"] = max(seen["processing"], m["requests_processing"])
            if m["requests_processing"] == 2:  # every slot busy: the others wait
                seen["queued while full"] = max(seen["queued while full"], m["requests_deferred"])
            time.sleep(0.02)
        for t in threads:
            t.join(30)
        check(not errors, "; ".join(errors))
        check(seen["queued while full"] >= 1 and seen["processing"] == 2, "queue seen in /metrics: %s" % seen)
        texts = {r[0] for r in results.values()}
        check(len(results) == 4 and len(texts) == 1, "4 equal texts: %d distinct" % len(texts))
        m = metrics(srv)
        check(m["requests_deferred"] == 0 and m["tokens_predicted_total"] == 4 * 600, "/metrics: %s" % m)


def test_shutdown(args, model):
    """SIGINT while a stream runs: the stream ends with an error event, the server exits 0."""
    with Server(args.server, model, "-c", "4096", "-np", "2") as srv:
        got = threading.Event()
        outcome = {}

        def client():
            conn = http.client.HTTPConnection(srv.host, srv.port, timeout=30)
            conn.request("POST", "/v1/completions", body=json.dumps(
                {"prompt": PROMPTS[0], "max_tokens": 4000, "ignore_eos": True, "stream": True}))
            resp = conn.getresponse()
            lines = []
            try:
                while True:
                    line = resp.readline()
                    if not line:
                        break
                    lines.append(line.decode())
                    got.set()
            except Exception as e:
                outcome["exception"] = str(e)
            outcome["last"] = [l for l in lines if l.strip()][-1:] if lines else []

        t = threading.Thread(target=client)
        t.start()
        check(got.wait(20), "the stream started")
        srv.stop(signal.SIGINT)
        t.join(20)
        last = outcome.get("last")
        check(last and '"unavailable_error"' in last[0], "the stream's last event: %s" % outcome)


def test_chat(args, model):
    """/v1/chat/completions with the template named by --chat-template: chatml text, streamed and not."""
    with Server(args.server, model, "-c", "512", "--chat-template", "chatml") as srv:
        msgs = [{"role": "system", "content": "You tell stories."}, {"role": "user", "content": "A story please"}]
        body = {"messages": msgs, "max_tokens": 16, "temperature": 0}
        j = complete(srv, body, path="/v1/chat/completions")
        check(j["object"] == "chat.completion" and j["id"].startswith("chatcmpl-"), "shape: %s" % j)
        msg = j["choices"][0]["message"]
        check(msg["role"] == "assistant" and isinstance(msg["content"], str), "message: %s" % msg)
        # The chatml prompt as /v1/completions text: the same tokens, the same greedy text.
        prompt = ("<|im_start|>system\nYou tell stories.<|im_end|>\n<|im_start|>user\nA story please<|im_end|>\n"
                  "<|im_start|>assistant\n")
        raw = complete(srv, greedy(prompt, 16))
        check(raw["usage"]["prompt_tokens"] == j["usage"]["prompt_tokens"], "prompt tokens: %s vs %s" %
              (raw["usage"], j["usage"]))
        check(raw["choices"][0]["text"] == msg["content"], "%r vs %r" % (raw["choices"][0]["text"], msg["content"]))
        text, finish, events = stream(srv, body, path="/v1/chat/completions")
        check(text == msg["content"] and finish == "length", "streamed chat %r (%s)" % (text, finish))
        check(events[0]["choices"][0]["delta"] == {"role": "assistant", "content": None}, "first delta")
        check(all(e["object"] == "chat.completion.chunk" for e in events), "chunk objects")
        status, e = request(srv, "POST", "/v1/chat/completions", {"messages": [{"content": "x"}]})
        check(status == 400 and "role" in e["error"]["message"], "a message without role: %s" % e)
    # Without --chat-template: the model has none, so chatml (said on stderr), as llama-server.
    with Server(args.server, model, "-c", "512") as srv:
        j = complete(srv, body, path="/v1/chat/completions")
        check(j["choices"][0]["message"]["content"] == msg["content"], "chatml by default: %s" % j)


def test_cli(args, model):
    """Bad command lines and models: exit 1 with one line naming what is wrong, nothing served."""
    cases = [
        (["-m", "/nonexistent/m.gguf"], "/nonexistent/m.gguf: cannot open"),
        (["-m", model, "--chat-template", "nosuch"], "unknown chat template name 'nosuch'"),
        (["-m", model, "--pooling", "avg"], "--pooling: avg not in {none,mean,cls,last}"),
        (["-m", model, "--port", "70000"], "--port: expected an integer from 0 to 65535, found 70000"),
        (["-m", model, "-np", "0"], "--parallel: expected an integer from 1 to 256, found 0"),
        (["-m", model, "-fa"], "--flash-attn: 1 required"),
        (["-m", model, "--api-key", ","], "--api-key: no key in ',', expected KEY[,KEY...]"),
        (["-m", model, "--pooling", "mean"], "--pooling mean: give --embeddings too"),
    ]
    for argv, expected in cases:
        out = subprocess.run([args.server, "--port", "0", *argv], capture_output=True, text=True, timeout=60)
        check(out.returncode == 1 and expected in out.stderr and "listening" not in out.stdout,
              "%s: rc %d, stderr %r" % (argv, out.returncode, out.stderr[-400:]))
    # A port another server listens on: refused (httplib's SO_REUSEPORT would let both bind and share
    # the connections).
    with Server(args.server, model, "-c", "256") as srv:
        out = subprocess.run([args.server, "-m", model, "-c", "256", "--port", str(srv.port)], capture_output=True,
                             text=True, timeout=60)
        check(out.returncode == 1 and "cannot listen on 127.0.0.1:%d" % srv.port in out.stderr and
              "listening" not in out.stdout, "a second server on port %d: rc %d, stderr %r, stdout %r" %
              (srv.port, out.returncode, out.stderr[-400:], out.stdout[-400:]))
        check(request(srv, "GET", "/health")[0] == 200, "the first server serves on")
    # -np against a plan of another sequence count: refused as -c is (the plan fixes both).
    if args.plan_model and os.path.exists(args.plan_model):
        with tempfile.TemporaryDirectory() as tmp:
            plan = os.path.join(tmp, "m.plan")
            subprocess.run([args.plan_model, "-m", model, "-c", "256", "-np", "2", "-kvu", "-o", plan], check=True,
                           capture_output=True, timeout=60)
            out = subprocess.run([args.server, "--port", "0", "-m", model, "--plan", plan, "-np", "4"],
                                 capture_output=True, text=True, timeout=60)
            check(out.returncode == 1 and "--parallel 4: the plan " + plan + " has 2 sequences" in out.stderr,
                  "-np 4 with a plan of 2: rc %d, stderr %r" % (out.returncode, out.stderr[-400:]))
            with Server(args.server, model, "--plan", plan, "-np", "2") as srv:
                check(request(srv, "GET", "/health")[0] == 200, "-np equal to the plan's")


def cosine(a, b):
    dot = sum(x * y for x, y in zip(a, b))
    na = sum(x * x for x in a) ** 0.5
    nb = sum(x * x for x in b) ** 0.5
    return dot / (na * nb)


def test_embeddings(args, model):
    """/v1/embeddings (--embeddings --pooling mean): unit vectors of n_embd floats; an input batched
    with others gets its embedding alone (per-sequence pooling); completions still run."""
    with Server(args.server, model, "-c", "512", "--embeddings", "--pooling", "mean") as srv:
        j = complete(srv, {"input": PROMPTS[0], "model": MODEL}, path="/v1/embeddings")
        check(j["object"] == "list" and len(j["data"]) == 1 and j["data"][0]["object"] == "embedding", "shape: %s" %
              str(j)[:300])
        alone = j["data"][0]["embedding"]
        check(len(alone) == 64, "n_embd 64: %d" % len(alone))
        check(abs(sum(x * x for x in alone) - 1) < 1e-5, "unit length")
        check(j["usage"]["prompt_tokens"] == 5, "usage: %s" % j["usage"])
        j = complete(srv, {"input": PROMPTS[:4]}, path="/v1/embeddings")
        check([d["index"] for d in j["data"]] == [0, 1, 2, 3], "indices")
        vecs = [d["embedding"] for d in j["data"]]
        check(cosine(vecs[0], alone) > 0.9999, "batched vs alone: cosine %f" % cosine(vecs[0], alone))
        others = [cosine(vecs[0], v) for v in vecs[1:]]
        check(max(others) < 0.999, "other inputs give other embeddings: %s" % others)
        j = complete(srv, {"input": [1, 400, 30]}, path="/v1/embeddings")
        check(len(j["data"][0]["embedding"]) == 64, "token input")
        for bad, code in [({"input": []}, 400), ({"input": "x", "encoding_format": "base64"}, 501),
                          ({"input": "x", "model": "other"}, 404), ({"inputs": "x"}, 400)]:
            status, e = request(srv, "POST", "/v1/embeddings", bad)
            check(status == code and "error" in e, "%s: HTTP %d %s" % (bad, status, e))
        j = complete(srv, greedy(PROMPTS[0], 8))
        check(j["usage"]["completion_tokens"] == 8, "a completion with embeddings on")
    with Server(args.server, model, "-c", "512", "--embeddings", "--pooling", "last") as srv:
        last = complete(srv, {"input": PROMPTS[0]}, path="/v1/embeddings")["data"][0]["embedding"]
        check(cosine(last, alone) < 0.999, "last pooling differs from mean pooling: %f" % cosine(last, alone))


TESTS = {name[len("test_"):]: f for name, f in globals().items() if name.startswith("test_")}


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--server", required=True)
    ap.add_argument("--run", default="")
    ap.add_argument("--plan-model", default="")
    ap.add_argument("--models", required=True)
    ap.add_argument("test", choices=sorted(TESTS))
    args = ap.parse_args()
    model = os.path.join(args.models, MODEL)
    if not os.path.exists(args.server):
        print("skipped: %s not built" % args.server)
        return SKIP
    if not os.path.exists(model):
        print("skipped: %s not found (shared models absent)" % model)
        return SKIP
    t0 = time.time()
    try:
        TESTS[args.test](args, model)
    except Failure as e:
        print("FAILED %s: %s" % (args.test, e))
        return 1
    print("PASSED %s (%.1f s)" % (args.test, time.time() - t0))
    return 0


if __name__ == "__main__":
    sys.exit(main())
