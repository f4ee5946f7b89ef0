"""GET /metrics with --enable-metrics: the exposition of the real SGLang 0.5.23.

``metrics-0.5.23.prom`` beside this file is the body the real 0.5.23 served on the lab (``python -m
sglang.launch_server ... --enable-metrics --extra-metric-labels '{"host": "gpu01"}'``, the collection's deploy, then
plain and streamed /generate and /v1/chat/completions requests): every family in its order, with its HELP and TYPE
lines and the label names of each series; ``metrics-0.5.23.openmetrics`` is the same server's answer to Prometheus
2.42's Accept header. The fake serves those families with its own values:

- what it knows: requests, tokens, time to first token, end-to-end and inter-token latency (the real scheduler's
  ``is_streaming`` series), the running requests, the generation throughput, the context length, and every HTTP
  request (``sglang:http_*``, observability/http_request_metrics.py: the route's path, or the raw path of an unknown
  one, from the moment the HTTP server runs);
- the others keep the capture's gauges and read 0 for counters and histograms.

A histogram or streaming series shows up at its first observation, as prometheus_client's multiprocess files do;
``model_name`` is the served model name and the capture's ``host`` label gives way to --extra-metric-labels, on
every series that has ``model_name``. Labels are in name order, as the multiprocess collector writes them.
"""
from __future__ import annotations

import os
import re
from typing import Dict, List, Optional, Tuple

TEMPLATE = os.path.join(os.path.dirname(os.path.abspath(__file__)), "metrics-0.5.23.prom")
CAPTURED_EXTRA = ("host",)   # the capture's --extra-metric-labels
SAMPLE = re.compile(r'^([a-zA-Z_:][a-zA-Z0-9_:]*)(?:\{(.*)\})? (\S+)$')
LABEL = re.compile(r'([a-zA-Z_][a-zA-Z0-9_]*)="((?:[^"\\]|\\.)*)"')
LABEL_NAME = re.compile(r'([a-zA-Z_][a-zA-Z0-9_]*)="')
# the series the fake counts itself, per is_streaming (scheduler_metrics_mixin / tokenizer_metrics)
PER_STREAMING = {"sglang:num_requests_total", "sglang:prompt_tokens_total", "sglang:generation_tokens_total"}
HISTOGRAMS_PER_STREAMING = {"sglang:time_to_first_token_seconds", "sglang:e2e_request_latency_seconds",
                            "sglang:request_time_per_output_token_seconds"}
HTTP = ("sglang:http_requests_total", "sglang:http_requests_active", "sglang:http_responses_total")


class Family:
    __slots__ = ("name", "head", "kind", "samples", "buckets")

    def __init__(self, name: str, kind: str) -> None:
        self.name, self.kind = name, kind
        self.head: List[str] = []
        self.samples: List[Tuple[str, Dict[str, str], str]] = []
        self.buckets: List[str] = []


def load(path: str = TEMPLATE) -> List[Family]:
    families: List[Family] = []
    current: Optional[Family] = None
    with open(path, encoding="utf-8") as handle:
        for line in handle.read().splitlines():
            if line.startswith("# HELP "):
                current = Family(line.split(" ", 3)[2], "")
                families.append(current)
                current.head.append(line)
            elif line.startswith("# TYPE ") and current is not None:
                current.kind = line.split(" ")[3]
                current.head.append(line)
            elif line and current is not None:
                m = SAMPLE.match(line)
                if m is None:
                    continue
                labels = dict(LABEL.findall(m.group(2) or ""))
                current.samples.append((m.group(1), labels, m.group(3)))
                le = labels.get("le")
                if le is not None and le not in current.buckets:
                    current.buckets.append(le)
    return families


def _num(value: float) -> str:
    return repr(float(value))


def _labels(labels: Dict[str, str]) -> str:
    return "{" + ",".join('%s="%s"' % (k, labels[k]) for k in sorted(labels)) + "}" if labels else ""


class Histogram:
    __slots__ = ("bounds", "counts", "total", "n")

    def __init__(self, bounds: List[str]) -> None:
        self.bounds = bounds
        self.counts = [0] * len(bounds)
        self.total, self.n = 0.0, 0

    def observe(self, value: float) -> None:
        for i, le in enumerate(self.bounds):
            if le == "+Inf" or value <= float(le):
                self.counts[i] += 1
        self.total += value
        self.n += 1


