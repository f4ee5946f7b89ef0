"""HTTP/1.1 on asyncio streams (keep-alive, Content-Length and chunked bodies, chunked SSE responses),
answering like sglang's FastAPI app behind uvicorn."""
from __future__ import annotations

import asyncio
import json
import os
import time
import uuid
from email.utils import formatdate
from http import HTTPStatus
from typing import Any, Dict, List, Optional, Tuple

from sglang._fake import log, textgen
from sglang._fake.engine import Req

FLUSH_TEXT = ("Cache flushed.\nPlease check backend logs for more details. (When there are running or waiting "
              "requests, the operation will not be performed.)\n")


class HttpError(Exception):
    def __init__(self, status: int, body: Any):
        super().__init__(status)
        self.status, self.body = status, body


def bad_request(message: str) -> HttpError:
    return HttpError(400, {"object": "error", "message": message, "type": "Bad Request", "param": None,
                           "code": 400})


def _date() -> str:
    return formatdate(usegmt=True)


class Disconnected(Exception):
    """The client of a non-streamed request went away while it waited (managers/tokenizer_manager.py:1963-1975,
    2061-2072): the request is aborted; the message is SGLang's."""

    def __init__(self, kind: int, rid: str):
        super().__init__(f"Request is disconnected from the client side (type {kind}). Abort request obj.rid={rid!r}")


class Conn:
    __slots__ = ("writer", "reader", "client", "closed", "request", "logged", "busy", "keep_alive")

    def __init__(self, writer: asyncio.StreamWriter, client: str, reader: Optional[asyncio.StreamReader] = None):
        self.writer, self.reader, self.client, self.closed = writer, reader, client, False
        self.request: Optional[Tuple[str, str]] = None     # (method, target) of the request being answered
        self.logged = True
        self.busy = False           # a request is being answered (uvicorn: the connection's cycle is not complete)
        self.keep_alive = True      # False once the server shuts down: close after this response

    def gone(self) -> bool:
        """The client closed its end. uvicorn's protocol takes the end of the stream as the connection lost
        (protocols/http/httptools_impl.py:115-135): the request is marked disconnected, the connection dropped."""
        return self.reader is not None and self.reader.at_eof()

    def access(self, status: int) -> None:
        """uvicorn's access line, written when the response starts (before the client can read it); nothing for
        a client gone, whose response uvicorn drops unsent (protocols/http/httptools_impl.py:465-466)."""
        if self.gone():
            self.logged = True
            return
        if not self.logged and self.request is not None:
            self.logged = True
            log.access(self.client, self.request[0], self.request[1], status, HTTPStatus(status).phrase)

    def head(self, status: int, headers: List[Tuple[str, str]]) -> bytes:
        lines = [f"HTTP/1.1 {status} {HTTPStatus(status).phrase}", f"date: {_date()}", "server: uvicorn"]
        lines += [f"{k}: {v}" for k, v in headers]
        return ("\r\n".join(lines) + "\r\n\r\n").encode()

    def send(self, status: int, body: bytes = b"", ctype: Optional[str] = "application/json") -> None:
        self.access(status)
        if self.gone():
            return
        hdrs = [("content-length", str(len(body)))]
        if ctype:
            hdrs.append(("content-type", ctype))
        self.writer.write(self.head(status, hdrs) + body)

    def start_stream(self) -> None:
        self.access(200)
        self.writer.write(self.head(200, [("content-type", "text/event-stream; charset=utf-8"),
                                          ("transfer-encoding", "chunked")]))

    def chunk(self, data: bytes) -> None:
        if self.writer.transport.is_closing():
            raise ConnectionError("client went away")
        self.writer.write(b"%x\r\n%s\r\n" % (len(data), data))

    def end_stream(self) -> None:
        if not self.writer.transport.is_closing():
            self.writer.write(b"0\r\n\r\n")


def jdump(o: Any) -> bytes:
    return json.dumps(o, ensure_ascii=False, separators=(", ", ": ")).encode("utf-8")


