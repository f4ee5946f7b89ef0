"""Version played by the fake (real sglang has sglang/version.py too)."""
import os

DEFAULT_VERSION = "0.5.23"


def _played_version() -> str:
    v = os.environ.get("FAKE_SGLANG_VERSION", "").strip()
    if v:
        return v
    path = os.environ.get("FAKE_SGLANG_VERSION_FILE", "/etc/fake-sglang/version")
    try:
        with open(path, encoding="utf-8") as f:
            v = f.read().strip()
    except OSError:
        v = ""
    return v or DEFAULT_VERSION


__version__ = _played_version()
