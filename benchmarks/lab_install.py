"""Measure `make lab` from a clean clone: seconds to a JupyterLab that answers, and the venv's MB.

``python benchmarks/lab_install.py [--repo PATH] [--rev REV] [--warm]``

Clones the repository into a fresh temporary directory (committed files only: commit
first), runs ``make lab`` there (a fresh ``.venv``, the ``lab`` extra, the kernel) with
LAB_ARGS that start the server on a free port without a browser, and stops the clock
when the server answers HTTP on ``/lab``. Then it stops the server's process group and
reports the seconds and the size of ``.venv`` in MB (``du``). By default pip's cache is
off (``PIP_NO_CACHE_DIR=1``: a cold install, what a first clone pays); ``--warm`` lets
pip use ``~/.cache/pip``. Not part of ``make bench`` (it takes minutes and downloads);
the target is 2 minutes and 600 MB on the development machine.
"""

from __future__ import annotations

import argparse
import os
import resource
import signal
import socket
import subprocess
import sys
import tempfile
import time
import urllib.request
from pathlib import Path

TARGET_SECONDS = 120.0
TARGET_MB = 600.0


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _answers(url: str) -> bool:
    try:
        with urllib.request.urlopen(url, timeout=2) as response:
            return bool(response.status == 200)
    except OSError:
        return False


def _megabytes(path: Path) -> float:
    out = subprocess.run(["du", "-sk", str(path)], capture_output=True, text=True, check=True)
    return int(out.stdout.split()[0]) / 1024


def _children_cpu() -> float:
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    return usage.ru_utime + usage.ru_stime


def measure(repo: str, rev: str | None, warm: bool, timeout: float) -> tuple[float, float, float]:
    """Clone, ``make lab`` until the server answers, stop it.

    Returns:
        Seconds from ``make lab`` to a JupyterLab answering on ``/lab``, the CPU seconds
        ``make lab`` used (what the wall time approaches on an idle machine: on a shared
        one, it is the part that is not waiting for a core), and the venv's MB.
    """
    with tempfile.TemporaryDirectory(prefix="nbagent-lab-") as tmp:
        clone = Path(tmp) / "nbagent"
        subprocess.run(["git", "clone", "-q", "--no-hardlinks", repo, str(clone)], check=True)
        if rev:
            subprocess.run(["git", "-C", str(clone), "checkout", "-q", rev], check=True)
        port = _free_port()
        env = {k: v for k, v in os.environ.items() if not k.startswith(("VIRTUAL_ENV", "JUPYTER"))}
        env.pop("PYTHONPATH", None)
        if not warm:
            env["PIP_NO_CACHE_DIR"] = "1"
        lab_args = (
            f"--no-browser --ServerApp.port={port} --ServerApp.port_retries=0 "
            "--IdentityProvider.token= --ServerApp.password="
        )
        log = Path(tmp) / "make-lab.log"
        cpu = _children_cpu()
        start = time.perf_counter()
        with log.open("w") as out:
            proc = subprocess.Popen(
                ["make", "lab", f"LAB_ARGS={lab_args}"],
                cwd=clone,
                env=env,
                stdout=out,
                stderr=subprocess.STDOUT,
                start_new_session=True,
            )
            try:
                while not _answers(f"http://127.0.0.1:{port}/lab"):
                    if proc.poll() is not None:
                        sys.stderr.write(log.read_text()[-4000:])
                        raise SystemExit(f"make lab exited with {proc.returncode} before serving")
                    if time.perf_counter() - start > timeout:
                        raise SystemExit(f"no JupyterLab after {timeout:.0f} s")
                    time.sleep(0.5)
                seconds = time.perf_counter() - start
            finally:
                if proc.poll() is None:
                    os.killpg(proc.pid, signal.SIGTERM)
                    try:
                        proc.wait(timeout=30)
                    except subprocess.TimeoutExpired:
                        os.killpg(proc.pid, signal.SIGKILL)
                        proc.wait()
        return seconds, _children_cpu() - cpu, _megabytes(clone / ".venv")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python benchmarks/lab_install.py")
    parser.add_argument("--repo", default=str(Path(__file__).resolve().parent.parent))
    parser.add_argument("--rev", help="commit or branch to check out (default: the clone's HEAD)")
    parser.add_argument("--warm", action="store_true", help="let pip use its cache")
    parser.add_argument("--timeout", type=float, default=1200.0)
    args = parser.parse_args(argv)
    seconds, cpu, mb = measure(args.repo, args.rev, args.warm, args.timeout)
    cache = "warm pip cache" if args.warm else "cold: PIP_NO_CACHE_DIR=1"
    ok = seconds <= TARGET_SECONDS and mb <= TARGET_MB
    print(
        f"make lab ({args.rev or 'HEAD'}, {cache}): {seconds:.0f} s to a running JupyterLab "
        f"({cpu:.0f} CPU s), venv {mb:.0f} MB "
        f"(target {TARGET_SECONDS:.0f} s and {TARGET_MB:.0f} MB: {'met' if ok else 'missed'})"
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