def sse(o: Any) -> bytes:
    return b"data: " + json.dumps(o, ensure_ascii=False).encode("utf-8") + b"\n\n"


class HttpServer:
    """Routes and handlers. `app` is the main process's state object (see main.App)."""

    def __init__(self, app):
        self.app = app
        self.conns: set = set()     # uvicorn's server_state.connections, with each one's request (its task)

    async def shutdown(self) -> None:
        """uvicorn's Server.shutdown after its "Shutting down" and the listener's close (uvicorn/server.py:290-326
        of uvicorn 0.55.0, the release SGLang 0.5.23 installs; SGLang sets no graceful-shutdown timeout): an idle
        connection is closed, a busy one closes after its response; 0.1 s later it waits, each with its line, for
        the connections still open, then for the requests still running, whose client may have gone (a check
        whose client timed out runs on to its end)."""
        for conn in list(self.conns):
            if conn.busy:
                conn.keep_alive = False
            else:
                conn.writer.close()
        await asyncio.sleep(0.1)
        if any(not c.gone() for c in self.conns):
            log.uvicorn("Waiting for connections to close. (CTRL+C to force quit)")
            while any(not c.gone() for c in self.conns):
                await asyncio.sleep(0.1)
        if any(c.busy for c in self.conns):
            log.uvicorn("Waiting for background tasks to complete. (CTRL+C to force quit)")
            while any(c.busy for c in self.conns):
                await asyncio.sleep(0.1)

    async def handle(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        peer = writer.get_extra_info("peername") or ("?", 0)
        conn = Conn(writer, f"{peer[0]}:{peer[1]}", reader)
        self.conns.add(conn)
        try:
            while True:
                line = await reader.readline()
                if not line:
                    break
                if line in (b"\r\n", b"\n"):
                    continue
                try:
                    method, target, version = line.decode("latin-1").split()
                except ValueError:
                    conn.send(400, b"Invalid HTTP request received.", "text/plain; charset=utf-8")
                    break
                headers: Dict[str, str] = {}
                while True:
                    h = await reader.readline()
                    if h in (b"\r\n", b"\n", b""):
                        break
                    k, _sep, v = h.decode("latin-1").partition(":")
                    headers[k.strip().lower()] = v.strip()
                body = b""
                if "content-length" in headers:
                    body = await reader.readexactly(int(headers["content-length"]))
                elif headers.get("transfer-encoding", "").lower() == "chunked":
                    parts = []
                    while True:
                        size = int((await reader.readline()).split(b";")[0].strip() or b"0", 16)
                        if size == 0:
                            await reader.readline()
                            break
                        parts.append(await reader.readexactly(size))
                        await reader.readexactly(2)
                    body = b"".join(parts)
                keep = version == "HTTP/1.1" and headers.get("connection", "").lower() != "close"
                conn.busy = True
                try:
                    await self.dispatch(conn, method.upper(), target, headers, body)
                finally:
                    conn.busy = False
                await writer.drain()
                if not keep or not conn.keep_alive or writer.transport.is_closing():
                    break
        except (ConnectionError, asyncio.IncompleteReadError, asyncio.CancelledError):
            pass
        finally:
            self.conns.discard(conn)
            try:
                writer.close()
            except Exception:                           # noqa: BLE001
                pass

    # --- routing -----------------------------------------------------------------------------------
    async def dispatch(self, conn: Conn, method: str, target: str, headers: Dict[str, str], body: bytes) -> None:
        path = target.split("?", 1)[0]
        app = self.app
        status = 200
        metered = False
        conn.request, conn.logged = (method, target), False
        try:
            key = app.args.api_key
            if key and method != "OPTIONS" and not path.startswith("/health") and not path.startswith("/metrics"):
                if headers.get("authorization") != "Bearer " + key:
                    raise HttpError(401, {"error": "Unauthorized"})
            route = ROUTES.get(path)
            if app.metrics is not None:     # http_request_metrics.py: every request, by route (or raw path)
                app.metrics.http_begin(path, method)
                metered = True
            if route is None:
                raise HttpError(404, {"detail": "Not Found"})
            methods, name = route
            if method not in methods:
                raise HttpError(405, {"detail": "Method Not Allowed"})
            status = await getattr(self, name)(conn, method, headers, body)
        except HttpError as e:
            status = e.status
            conn.send(e.status, jdump(e.body) if not isinstance(e.body, bytes) else e.body)
        if metered:
            app.metrics.http_end(path, method, status)
        conn.access(status)

    def _json(self, headers: Dict[str, str], body: bytes) -> Any:
        ct = headers.get("content-type")
        if ct is not None and "json" not in ct.lower():
            raise bad_request("[{'type': 'model_attributes_type', 'loc': ('body',), 'msg': 'Input should be a valid "
                              "dictionary or object to extract fields from', 'input': " + repr(body[:100]) + "}]")
        try:
            obj = json.loads(body or b"null")
        except ValueError as e:
            raise bad_request(f"[{{'type': 'json_invalid', 'loc': ('body', {e.pos}), 'msg': 'JSON decode error', "
                              f"'input': {{}}, 'ctx': {{'error': '{e.msg}'}}}}]")
        if not isinstance(obj, dict) and not isinstance(obj, list):
            raise bad_request("[{'type': 'model_attributes_type', 'loc': ('body',), 'msg': 'Input should be a valid "
                              "dictionary or object to extract fields from'}]")
        return obj

    # --- simple endpoints --------------------------------------------------------------------------
    async def h_health(self, conn, method, headers, body) -> int:
        ok = await self.app.health_check()
        conn.send(200 if ok else 503, b"", None)
        return 200 if ok else 503

    async def h_ready(self, conn, method, headers, body) -> int:
        ok = self.app.is_ready()
        conn.send(200 if ok else 503, b"", None)
        return 200 if ok else 503

    async def h_get_model_info(self, conn, method, headers, body) -> int:
        log.warning("Endpoint '/get_model_info' is deprecated and will be removed in a future version. "
                    "Please use '/model_info' instead.")
        return await self.h_model_info(conn, method, headers, body)

    async def h_model_info(self, conn, method, headers, body) -> int:
        conn.send(200, jdump(self.app.model_info()))
        return 200

    async def h_get_server_info(self, conn, method, headers, body) -> int:
        log.warning("Endpoint '/get_server_info' is deprecated and will be removed in a future version. "
                    "Please use '/server_info' instead.")
        return await self.h_server_info(conn, method, headers, body)

    async def h_server_info(self, conn, method, headers, body) -> int:
        conn.send(200, jdump(self.app.server_info()))
        return 200

    async def h_freeze_gc(self, conn, method, headers, body) -> int:
        conn.send(200, b"Garbage collection frozen.\n", "text/plain; charset=utf-8")
        return 200

    async def h_models(self, conn, method, headers, body) -> int:
        a = self.app
        conn.send(200, jdump({"object": "list", "data": [{
            "id": a.args.served_model_name, "object": "model", "created": int(a.start_time), "owned_by": "sglang",
            "root": a.args.model_path, "parent": None, "max_model_len": a.context_len}]}))
        return 200

    async def h_flush(self, conn, method, headers, body) -> int:
        conn.send(200, FLUSH_TEXT.encode(), None)
        return 200

    async def h_metrics(self, conn, method, headers, body) -> int:
        a = self.app
        if a.metrics is None:
            raise HttpError(404, {"detail": "Not Found"})
        body, ctype = a.metrics.exposition(a.engine, headers.get("accept", ""))
        conn.send(200, body.encode(), ctype)
        return 200

    # --- /generate -------------------------------------------------------------------------------------
    async def h_generate(self, conn, method, headers, body) -> int:
        obj = self._json(headers, body)
        if not isinstance(obj, dict):
            raise bad_request("[{'type': 'model_attributes_type', 'loc': ('body',), 'msg': 'Input should be a valid "
                              "dictionary or object to extract fields from'}]")
        text, ids = obj.get("text"), obj.get("input_ids")
        if text is None and ids is None and obj.get("input_embeds") is None:
            raise HttpError(400, {"error": {"message": "Either text, input_ids or input_embeds should be provided."}})
        sp = obj.get("sampling_params") or {}
        if not isinstance(sp, dict):
            raise bad_request("sampling_params must be a dict")
        stream = bool(obj.get("stream"))
        batch = isinstance(text, list) or (isinstance(ids, list) and ids and isinstance(ids[0], list))
        prompts: List[Tuple[str, int]] = []
        if batch:
            items = text if isinstance(text, list) else ids
            for it in items:
                prompts.append((it, textgen.count_tokens(it)) if isinstance(it, str) else ("", len(it)))
        else:
            prompts.append((text, textgen.count_tokens(text)) if isinstance(text, str) else ("", len(ids or [])))
        try:
            max_new = int(sp.get("max_new_tokens", 128) if sp.get("max_new_tokens") is not None else 128)
            temp = float(sp.get("temperature", 1.0) if sp.get("temperature") is not None else 1.0)
        except (TypeError, ValueError) as e:
            raise HttpError(400, {"error": {"message": str(e)}})
        ignore_eos = bool(sp.get("ignore_eos", False))
        if self.app.fail_next_warmup and obj.get("_warmup") is None and self.app.status == "starting":
            self.app.fail_next_warmup = False
            raise HttpError(500, {"error": {"message": "CUDA error: an illegal memory access was encountered"}})
        if stream and batch:
            raise HttpError(400, {"error": {"message": "Streaming a batch is not supported by this fake."}})
        incremental = bool(getattr(self.app.args, "incremental_streaming_output", False))
        if not stream:
            reqs = [self.app.new_req(p, n, chat=False, temperature=temp, max_new=max_new, ignore_eos=ignore_eos)
                    for p, n in prompts]
            for r in reqs:
                self.app.engine.submit(r)
            waits = [asyncio.ensure_future(self._await_answer(conn, r)) for r in reqs]
            try:
                await asyncio.gather(*waits)
            except Disconnected as e:
                for w, r in zip(waits, reqs):
                    w.cancel()
                    self.app.engine.abort(r)
                log.error(f"[http_server] Error: {e}")      # entrypoints/http_server.py:988-990, 2246-2250
                raise HttpError(400, {"error": {"message": str(e)}})
            out = [{"text": r.text, "output_ids": r.ids, "meta_info": r.meta()} for r in reqs]
            conn.send(200, jdump(out if batch else out[0]))
            return 200
        conn.start_stream()
        state = {"off": 0, "idoff": 0}

        def on_token(r: Req, tok: str, finished: bool) -> None:
            if incremental:
                t, i = r.text[state["off"]:], r.ids[state["idoff"]:]
                state["off"], state["idoff"] = len(r.text), len(r.ids)
            else:
                t, i = r.text, r.ids
            conn.chunk(sse({"text": t, "output_ids": i, "meta_info": r.meta()}))
            if finished:
                conn.chunk(b"data: [DONE]\n\n")
                conn.end_stream()

        p, n = prompts[0]
        r = self.app.new_req(p, n, chat=False, temperature=temp, max_new=max_new, ignore_eos=ignore_eos,
                             on_token=on_token)
        self.app.engine.submit(r)
        await self._await_stream(conn, r)
        return 200

    async def _await_answer(self, conn: Conn, r: Req) -> None:
        """TokenizerManager._wait_one_response for a non-streamed request (managers/tokenizer_manager.py:1955-2072):
        it looks whether the client went away after each output short of the last (type 3) and after each
        SGLANG_REQUEST_STATE_WAIT_TIMEOUT seconds (4) without an output (type 1); a client gone aborts the request."""
        try:
            wait = float(os.environ.get("SGLANG_REQUEST_STATE_WAIT_TIMEOUT") or 4) * self.app.scale
        except ValueError:
            wait = 4.0 * self.app.scale
        loop = asyncio.get_running_loop()
        gone: asyncio.Future = loop.create_future()
        last = [loop.time()]

        def watch(_r: Req) -> None:
            last[0] = loop.time()
            if conn.gone() and not gone.done():
                gone.set_result(3)

        r.watch = watch
        while not r.done.done():
            left = last[0] + wait - loop.time()
            if left > 0 and not gone.done():
                await asyncio.wait([r.done, gone], timeout=left, return_when=asyncio.FIRST_COMPLETED)
            if gone.done():
                kind = gone.result()
            elif r.done.done():
                break
            elif loop.time() - last[0] < wait:
                continue
            else:
                last[0] = loop.time()
                if not conn.gone():
                    continue
                kind = 1
            self.app.engine.abort(r)
            raise Disconnected(kind, r.rid)
        r.done.result()

    async def _await_stream(self, conn: Conn, r: Req) -> None:
        try:
            await r.done
        except asyncio.CancelledError:
            self.app.engine.abort(r)
            raise
        if r.aborted:
            raise ConnectionError

    # --- OpenAI ------------------------------------------------------------------------------------------
    def _oai_common(self, obj: Dict[str, Any], chat: bool) -> Tuple[int, float, bool, bool]:
        mt = obj.get("max_completion_tokens", obj.get("max_tokens"))
        try:
            if mt is None:
                max_new = (self.app.context_len if chat else 16)
            else:
                max_new = int(mt)
            temp = float(obj.get("temperature", 1.0) if obj.get("temperature") is not None else 1.0)
        except (TypeError, ValueError) as e:
            raise bad_request(f"[{{'type': 'int_parsing', 'msg': '{e}'}}]")
        if max_new < 0:
            raise bad_request("max_tokens must be positive")
        return max_new, temp, bool(obj.get("stream")), bool(obj.get("ignore_eos", False))

    async def h_chat(self, conn, method, headers, body) -> int:
        obj = self._json(headers, body)
        if not isinstance(obj, dict):
            raise bad_request("[{'type': 'model_attributes_type', 'loc': ('body',), 'msg': 'Input should be a valid "
                              "dictionary or object to extract fields from'}]")
        msgs = obj.get("messages")
        if not isinstance(msgs, list) or not msgs:
            raise bad_request("[{'type': 'missing', 'loc': ('body', 'messages'), 'msg': 'Field required', "
                              "'input': " + repr(obj)[:200] + "}]")
        texts = []
        last_user = ""
        for m in msgs:
            if not isinstance(m, dict) or "role" not in m:
                raise bad_request("[{'type': 'union_tag_invalid', 'loc': ('body', 'messages'), 'msg': "
                                  "'Input tag not found'}]")
            c = m.get("content")
            if isinstance(c, list):
                c = " ".join(p.get("text", "") for p in c if isinstance(p, dict))
            c = c or ""
            texts.append(c)
            if m["role"] == "user":
                last_user = c
        max_new, temp, stream, ignore_eos = self._oai_common(obj, True)
        n_prompt = sum(textgen.count_tokens(t) + 4 for t in texts) + 3
        model = obj.get("model") or self.app.args.served_model_name
        created = int(time.time())
        cid = uuid.uuid4().hex
        if not stream:
            r = self.app.new_req(last_user or texts[-1], n_prompt, chat=True, temperature=temp, max_new=max_new,
                                 ignore_eos=ignore_eos)
            self.app.engine.submit(r)
            try:
                await self._await_answer(conn, r)
            except Disconnected as e:                   # serving_chat.py:2818, serving_completions.py:518
                raise HttpError(400, {"object": "error", "message": str(e), "type": "BadRequestError",
                                      "param": None, "code": 400})     # openai/serving_base.py:205-221
            fr, ms = _oai_finish(r)
            conn.send(200, jdump({
                "id": cid, "object": "chat.completion", "created": created, "model": model,
                "choices": [{"index": 0, "message": {"role": "assistant", "content": r.text, "reasoning_content": None,
                                                     "tool_calls": None},
                             "logprobs": None, "finish_reason": fr, "matched_stop": ms}],
                "usage": {"prompt_tokens": r.prompt_tokens, "total_tokens": r.prompt_tokens + r.n,
                          "completion_tokens": r.n, "prompt_tokens_details": None, "reasoning_tokens": 0},
                "metadata": {"weight_version": "default"}}))
            return 200
        include_usage = bool((obj.get("stream_options") or {}).get("include_usage"))
        conn.start_stream()
        base = {"id": cid, "object": "chat.completion.chunk", "created": created, "model": model}
        conn.chunk(sse({**base, "choices": [{"index": 0, "delta": {"role": "assistant", "content": ""},
                                             "logprobs": None, "finish_reason": None, "matched_stop": None}],
                        "usage": None}))

        def on_token(r: Req, tok: str, finished: bool) -> None:
            if tok:
                conn.chunk(sse({**base, "choices": [{"index": 0, "delta": {"role": None, "content": tok,
                                                                           "reasoning_content": None,
                                                                           "tool_calls": None},
                                                     "logprobs": None, "finish_reason": None, "matched_stop": None}],
                                "usage": None}))
            if finished:
                fr, ms = _oai_finish(r)
                conn.chunk(sse({**base, "choices": [{"index": 0, "delta": {}, "logprobs": None, "finish_reason": fr,
                                                     "matched_stop": ms}], "usage": None}))
                if include_usage:
                    conn.chunk(sse({**base, "choices": [], "usage": {
                        "prompt_tokens": r.prompt_tokens, "total_tokens": r.prompt_tokens + r.n,
                        "completion_tokens": r.n, "prompt_tokens_details": None, "reasoning_tokens": 0}}))
                conn.chunk(b"data: [DONE]\n\n")
                conn.end_stream()

        r = self.app.new_req(last_user or texts[-1], n_prompt, chat=True, temperature=temp, max_new=max_new,
                             ignore_eos=ignore_eos, on_token=on_token)
        self.app.engine.submit(r)
        await self._await_stream(conn, r)
        return 200

    async def h_completions(self, conn, method, headers, body) -> int:
        obj = self._json(headers, body)
        if not isinstance(obj, dict):
            raise bad_request("[{'type': 'model_attributes_type', 'loc': ('body',), 'msg': 'Input should be a valid "
                              "dictionary or object to extract fields from'}]")
        prompt = obj.get("prompt")
        if prompt is None:
            raise bad_request("[{'type': 'missing', 'loc': ('body', 'prompt'), 'msg': 'Field required'}]")
        if isinstance(prompt, list):
            prompt = prompt[0] if prompt else ""
        if not isinstance(prompt, str):
            prompt = ""
        max_new, temp, stream, ignore_eos = self._oai_common(obj, False)
        model = obj.get("model") or self.app.args.served_model_name
        created = int(time.time())
        cid = uuid.uuid4().hex
        n_prompt = textgen.count_tokens(prompt)
        if not stream:
            r = self.app.new_req(prompt, n_prompt, chat=False, temperature=temp, max_new=max_new,
                                 ignore_eos=ignore_eos)
            self.app.engine.submit(r)
            try:
                await self._await_answer(conn, r)
            except Disconnected as e:                   # serving_chat.py:2818, serving_completions.py:518
                raise HttpError(400, {"object": "error", "message": str(e), "type": "BadRequestError",
                                      "param": None, "code": 400})     # openai/serving_base.py:205-221
            fr, ms = _oai_finish(r)
            conn.send(200, jdump({
                "id": cid, "object": "text_completion", "created": created, "model": model,
                "choices": [{"index": 0, "text": r.text, "logprobs": None, "finish_reason": fr, "matched_stop": ms}],
                "usage": {"prompt_tokens": r.prompt_tokens, "total_tokens": r.prompt_tokens + r.n,
                          "completion_tokens": r.n, "prompt_tokens_details": None, "reasoning_tokens": 0},
                "metadata": {"weight_version": "default"}}))
            return 200
        include_usage = bool((obj.get("stream_options") or {}).get("include_usage"))
        conn.start_stream()
        base = {"id": cid, "object": "text_completion", "created": created, "model": model}

        def on_token(r: Req, tok: str, finished: bool) -> None:
            if tok or not finished:
                conn.chunk(sse({**base, "choices": [{"index": 0, "text": tok, "logprobs": None,
                                                     "finish_reason": None, "matched_stop": None}], "usage": None}))
            if finished:
                fr, ms = _oai_finish(r)
                conn.chunk(sse({**base, "choices": [{"index": 0, "text": "", "logprobs": None, "finish_reason": fr,
                                                     "matched_stop": ms}], "usage": None}))
                if include_usage:
                    conn.chunk(sse({**base, "choices": [], "usage": {
                        "prompt_tokens": r.prompt_tokens, "total_tokens": r.prompt_tokens + r.n,
                        "completion_tokens": r.n, "prompt_tokens_details": None, "reasoning_tokens": 0}}))
                conn.chunk(b"data: [DONE]\n\n")
                conn.end_stream()

        r = self.app.new_req(prompt, n_prompt, chat=False, temperature=temp, max_new=max_new, ignore_eos=ignore_eos,
                             on_token=on_token)
        self.app.engine.submit(r)
        await self._await_stream(conn, r)
        return 200


def _oai_finish(r: Req) -> Tuple[str, Any]:
    f = r.finish or {}
    if f.get("type") == "stop":
        return "stop", f.get("matched")
    return "length", None


GET, POST = ("GET",), ("POST",)
BOTH = ("GET", "POST")
ROUTES = {
    "/health": (GET, "h_health"), "/health_generate": (GET, "h_health"),
    "/ready": (GET, "h_ready"),
    "/get_model_info": (GET, "h_get_model_info"), "/model_info": (GET, "h_model_info"),
    "/get_server_info": (GET, "h_get_server_info"), "/server_info": (GET, "h_server_info"),
    "/freeze_gc": (BOTH, "h_freeze_gc"),
    "/v1/models": (GET, "h_models"),
    "/flush_cache": (BOTH, "h_flush"),
    "/metrics": (GET, "h_metrics"),
    "/generate": (BOTH, "h_generate"),
    "/v1/chat/completions": (POST, "h_chat"),
    "/v1/completions": (POST, "h_completions"),
}


class DummyHealthServer(HttpServer):
    """The app of sglang's launch_dummy_health_check_server on nodes of rank >= 1 (no tokenizer, no API):
    GET /health and /health_generate -> 200 with an empty body, anything else 404 ``{"detail":"Not Found"}``
    (/metrics too, with --enable-metrics). uvicorn runs it at log level warning: no access log."""

    async def dispatch(self, conn: Conn, method: str, target: str, headers: Dict[str, str], body: bytes) -> None:
        path = target.split("?", 1)[0]
        if path in ("/health", "/health_generate") or (path == "/metrics" and self.app.args.enable_metrics):
            if method not in ("GET", "HEAD"):
                conn.send(405, b'{"detail":"Method Not Allowed"}')
            elif path == "/metrics":
                conn.send(200, DUMMY_METRICS.encode(), "text/plain; version=0.0.4; charset=utf-8")
            else:
                conn.send(200, b"", None)
            return
        conn.send(404, b'{"detail":"Not Found"}')


DUMMY_METRICS = ("# HELP sglang:num_running_reqs The number of running requests.\n"
                 "# TYPE sglang:num_running_reqs gauge\n")