class Metrics:
    """The fake's counters and its /metrics text."""

    def __init__(self, served_model_name: str, extra_labels: Optional[Dict[str, str]], context_len: int) -> None:
        self.families = load()
        self.by_name = dict((f.name, f) for f in self.families)
        self.model = served_model_name
        self.extra = dict((str(k), str(v)) for k, v in (extra_labels or {}).items())
        self.context_len = context_len
        self.counters: Dict[Tuple[str, str], float] = {}
        self.hists: Dict[Tuple[str, str], Histogram] = {}
        self.http_total: Dict[Tuple[str, str], int] = {}
        self.http_active: Dict[Tuple[str, str], int] = {}
        self.http_responses: Dict[Tuple[str, str, str], int] = {}

    # --- what the fake observes ---------------------------------------------------------------------
    def http_begin(self, endpoint: str, method: str) -> None:
        key = (endpoint, method)
        self.http_total[key] = self.http_total.get(key, 0) + 1
        self.http_active[key] = self.http_active.get(key, 0) + 1

    def http_end(self, endpoint: str, method: str, status: int) -> None:
        key = (endpoint, method)
        self.http_active[key] = self.http_active.get(key, 1) - 1
        rkey = (endpoint, method, str(status))
        self.http_responses[rkey] = self.http_responses.get(rkey, 0) + 1

    def _hist(self, name: str, streaming: str) -> Histogram:
        key = (name, streaming)
        if key not in self.hists:
            self.hists[key] = Histogram(self.by_name[name].buckets)
        return self.hists[key]

    def finished(self, created: float, first_token_at: Optional[float], now: float, prompt_tokens: int,
                 output_tokens: int, streaming: bool, gaps: List[float]) -> None:
        s = "true" if streaming else "false"
        for name, value in (("sglang:num_requests_total", 1), ("sglang:prompt_tokens_total", prompt_tokens),
                            ("sglang:generation_tokens_total", output_tokens)):
            self.counters[(name, s)] = self.counters.get((name, s), 0.0) + value
        e2e = now - created
        self._hist("sglang:e2e_request_latency_seconds", s).observe(e2e)
        if first_token_at is not None:
            self._hist("sglang:time_to_first_token_seconds", s).observe(first_token_at - created)
        if output_tokens > 0:
            self._hist("sglang:request_time_per_output_token_seconds", s).observe(e2e / output_tokens)
        for gap in gaps:
            self._hist("sglang:inter_token_latency_seconds", "").observe(gap)

    # --- the text -----------------------------------------------------------------------------------
    def _relabel(self, labels: Dict[str, str]) -> Dict[str, str]:
        out = dict((k, v) for k, v in labels.items() if k not in CAPTURED_EXTRA or "model_name" not in labels)
        if "model_name" in out:
            out["model_name"] = self.model
            out.update(self.extra)
        return out

    def _series_labels(self, family: Family, streaming: str) -> Dict[str, str]:
        """The labels of one of the fake's own series: the capture's first series of the family, relabelled."""
        base = dict(family.samples[0][1]) if family.samples else {}
        base.pop("le", None)
        if streaming:
            base["is_streaming"] = streaming
        return self._relabel(base)

    def _histogram_lines(self, family: Family) -> List[str]:
        lines: List[str] = []
        for (name, streaming), h in sorted(self.hists.items()):
            if name != family.name:
                continue
            labels = self._series_labels(family, streaming)
            lines.append("%s_sum%s %s" % (name, _labels(labels), _num(h.total)))
            for le, count in zip(h.bounds, h.counts):
                lines.append("%s_bucket%s %s" % (name, _labels(dict(labels, le=le)), _num(count)))
            lines.append("%s_count%s %s" % (name, _labels(labels), _num(h.n)))
        return lines

    def _http_lines(self, family: Family) -> List[str]:
        if family.name == "sglang:http_responses_total":
            return ["%s%s %s" % (family.name, _labels({"endpoint": e, "method": m, "status_code": c}), _num(n))
                    for (e, m, c), n in self.http_responses.items()]
        table = self.http_total if family.name == "sglang:http_requests_total" else self.http_active
        return ["%s%s %s" % (family.name, _labels({"endpoint": e, "method": m}), _num(n)) for (e, m), n in table.items()]

    def _gauge(self, name: str, captured: str, engine) -> str:
        live = {"sglang:num_running_reqs": float(len(engine.active)) if engine else 0.0,
                "sglang:gen_throughput": engine.last_gen_throughput if engine else 0.0,
                "sglang:num_queue_reqs": 0.0, "sglang:context_len": float(self.context_len)}
        return _num(live[name]) if name in live else captured

    def exposition(self, engine, accept: str) -> Tuple[str, str]:
        """(body, Content-Type) for the request's Accept header, as prometheus_client 0.26's ``choose_encoder``
        (exposition.py:361-388, the client in the real 0.5.23's venv) picks them: OpenMetrics 1.0.0 for an
        ``application/openmetrics-text`` with a version of 1.0.0 or more, or none (names escaped as the header's
        ``escaping=`` asks: ``underscores``, the default, turns every ``:`` of a sample name into ``_``; Prometheus
        2.42 asks for it), else the text format 0.0.4 as SGLang names the series. A ``text/plain`` of version 1.0.0
        or an escaping other than underscores and allow-utf-8 is not played (Prometheus 2.42 asks for neither)."""
        text = self.render(engine)
        for accepted in (accept or "").split(","):
            toks = accepted.split(";")
            if toks[0].strip() != "application/openmetrics-text":
                continue
            params = dict(t.strip().split("=", 1) for t in toks[1:] if "=" in t)
            version = params.get("version", "")
            if version and tuple(int(x) for x in re.findall(r"\d+", version)[:3]) < (1, 0, 0):
                continue
            escaping = "allow-utf-8" if params.get("escaping") == "allow-utf-8" else "underscores"
            ctype = ("application/openmetrics-text; version=1.0.0; charset=utf-8" if not version else
                     "application/openmetrics-text; version=%s; charset=utf-8; escaping=%s" % (version, escaping))
            return openmetrics(text, escaping), ctype
        return text, "text/plain; version=0.0.4; charset=utf-8"

    def render(self, engine) -> str:
        out: List[str] = []
        for family in self.families:
            if family.name in HISTOGRAMS_PER_STREAMING or family.name == "sglang:inter_token_latency_seconds":
                lines = self._histogram_lines(family)
            elif family.name in PER_STREAMING:
                lines = ["%s%s %s" % (family.name, _labels(self._series_labels(family, s)), _num(v))
                         for (name, s), v in sorted(self.counters.items()) if name == family.name]
            elif family.name in HTTP:
                lines = self._http_lines(family)
            else:
                lines = []
                for name, labels, value in family.samples:
                    if family.kind == "gauge":
                        value = self._gauge(name, value, engine)
                    else:
                        value = "0.0"
                    lines.append("%s%s %s" % (name, _labels(self._relabel(labels)), value))
            if lines or family.kind not in ("histogram",) and family.name not in PER_STREAMING:
                out.extend(family.head)
                out.extend(lines)
        return "\n".join(out) + "\n"


