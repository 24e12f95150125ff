#!/usr/bin/env python3
"""A bounded load test of stowage-server (by hand, not in ctest): N requests spread evenly over D
seconds, sent by C client threads (a request waits for a free client when all are busy), each a
streamed /v1/completions of a few dozen tokens; prints requests/s, latency and time-to-first-token
percentiles, tokens/s, and the server's /metrics at the end.

    scripts/server-load-test.py --server build/bin/stowage-server -m ../shared/models/stories260K.gguf \\
        [--requests 200] [--seconds 30] [--clients 16] [--max-tokens 64] [-- SERVER FLAGS...]
    scripts/server-load-test.py --url http://127.0.0.1:8080 ...   # a server already running

Python standard library only.
"""
import argparse
import http.client
import json
import random
import re
import subprocess
import sys
import threading
import time
import urllib.parse

PROMPTS = ["Once upon a time", "The little dog", "Lily and Tom went to the park", "One day, a bird",
           "The sun was shining and", "Ben had a red ball", "In a small house there lived", "The cat was very hungry"]


def percentile(values, p):
    v = sorted(values)
    if not v:
        return float("nan")
    k = (len(v) - 1) * p / 100.0
    lo, hi = int(k), min(int(k) + 1, len(v) - 1)
    return v[lo] + (v[hi] - v[lo]) * (k - lo)


def one_request(host, port, body):
    """(latency s, time to first token s, tokens) of one streamed completion."""
    t0 = time.time()
    conn = http.client.HTTPConnection(host, port, timeout=300)
    conn.request("POST", "/v1/completions", body=json.dumps(body), headers={"Content-Type": "application/json"})
    resp = conn.getresponse()
    if resp.status != 200:
        raise RuntimeError("HTTP %d %s" % (resp.status, resp.read()[:200]))
    ttft, tokens, done = None, 0, False
    while True:
        line = resp.readline()
        if not line:
            break
        line = line.strip()
        if not line.startswith(b"data: "):
            continue
        if line == b"data: [DONE]":
            done = True
            break
        ev = json.loads(line[6:])
        if "error" in ev:
            raise RuntimeError(str(ev["error"]))
        if ev["choices"][0]["finish_reason"] is None:
            tokens += 1
            if ttft is None:
                ttft = time.time() - t0
    conn.close()
    if not done:
        raise RuntimeError("stream ended without [DONE]")
    return time.time() - t0, ttft if ttft is not None else time.time() - t0, tokens


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--server", help="stowage-server binary to start")
    ap.add_argument("-m", "--model")
    ap.add_argument("--url", help="a running server instead")
    ap.add_argument("--requests", type=int, default=200)
    ap.add_argument("--seconds", type=float, default=30)
    ap.add_argument("--clients", type=int, default=16)
    ap.add_argument("--max-tokens", type=int, default=64)
    ap.add_argument("server_flags", nargs="*")
    args = ap.parse_args()

    proc = None
    if args.url:
        u = urllib.parse.urlparse(args.url)
        host, port = u.hostname, u.port
    else:
        if not args.server or not args.model:
            ap.error("--server and -m, or --url")
        proc = subprocess.Popen([args.server, "-m", args.model, "--port", "0", *args.server_flags],
                                stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True)
        line = proc.stdout.readline()
        m = re.search(r"listening on http://([\d.]+):(\d+)", line)
        if not m:
            proc.kill()
            sys.exit("the server did not start: %r" % line)
        host, port = m.group(1), int(m.group(2))
        print(line.strip())

    lock = threading.Lock()
    next_index = [0]
    results, errors = [], []
    start = time.time() + 0.2
    interval = args.seconds / args.requests

    def client():
        rng = random.Random()
        while True:
            with lock:
                i = next_index[0]
                if i >= args.requests:
                    return
                next_index[0] += 1
            delay = start + i * interval - time.time()
            if delay > 0:
                time.sleep(delay)
            body = {"prompt": rng.choice(PROMPTS), "max_tokens": args.max_tokens, "temperature": 0.8,
                    "seed": rng.randrange(1 << 31), "stream": True}
            try:
                r = one_request(host, port, body)
                with lock:
                    results.append(r)
            except Exception as e:  # counted and shown below
                with lock:
                    errors.append(str(e))

    threads = [threading.Thread(target=client) for _ in range(args.clients)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    wall = time.time() - start

    lat = [r[0] for r in results]
    ttft = [r[1] for r in results]
    tokens = sum(r[2] for r in results)
    print("%d requests (%d failed) from %d clients, scheduled over %.0f s, done in %.1f s" %
          (args.requests, len(errors), args.clients, args.seconds, wall))
    print("throughput: %.2f requests/s, %.0f generated tokens/s" % (len(results) / wall, tokens / wall))
    print("latency:    p50 %.3f s  p90 %.3f s  p99 %.3f s  max %.3f s" %
          (percentile(lat, 50), percentile(lat, 90), percentile(lat, 99), max(lat) if lat else float("nan")))
    print("first token: p50 %.3f s  p99 %.3f s" % (percentile(ttft, 50), percentile(ttft, 99)))
    for e in errors[:5]:
        print("error:", e)
    conn = http.client.HTTPConnection(host, port, timeout=30)
    conn.request("GET", "/metrics")
    text = conn.getresponse().read().decode()
    for line in text.splitlines():
        if line and not line.startswith("#"):
            print("  " + line)
    if proc:
        proc.terminate()
        proc.wait(30)
    return 1 if errors else 0


if __name__ == "__main__":
    sys.exit(main())
