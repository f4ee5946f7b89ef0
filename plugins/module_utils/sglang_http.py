# -*- coding: utf-8 -*-
# Copyright: (c) 2026, llmserve.sglang contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""A small HTTP client for SGLang's endpoints over ``ansible.module_utils.urls.open_url``.

Never raises for HTTP/transport errors: every call returns a :class:`Reply` with the
status (None when there was no HTTP answer), the body, parsed JSON when it is JSON,
the time it took and, on failure, ``error`` (``timeout``, ``refused``, or a message).
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import json
import socket
import time

try:
    from ansible.module_utils.urls import open_url
    from ansible.module_utils.six.moves.urllib.error import HTTPError
except ImportError:  # pragma: no cover - only for use outside Ansible
    open_url = None
    from urllib.error import HTTPError


class Reply(object):
    __slots__ = ('status', 'body', 'data', 'seconds', 'error', 'headers')

    def __init__(self, status=None, body=u'', data=None, seconds=0.0, error=None, headers=None):
        self.status = status
        self.body = body
        self.data = data
        self.seconds = seconds
        self.error = error
        self.headers = headers or {}

    @property
    def ok(self):
        return self.status == 200

    def to_dict(self):
        return {'status': self.status, 'body': self.body[:2000], 'seconds': round(self.seconds, 3), 'error': self.error}


def base_url(host, port, scheme='http'):
    host = host or '127.0.0.1'
    if ':' in host and not host.startswith('['):
        host = '[%s]' % host  # IPv6 literal
    return '%s://%s:%s' % (scheme, host, port)


def auth_headers(api_key=None, json_body=False):
    h = {}
    if api_key:
        h['Authorization'] = 'Bearer %s' % api_key
    if json_body:
        h['Content-Type'] = 'application/json'
    return h


def _is_timeout(exc):
    if isinstance(exc, socket.timeout):
        return True
    reason = getattr(exc, 'reason', None)
    if isinstance(reason, socket.timeout):
        return True
    return 'timed out' in str(exc).lower()


def _error_text(exc):
    reason = getattr(exc, 'reason', exc)
    text = str(reason)
    if 'refused' in text.lower():
        return 'refused'
    return text or exc.__class__.__name__


def request(url, method='GET', body=None, api_key=None, timeout=10, validate_certs=True, opener=None):
    """Send one request; ``body`` (dict/list) is sent as JSON.  Returns a :class:`Reply`."""
    opener = opener or open_url
    data = None
    if body is not None:
        data = json.dumps(body).encode('utf-8')
    headers = auth_headers(api_key, json_body=body is not None)
    t0 = time.time()
    try:
        resp = opener(url, data=data, method=method, headers=headers, timeout=timeout,
                      validate_certs=validate_certs, follow_redirects='safe')
        raw = resp.read()
        status = getattr(resp, 'status', None) or resp.getcode()
        hdrs = dict(resp.headers.items()) if getattr(resp, 'headers', None) is not None else {}
    except HTTPError as e:
        try:
            raw = e.read() or b''
        except Exception:
            raw = b''
        text = raw.decode('utf-8', 'replace') if isinstance(raw, bytes) else (raw or u'')
        return Reply(e.code, text, _maybe_json(text), time.time() - t0, None)
    except Exception as e:  # URLError, socket errors, TLS errors, connection resets
        return Reply(None, u'', None, time.time() - t0, 'timeout' if _is_timeout(e) else _error_text(e))
    text = raw.decode('utf-8', 'replace') if isinstance(raw, bytes) else (raw or u'')
    return Reply(status, text, _maybe_json(text), time.time() - t0, None, hdrs)


def _maybe_json(text):
    if not text:
        return None
    try:
        return json.loads(text)
    except ValueError:
        return None


def get(url, **kw):
    return request(url, 'GET', None, **kw)


def post_json(url, body, **kw):
    return request(url, 'POST', body, **kw)


def iter_sse(fp, chunk_size=65536):
    """Yield the payload of each ``data:`` line from a file-like byte stream (stops at ``[DONE]``).

    Uses ``read1`` when the stream has it (returns as soon as any bytes arrived; important
    for timing), else ``readline``.
    """
    buf = b''
    read1 = getattr(fp, 'read1', None)
    while True:
        if read1 is not None:
            chunk = read1(chunk_size)
        else:
            chunk = fp.readline()
        if not chunk:
            break
        buf += chunk
        while b'\n' in buf:
            line, buf = buf.split(b'\n', 1)
            line = line.strip()
            if not line.startswith(b'data:'):
                continue
            payload = line[5:].strip()
            if payload == b'[DONE]':
                return
            yield payload.decode('utf-8', 'replace')


def stream_sse(url, body, api_key=None, timeout=60, validate_certs=True, opener=None):
    """POST ``body`` with ``stream: true`` and yield ``(seconds_since_start, payload_text)`` per event."""
    opener = opener or open_url
    body = dict(body)
    body['stream'] = True
    t0 = time.time()
    resp = opener(url, data=json.dumps(body).encode('utf-8'), method='POST',
                  headers=auth_headers(api_key, json_body=True), timeout=timeout,
                  validate_certs=validate_certs)
    for payload in iter_sse(resp):
        yield time.time() - t0, payload
