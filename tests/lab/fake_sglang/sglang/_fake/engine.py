"""Token engine: continuous batching on one asyncio timer.

Every decode step emits one token for every running request. The step interval is
``max(1 / per_stream_tok_s, n_running / total_tok_s)``: a stream runs at its own rate until the total cap is
reached, then the streams share the cap. Steps are scheduled on absolute times (no drift), so the
achieved total rate equals the configured one.
"""
from __future__ import annotations

import asyncio
import time
import uuid
from typing import Any, Callable, Dict, List, Optional

from sglang._fake import log, textgen


class Req:
    __slots__ = ("rid", "answer", "max_new", "n", "ids", "text", "on_token", "done", "created", "prompt_tokens",
                 "kind", "finish", "aborted", "first_token_at", "client", "token_at", "watch")

    def __init__(self, answer: textgen.Answer, max_new: int, prompt_tokens: int, kind: str,
                 on_token: Optional[Callable[["Req", str, bool], None]] = None, client: bool = True,
                 rid: Optional[str] = None):
        self.rid = rid or uuid.uuid4().hex
        self.answer = answer
        self.max_new = max(0, int(max_new))
        self.n = 0
        self.ids: List[int] = []
        self.text = ""
        self.on_token = on_token
        self.done: asyncio.Future = asyncio.get_running_loop().create_future()
        self.created = time.time()
        self.prompt_tokens = prompt_tokens
        self.kind = kind
        self.finish: Optional[Dict[str, Any]] = None
        self.aborted = False
        self.first_token_at: Optional[float] = None
        self.client = client
        self.token_at: List[float] = []     # a streamed request's token times (the inter-token latency metric)
        self.watch: Optional[Callable[["Req"], None]] = None   # called after each output short of the last

    def meta(self) -> Dict[str, Any]:
        return {"id": self.rid, "finish_reason": self.finish, "prompt_tokens": self.prompt_tokens,
                "weight_version": "default", "total_retractions": 0, "completion_tokens": self.n,
                "cached_tokens": 0, "e2e_latency": round(time.time() - self.created, 6)}


