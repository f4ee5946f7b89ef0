"""Behaviour table: which way the fake SGLang lives or dies for this GPU arch and these flags.

File: env ``FAKE_SGLANG_BEHAVIOUR``, else ``/etc/fake-sglang/behaviour.yml``; when neither exists the
built-in fallback (ready) applies. Format: see tests/lab/behaviour/default.yml (documented there).
First matching rule wins.
"""
from __future__ import annotations

import json
import os
from dataclasses import dataclass, field
from typing import Any, Dict, List, Optional

BEHAVIOURS = ("ready", "crash", "killed", "hang", "garbage", "nan", "watchdog", "die_after_ready",
              "ignore_sigterm")
SPECIAL_MATCH_KEYS = ("arch", "env", "version", "gpu_name", "gpu_count", "model")

DEFAULT_PATH = "/etc/fake-sglang/behaviour.yml"

# Defaults of every parameter a rule may set (documented in default.yml).
DEFAULT_PARAMS: Dict[str, Any] = {
    "load_seconds": None,            # None: env FAKE_SGLANG_LOAD_SECONDS, else 2
    "dummy_load_seconds": None,      # None: load_seconds * dummy_load_fraction
    "dummy_load_fraction": 0.05,
    "capture_seconds": 0.5,          # cuda graph capture (skipped with --disable-cuda-graph)
    "shards": None,                  # None: *.safetensors files in the model dir, else 8
    "num_layers": None,              # None: config.json num_hidden_layers, else 48
    "per_stream_tok_s": 150.0,
    "total_tok_s": 2500.0,
    "prefill_tok_s": 50000.0,
    "answers": "ok",                 # ok | garbage | random
    "garbage_text": "!",             # token repeated by `garbage`
    "when": "first_forward",         # crash/nan/watchdog/hang/killed moment
    "requests": 0,                   # for when: after_requests / die_after_ready
    "rank": "all",                   # failing rank(s): all | int | list
    "traceback": None,               # full text replacing the generated traceback
    "frames": None,                  # text block of frames appended after sglang's own frames
    "error": None,                   # last line, e.g. "RuntimeError: ..."
    "delay_seconds": 0.0,            # extra delay before crash/kill at the moment
    "rank_exits": False,             # crash: the failing rank exits after its SIGQUIT (else stays, GPU wedged)
    "at": None,                      # killed/hang: start | load | capture | first_forward | after_requests
    "load_fraction": 0.5,            # killed/hang at load: how far through the shards
    "watchdog_timeout": None,        # None: --watchdog-timeout
    "watchdog_grace_seconds": 5.0,   # sleep between the watchdog log and SIGQUIT (real: 5 s)
    "nan_crash": None,               # nan: None = env SGLANG_ENABLE_NAN_LOGITS_CHECK decides; True: as if set
                                     # (device assert, dies like crash); False: as if unset (serves "!!!!")
    "fail_warmup": False,            # ready: warm-up /generate answers 500 -> "Initialization failed"
    "ignore_sigterm": False,
    "gpu_mem_fraction": None,        # None: --mem-fraction-static, else 0.85
    "model_type": None,              # None: config.json architectures[0], else Qwen3MoeForCausalLM
    "silent_busy_seconds": 0,        # real server only: the load works this long on the CPU and logs nothing
}


@dataclass
class Decision:
    behaviour: str = "ready"
    params: Dict[str, Any] = field(default_factory=lambda: dict(DEFAULT_PARAMS))
    rule_name: str = "builtin-default"
    rule_index: int = -1
    source: str = "builtin"
    arch: Optional[str] = None
    warnings: List[str] = field(default_factory=list)


def fakegpu_root() -> str:
    return os.environ.get("FAKEGPU_ROOT", "").rstrip("/")


def gpu_config() -> dict:
    try:
        with open(fakegpu_root() + "/etc/fakegpu/config.json", encoding="utf-8") as f:
            return json.load(f)
    except (OSError, ValueError):
        return {}


