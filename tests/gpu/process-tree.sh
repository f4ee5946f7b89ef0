#!/usr/bin/env bash
# Time how fast an SGLang-shaped CUDA process tree frees the GPU after SIGTERM, SIGKILL and gpu_reset
# (tests/gpu/process_tree.py measure), with a transcript. Usage:
#   tests/gpu/process-tree.sh OUTDIR [more process_tree.py measure options]
# Environment:
#   PROCESS_TREE_PYTHON  interpreter with PyTorch (default python3)
#   ANSIBLE              the ad-hoc `ansible` command for gpu_reset (default: the one on PATH; empty: no gpu_reset runs)
#   PROCESS_TREE_COMMIT  the commit to name in the transcript when the checkout is a copy without git
# Needs: nvidia-smi, PyTorch with CUDA, about 2 x 16 GiB (and 2 x 60 GiB for the large runs) free on the GPU,
# ansible-core >= 2.17 for the gpu_reset runs, fuser (psmisc) for the device-node checks. Only signals its own trees.
set -eu -o pipefail

here=$(cd "$(dirname "$0")" && pwd)
repo=$(cd "$here/../.." && pwd)
out=${1:?usage: $0 OUTDIR [options]}
shift
mkdir -p "$out"
out=$(cd "$out" && pwd)
python=${PROCESS_TREE_PYTHON:-python3}
ansible=${ANSIBLE-$(command -v ansible || true)}
export LC_ALL=${LC_ALL:-C.UTF-8}

tree=$(mktemp -d)
trap 'rm -rf "$tree"' EXIT
mkdir -p "$tree/ansible_collections/llmserve"
ln -s "$repo" "$tree/ansible_collections/llmserve/sglang"
export ANSIBLE_COLLECTIONS_PATH="$tree" ANSIBLE_CONFIG="$repo/ansible.cfg"
export ANSIBLE_LOCAL_TEMP="$tree/tmp" ANSIBLE_REMOTE_TEMP="$tree/tmp"

{
  echo "# process-tree $(date -u +%Y-%m-%dT%H:%M:%SZ) on $(uname -n) ($(uname -r))"
  echo "# repo $repo (${PROCESS_TREE_COMMIT:-$(git -C "$repo" rev-parse --short HEAD 2>/dev/null || echo 'no git')})"
  echo "# python: $("$python" -c 'import sys; print(sys.version.split()[0])'); ansible: ${ansible:-none} $( [ -n "$ansible" ] && "$ansible" --version 2>&1 | head -n 1)"
  echo "# gpu_reset.py sha256 $(sha256sum "$repo/plugins/modules/gpu_reset.py" | cut -c1-16), gpu_free.py $(sha256sum "$repo/plugins/module_utils/gpu_free.py" | cut -c1-16), gpu_holders.py $(sha256sum "$repo/plugins/module_utils/gpu_holders.py" | cut -c1-16)"
  echo "# command: $python tests/gpu/process_tree.py measure --out OUT --ansible ${ansible:-''} $*"
  echo
} | tee "$out/transcript.txt"

rc=0
PYTHONUNBUFFERED=1 "$python" "$here/process_tree.py" measure --out "$out" --ansible "$ansible" "$@" 2>&1 \
  | tee -a "$out/transcript.txt" || rc=$?
echo "# rc=$rc" | tee -a "$out/transcript.txt"
exit "$rc"