class Engine:
    def __init__(self, loop: asyncio.AbstractEventLoop, per_stream_tok_s: float, total_tok_s: float,
                 prefill_tok_s: float, decode_log_interval: int = 40,
                 on_forward: Optional[Callable[[Req, int], bool]] = None,
                 on_busy: Optional[Callable[[bool], None]] = None, log_prefix: str = "", cuda_graph: bool = True):
        self.loop = loop
        self.per_stream = max(0.001, float(per_stream_tok_s))
        self.total = max(0.001, float(total_tok_s))
        self.prefill = float(prefill_tok_s or 0)
        self.active: List[Req] = []
        self.pending = 0
        self.inflight: Dict[str, Req] = {}  # the tokenizer manager's rid_to_state: admitted, not finished
        self.last_emit = 0.0                # time.time() of the last token out (the detokenizer's heartbeat)
        self.stalled = False
        self.nan_warn: Optional[Callable[[], None]] = None
        self._handle: Optional[asyncio.TimerHandle] = None
        self._base = 0.0
        self._joined = 0
        self._joined_tokens = 0
        self.decode_log_interval = max(1, int(decode_log_interval or 40))
        self._steps = 0
        self._log_tokens = 0
        self._log_t = time.monotonic()
        self.last_gen_throughput = 0.0
        self.on_forward = on_forward        # returns False to stall the engine (failure triggered)
        self.on_busy = on_busy
        self.log_prefix = log_prefix        # the TP0 scheduler's: " TP0" with tp > 1, else none
        self.cuda_graph = cuda_graph        # decode batches replay the captured graph
        self._prefill_t = time.monotonic()
        self._busy = False
        self._idle_handle: Optional[asyncio.TimerHandle] = None
        self.total_tokens = 0
        self.client_requests = 0
        self.on_finish: Optional[Callable[[Req], None]] = None   # --enable-metrics: the request's figures

    # --- admission -----------------------------------------------------------------------------------
    def submit(self, req: Req) -> None:
        if req.client:
            self.client_requests += 1
        self.pending += 1
        self.inflight[req.rid] = req
        if self.on_forward is not None and not self.on_forward(req, self.client_requests):
            self.stall()
        if req.max_new == 0:
            self.loop.call_soon(self._finish, req, {"type": "length", "length": 0})
            return
        delay = req.prompt_tokens / self.prefill if self.prefill > 0 else 0.0
        if delay > 0.0005:
            self.loop.call_later(delay, self._join, req)
        else:
            self._join(req)

    def _join(self, req: Req) -> None:
        if req.aborted:
            self.pending -= 1
            self.inflight.pop(req.rid, None)
            return
        self.active.append(req)
        self._joined += 1
        self._joined_tokens += req.prompt_tokens
        if not self._busy and self.on_busy is not None:
            self._busy = True
            self.on_busy(True)
        if self._idle_handle is not None:
            self._idle_handle.cancel()
            self._idle_handle = None
        self._schedule(first=True)

    def abort(self, req: Req) -> None:
        req.aborted = True

    def stall(self) -> None:
        self.stalled = True
        if self._handle is not None:
            self._handle.cancel()
            self._handle = None

    # --- the decode loop -------------------------------------------------------------------------------
    def _interval(self, n: int) -> float:
        return max(1.0 / self.per_stream, n / self.total)

    def _schedule(self, first: bool = False) -> None:
        if self._handle is not None or self.stalled or not self.active:
            return
        now = self.loop.time()
        if first:
            # a batch starting from idle: first token right after prefill
            t = max(now, self._base + self._interval(len(self.active))) if self._base else now
        else:
            t = self._base + self._interval(len(self.active))
        if t < now - 0.25:                  # far behind (overloaded): do not burst, restart the clock
            t = now
        self._handle = self.loop.call_at(t, self._step, t)

    def _step(self, t: float) -> None:
        self._handle = None
        if self.stalled:
            return
        self._base = t
        if self._joined:
            now = time.monotonic()
            gap = now - self._prefill_t
            self._prefill_t = now
            log.info(f"Prefill batch, #new-seq: {self._joined}, #new-token: {self._joined_tokens}, "
                     f"#cached-token: 0, token usage: 0.00, #running-req: {len(self.active) - self._joined}, "
                     f"#queue-req: 0, #pending-token: 0, cuda graph: False, input throughput (token/s): "
                     f"{self._joined_tokens / gap if gap > 0 else 0.0:.2f}", prefix=self.log_prefix)
            self._joined = 0
            self._joined_tokens = 0
        if self.nan_warn is not None:
            self.nan_warn()
        keep: List[Req] = []
        emitted = 0
        for r in self.active:
            if r.aborted:
                self.pending -= 1
                self.inflight.pop(r.rid, None)
                continue
            i = r.n
            if r.answer.ends_at is not None and i >= r.answer.ends_at:
                r.n += 1
                r.ids.append(textgen.EOS_ID)
                emitted += 1
                self._finish(r, {"type": "stop", "matched": textgen.EOS_ID}, emit=True)
                continue
            tok = r.answer.token(i)
            r.n = i + 1
            if r.on_token is not None:
                r.token_at.append(time.time())
            r.ids.append(textgen.token_id(tok))
            r.text += tok
            emitted += 1
            if r.first_token_at is None:
                r.first_token_at = time.time()
            if r.n >= r.max_new:
                self._finish(r, {"type": "length", "length": r.max_new}, emit=True, tok=tok)
                continue
            if r.on_token is not None:
                try:
                    r.on_token(r, tok, False)
                except Exception:               # noqa: BLE001 - a broken client must not stop the batch
                    r.aborted = True
                    self.pending -= 1
                    self.inflight.pop(r.rid, None)
                    if not r.done.done():
                        r.done.set_result(r)
                    continue
            if r.watch is not None:
                r.watch(r)
            keep.append(r)
        self.active = keep
        if emitted:
            self.last_emit = time.time()
        self.total_tokens += emitted
        self._log_tokens += emitted
        self._steps += 1
        if self._steps % self.decode_log_interval == 0:
            now = time.monotonic()
            el = now - self._log_t
            self.last_gen_throughput = self._log_tokens / el if el > 0 else 0.0
            log.info(f"Decode batch, #running-req: {len(keep)}, #token: {sum(r.prompt_tokens + r.n for r in keep)}, "
                     f"token usage: 0.01, cuda graph: {self.cuda_graph}, gen throughput (token/s): "
                     f"{self.last_gen_throughput:.2f}, #queue-req: 0", prefix=self.log_prefix)
            self._log_t, self._log_tokens = now, 0
        if keep:
            self._schedule()
        elif self._busy and self.on_busy is not None and self._idle_handle is None:
            self._idle_handle = self.loop.call_later(1.0, self._go_idle)

    def _go_idle(self) -> None:
        self._idle_handle = None
        if not self.active and self._busy:
            self._busy = False
            self.on_busy(False)

    def _finish(self, r: Req, reason: Dict[str, Any], emit: bool = False, tok: str = "") -> None:
        r.finish = reason
        if self.on_finish is not None and r.kind != "health":
            self.on_finish(r)
        self.pending -= 1
        self.inflight.pop(r.rid, None)
        self.last_emit = time.time()
        if emit and r.on_token is not None:
            try:
                r.on_token(r, tok, True)
            except Exception:                   # noqa: BLE001
                pass
        if not r.done.done():
            r.done.set_result(r)
