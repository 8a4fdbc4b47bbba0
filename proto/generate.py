"""Generate the CRI Python stubs in node/cri/pb/ from proto/runtime/v1/api.proto.

Usage::

    python proto/generate.py          # (re)write node/cri/pb/api_pb2{.py,.pyi,_grpc.py}
    python proto/generate.py --check  # exit 1 if the files in node/cri/pb/ are stale or missing

protoc runs with ``-I proto`` so the descriptor keeps its protocol path
(``runtime/v1/api.proto``); protoc therefore emits modules named
``runtime.v1.api_pb2``. The outputs are moved flat into ``node/cri/pb/`` and
rewritten so that they import and name themselves ``node.cri.pb.api_pb2``.
Only the standard library and grpc_tools are used, and the output depends only
on the .proto file and the installed grpcio-tools version.
"""

from __future__ import annotations

import argparse
import subprocess
import sys
import tempfile
from pathlib import Path

REPO_ROOT = Path(__file__).resolve().parent.parent
PROTO_ROOT = REPO_ROOT / "proto"
PROTO_FILE = "runtime/v1/api.proto"
OUT_DIR = REPO_ROOT / "node" / "cri" / "pb"

# The module path protoc derives from PROTO_FILE, and the one we install as.
PROTOC_MODULE = "runtime.v1.api_pb2"
TARGET_PACKAGE = "node.cri.pb"
TARGET_MODULE = f"{TARGET_PACKAGE}.api_pb2"

GENERATED_FILES = ("api_pb2.py", "api_pb2.pyi", "api_pb2_grpc.py")

# Exact-line rewrites applied to protoc's output, per file: (old, new).
# Each `old` must occur exactly once, so a grpcio-tools change that alters the
# shape of the output fails loudly instead of producing a broken import.
_REWRITES: dict[str, tuple[tuple[str, str], ...]] = {
    "api_pb2.py": (
        (
            f"_builder.BuildTopDescriptorsAndMessages(DESCRIPTOR, '{PROTOC_MODULE}', _globals)",
            f"_builder.BuildTopDescriptorsAndMessages(DESCRIPTOR, '{TARGET_MODULE}', _globals)",
        ),
    ),
    "api_pb2_grpc.py": (
        (
            "from runtime.v1 import api_pb2 as runtime_dot_v1_dot_api__pb2",
            f"from {TARGET_PACKAGE} import api_pb2 as runtime_dot_v1_dot_api__pb2",
        ),
    ),
    "api_pb2.pyi": (),
}


class GenerateError(Exception):
    """protoc failed, or its output did not have the expected shape."""


def _run_protoc(out_root: Path) -> None:
    """Run grpc_tools.protoc on PROTO_FILE, writing the package tree under out_root."""
    cmd = [
        sys.executable,
        "-m",
        "grpc_tools.protoc",
        f"--proto_path={PROTO_ROOT}",
        f"--python_out={out_root}",
        f"--pyi_out={out_root}",
        f"--grpc_python_out={out_root}",
        str(PROTO_ROOT / PROTO_FILE),
    ]
    proc = subprocess.run(cmd, capture_output=True, text=True, check=False)
    if proc.returncode != 0:
        raise GenerateError(
            f"protoc failed (exit {proc.returncode}):\n{proc.stderr.strip() or proc.stdout.strip()}"
        )


def _rewrite(name: str, text: str) -> str:
    """Apply the import/module-name rewrites for one generated file."""
    lines = text.split("\n")
    for old, new in _REWRITES[name]:
        hits = [i for i, line in enumerate(lines) if line == old]
        if len(hits) != 1:
            raise GenerateError(
                f"{name}: expected exactly one line {old!r} in protoc output, found {len(hits)}"
            )
        lines[hits[0]] = new
    out = "\n".join(lines)
    if PROTOC_MODULE in out or "from runtime.v1 import" in out or "import runtime." in out:
        raise GenerateError(f"{name}: protoc output still refers to {PROTOC_MODULE!r}")
    return out


def generate(dest: Path) -> dict[str, bytes]:
    """Generate the stubs and write them flat into dest; return name -> contents."""
    dest.mkdir(parents=True, exist_ok=True)
    contents: dict[str, bytes] = {}
    with tempfile.TemporaryDirectory(prefix="kubelab-protoc-") as tmp:
        tmp_root = Path(tmp)
        _run_protoc(tmp_root)
        produced_dir = tmp_root / Path(PROTO_FILE).parent
        for name in GENERATED_FILES:
            produced = produced_dir / name
            if not produced.is_file():
                raise GenerateError(f"protoc did not produce {name}")
            text = produced.read_bytes().decode("utf-8")
            contents[name] = _rewrite(name, text).encode("utf-8")
    for name, data in contents.items():
        target = dest / name
        if not target.is_file() or target.read_bytes() != data:
            target.write_bytes(data)
    return contents


def stale_files(out_dir: Path = OUT_DIR) -> list[str]:
    """Regenerate into a temp dir; list the files in out_dir that differ or are missing."""
    with tempfile.TemporaryDirectory(prefix="kubelab-proto-check-") as tmp:
        fresh = generate(Path(tmp))
    stale: list[str] = []
    for name, data in fresh.items():
        installed = out_dir / name
        if not installed.is_file():
            stale.append(f"{_display(installed)} (missing)")
        elif installed.read_bytes() != data:
            stale.append(f"{_display(installed)} (differs)")
    return stale


def _display(path: Path) -> str:
    try:
        return str(path.relative_to(REPO_ROOT))
    except ValueError:
        return str(path)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        description=f"Generate the CRI stubs in {_display(OUT_DIR)} from proto/{PROTO_FILE}."
    )
    parser.add_argument(
        "--check",
        action="store_true",
        help="do not write; exit 1 if the checked-in generated files are stale or missing",
    )
    args = parser.parse_args(argv)
    try:
        if args.check:
            stale = stale_files()
            if stale:
                print(
                    "CRI stubs are stale; run `python proto/generate.py`:\n  " + "\n  ".join(stale),
                    file=sys.stderr,
                )
                return 1
            print(f"CRI stubs in {_display(OUT_DIR)} are up to date")
            return 0
        generate(OUT_DIR)
    except GenerateError as exc:
        print(f"proto/generate.py: {exc}", file=sys.stderr)
        return 2
    print(f"generated {', '.join(GENERATED_FILES)} in {_display(OUT_DIR)}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
