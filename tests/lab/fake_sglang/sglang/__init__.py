"""Fake SGLang for the llmserve.sglang lab (NOT the real sglang).

Plays one SGLang release: its command line (from the real parser's dump), its start-up log, its HTTP API
and the ways it dies, driven by a behaviour table (see tests/lab/behaviour/default.yml).
The version played: env ``FAKE_SGLANG_VERSION``, else the file ``/etc/fake-sglang/version``
(path overridable by ``FAKE_SGLANG_VERSION_FILE``), else 0.5.23.
"""
from sglang.version import __version__  # noqa: F401
