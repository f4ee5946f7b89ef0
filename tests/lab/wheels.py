# Copyright (c) llmserve.sglang contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""Tiny pure-Python wheels for the install test (NOT the real SGLang), built with the standard library.

    wheels.py DIR [--sglang 0.5.23 0.5.24] [--kernel 0.4.10]

* ``sglang-VERSION-py3-none-any.whl``: ``sglang/__init__.py`` with ``__version__`` and a ``sglang.srt.server_args``
  whose ``ServerArgs.add_cli_args`` adds a few of the real flags (the collection reads the flag table from it);
  it requires ``sglang-kernel==KERNEL`` and has an extra ``tracing`` that requires ``llmlab-tracing``;
* ``sglang_kernel-KERNEL-py3-none-any.whl``: the kernel package stand-in, ``sgl_kernel/__init__.py``
  (the real one is ``sglang-kernel`` with the module ``sgl_kernel`` too);
* ``llmlab_tracing-1.0-py3-none-any.whl``: what the ``tracing`` extra pulls in.
A few KB each: pip installs them in a second.
"""
import argparse
import base64
import hashlib
import os
import zipfile

SERVER_ARGS = '''"""A few of the real server's flags (the lab's install test wheel, not SGLang)."""
import argparse


class ServerArgs:
    @staticmethod
    def add_cli_args(parser):
        parser.add_argument("--model-path", type=str, required=True)
        parser.add_argument("--port", type=int, default=30000)
        parser.add_argument("--tp-size", type=int, default=1)
        parser.add_argument("--moe-runner-backend", type=str, default="auto",
                            choices=["auto", "triton", "flashinfer_cutlass"])
'''


def _record_line(name, data):
    digest = base64.urlsafe_b64encode(hashlib.sha256(data).digest()).rstrip(b"=").decode()
    return "%s,sha256=%s,%d" % (name, digest, len(data))


def build(folder, dist, version, files, requires=(), extras=()):
    """Write ``{dist}-{version}-py3-none-any.whl`` holding ``files`` ({path: text}); -> its path."""
    norm = dist.replace("-", "_")
    info = "%s-%s.dist-info" % (norm, version)
    meta = ["Metadata-Version: 2.1", "Name: %s" % dist, "Version: %s" % version,
            "Summary: llmserve lab test wheel, not the real package"]
    meta += ["Provides-Extra: %s" % e for e in extras]
    meta += ["Requires-Dist: %s" % r for r in requires]
    entries = dict((path, text.encode()) for path, text in files.items())
    entries[info + "/METADATA"] = ("\n".join(meta) + "\n").encode()
    entries[info + "/WHEEL"] = b"Wheel-Version: 1.0\nGenerator: llmserve-lab\nRoot-Is-Purelib: true\nTag: py3-none-any\n"
    record = [_record_line(name, data) for name, data in sorted(entries.items())] + [info + "/RECORD,,"]
    entries[info + "/RECORD"] = ("\n".join(record) + "\n").encode()
    path = os.path.join(folder, "%s-%s-py3-none-any.whl" % (norm, version))
    with zipfile.ZipFile(path, "w", zipfile.ZIP_DEFLATED) as whl:
        for name, data in sorted(entries.items()):
            whl.writestr(zipfile.ZipInfo(name, date_time=(2026, 1, 1, 0, 0, 0)), data)
    return path


def build_all(folder, sglang_versions=("0.5.23", "0.5.24"), kernel="0.4.10"):
    os.makedirs(folder, exist_ok=True)
    paths = [build(folder, "sglang-kernel", kernel, {"sgl_kernel/__init__.py": '__version__ = "%s"\n' % kernel}),
             build(folder, "llmlab-tracing", "1.0", {"llmlab_tracing/__init__.py": ""})]
    for version in sglang_versions:
        paths.append(build(folder, "sglang", version, {
            "sglang/__init__.py": '__version__ = "%s"\n' % version,
            "sglang/srt/__init__.py": "",
            "sglang/srt/server_args.py": SERVER_ARGS,
        }, requires=["sglang-kernel==%s" % kernel, 'llmlab-tracing>=1.0; extra == "tracing"'], extras=["tracing"]))
    return paths


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("folder")
    parser.add_argument("--sglang", nargs="+", default=["0.5.23", "0.5.24"])
    parser.add_argument("--kernel", default="0.4.10")
    args = parser.parse_args()
    for path in build_all(args.folder, args.sglang, args.kernel):
        print(path)


if __name__ == "__main__":
    main()