def arch_of(compute_cap: str | None) -> Optional[str]:
    if not compute_cap:
        return None
    try:
        major, minor = str(compute_cap).split(".", 1)
        return f"sm{int(major)}{int(minor)}"
    except ValueError:
        return None


def detect_arch(cfg: dict | None = None) -> Optional[str]:
    env = os.environ.get("FAKE_SGLANG_ARCH", "").strip()
    if env:
        return env
    cfg = gpu_config() if cfg is None else cfg
    return arch_of(cfg.get("compute_cap")) or cfg.get("arch")


def table_file() -> Optional[str]:
    p = os.environ.get("FAKE_SGLANG_BEHAVIOUR", "").strip() or DEFAULT_PATH
    return p if os.path.exists(p) else None


def load_rules(path: str) -> List[dict]:
    import yaml  # python3-yaml on the lab hosts

    with open(path, encoding="utf-8") as f:
        data = yaml.safe_load(f) or {}
    rules = data.get("rules", data) if isinstance(data, dict) else data
    if not isinstance(rules, list):
        raise ValueError(f"{path}: expected a list of rules under 'rules:'")
    return rules


def _norm(v: Any) -> Any:
    if isinstance(v, bool):
        return "true" if v else "false"
    if v is None:
        return None
    if isinstance(v, float) and v.is_integer():
        v = int(v)
    return str(v)


def _value_matches(want: Any, have: Any) -> bool:
    if isinstance(want, list):
        return any(_value_matches(w, have) for w in want)
    if isinstance(want, dict):
        if "not" in want:
            return not _value_matches(want["not"], have)
        if "contains" in want:
            return have is not None and str(want["contains"]) in str(have)
        return False
    if isinstance(have, list):
        return any(_norm(want) == _norm(h) for h in have)
    return _norm(want) == _norm(have)


def rule_matches(match: dict, args: Dict[str, Any], ctx: Dict[str, Any], warnings: List[str],
                 rule_name: str) -> bool:
    for key, want in (match or {}).items():
        if key == "env":
            for var, val in (want or {}).items():
                if not _value_matches(val, os.environ.get(var)):
                    return False
            continue
        if key in SPECIAL_MATCH_KEYS:
            have = ctx.get(key)
        else:
            dest = key.lstrip("-").replace("-", "_")
            if dest == "tp":
                dest = "tp_size"
            if dest not in args:
                warnings.append(f"behaviour rule {rule_name!r}: unknown match key {key!r} (no such server "
                                f"argument); rule skipped")
                return False
            have = args[dest]
        if not _value_matches(want, have):
            return False
    return True


def decide(args: Dict[str, Any], ctx: Dict[str, Any], path: str | None = None) -> Decision:
    path = path or table_file()
    d = Decision(arch=ctx.get("arch"))
    if not path:
        return d
    rules = load_rules(path)
    for i, rule in enumerate(rules):
        name = str(rule.get("name", f"rule-{i}"))
        if rule_matches(rule.get("match") or {}, args, ctx, d.warnings, name):
            beh = str(rule.get("behaviour", rule.get("behavior", "ready")))
            if beh not in BEHAVIOURS:
                d.warnings.append(f"behaviour rule {name!r}: unknown behaviour {beh!r}; using ready")
                beh = "ready"
            params = dict(DEFAULT_PARAMS)
            for k, v in (rule.get("params") or {}).items():
                if k not in DEFAULT_PARAMS:
                    d.warnings.append(f"behaviour rule {name!r}: unknown param {k!r} ignored")
                    continue
                params[k] = v
            if rule.get("ignore_sigterm"):
                params["ignore_sigterm"] = True
            if beh == "ignore_sigterm":
                beh, params["ignore_sigterm"] = "ready", True
            if beh == "die_after_ready":
                beh = "crash"
                params["when"] = "after_requests"
            d.behaviour, d.params, d.rule_name, d.rule_index, d.source = beh, params, name, i, path
            return d
    d.source = path
    return d
