"""A stdlib SSE server that streams SGLang-like /generate events at a known rate.

Used by loadgen_accuracy.py to measure the load generator against the truth.
Each request: wait --ttft seconds, then one event every --itl seconds (absolute schedule,
no drift) carrying SGLang's cumulative ``text`` and ``meta_info.completion_tokens``,
then ``data: [DONE]``.  The server records, per request, when it received the request and
when each event left (time.perf_counter(): CLOCK_MONOTONIC, comparable across processes
on Linux) and writes them as JSON to --record on SIGTERM / GET /stats.

  python3 tests/bench/sse_server.py --port 18000 --ttft 0.1 --itl 0.0256
"""
import argparse
import json
import signal
import sys
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

RECORDS = []
LOCK = threading.Lock()


class Handler(BaseHTTPRequestHandler):
    protocol_version = 'HTTP/1.1'

    def log_message(self, *a):
        pass

    def do_GET(self):
        body = json.dumps(RECORDS).encode() if self.path == '/stats' else b''
        self.send_response(200)
        self.send_header('Content-Length', str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def _chunk(self, data):
        self.wfile.write(b'%x\r\n%s\r\n' % (len(data), data))
        self.wfile.flush()

    def do_POST(self):
        n = int(self.headers.get('Content-Length', 0))
        req = json.loads(self.rfile.read(n))
        t_recv = time.perf_counter()
        out_len = int(req.get('sampling_params', {}).get('max_new_tokens', 16))
        plen = len(req.get('input_ids') or (req.get('text') or '').split())
        self.send_response(200)
        self.send_header('Content-Type', 'text/event-stream')
        self.send_header('Transfer-Encoding', 'chunked')
        self.end_headers()
        sends = []
        text = ''
        for k in range(1, out_len + 1):
            due = t_recv + ARGS.ttft + (k - 1) * ARGS.itl
            d = due - time.perf_counter()
            if d > 0:
                time.sleep(d)
            text += ' tok'
            ev = {'text': text, 'meta_info': {'id': 'x', 'prompt_tokens': plen, 'completion_tokens': k,
                                              'finish_reason': None}}
            self._chunk(b'data: ' + json.dumps(ev).encode() + b'\n\n')
            sends.append(time.perf_counter())
        self._chunk(b'data: [DONE]\n\n')
        self.wfile.write(b'0\r\n\r\n')
        self.wfile.flush()
        with LOCK:
            RECORDS.append({'recv': t_recv, 'sends': sends})


def main():
    global ARGS
    ap = argparse.ArgumentParser()
    ap.add_argument('--port', type=int, default=18000)
    ap.add_argument('--ttft', type=float, default=0.1)
    ap.add_argument('--itl', type=float, default=0.0256)
    ap.add_argument('--record', default=None)
    ARGS = ap.parse_args()

    class Server(ThreadingHTTPServer):
        daemon_threads = True
        request_queue_size = 512    # 64 simultaneous connects must not hit SYN retries
    srv = Server(('127.0.0.1', ARGS.port), Handler)

    def stop(*_):
        if ARGS.record:
            with open(ARGS.record, 'w') as f:
                json.dump(RECORDS, f)
        sys.exit(0)
    signal.signal(signal.SIGTERM, stop)
    print('listening', ARGS.port, flush=True)
    srv.serve_forever()


if __name__ == '__main__':
    main()