def openmetrics(text: str, escaping: str = "underscores") -> str:
    """The text format 0.0.4 as prometheus_client's openmetrics.generate_latest writes the same families (checked
    line by line against the real 0.5.23 on the lab): a counter's HELP and TYPE name without ``_total``, sample
    names with ``:`` as ``_`` (escaping underscores), ``# EOF`` at the end."""
    kinds = dict(line.split(" ")[2:4] for line in text.splitlines() if line.startswith("# TYPE "))
    out = []
    for line in text.splitlines():
        if line.startswith("# HELP ") or line.startswith("# TYPE "):
            parts = line.split(" ", 3)
            if kinds.get(parts[2]) == "counter" and parts[2].endswith("_total"):
                parts[2] = parts[2][:-len("_total")]
            out.append(" ".join(parts))
        elif line:
            name, rest = re.match(r"^([^{ ]+)(.*)$", line).groups()
            out.append((name.replace(":", "_") if escaping == "underscores" else name) + rest)
    return "\n".join(out + ["# EOF"]) + "\n"


def families(text: str) -> Dict[str, list]:
    """{family: [type, sorted label-name lists]} of a Prometheus exposition (text 0.0.4 or OpenMetrics): what the
    tests compare between the fake, the real server and the captures."""
    kinds: Dict[str, str] = {}
    labels: Dict[str, set] = {}
    for line in text.splitlines():
        if line.startswith("# TYPE "):
            name, kind = line.split(" ")[2:4]
            kinds[name] = kind
            labels.setdefault(name, set())
        elif line and not line.startswith("#"):
            name = re.split(r"[{ ]", line, maxsplit=1)[0]
            base = re.sub(r"_(bucket|sum|count)$", "", name)
            family = base if base in kinds else name
            labels.setdefault(family, set()).add(tuple(sorted(LABEL_NAME.findall(line.split(" ")[0]))))
    return dict((n, [kinds.get(n), sorted(list(t) for t in labels[n])]) for n in labels)
