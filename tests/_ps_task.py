"""A bare ps task for transport tests: a ``_core.Server`` in its own process.

Run as a script it starts ``_core.Server(host, port, job, task, max_payload)``, prints the
bound port on one line, registers nothing and serves until its stdin closes or it gets
SIGTERM/SIGINT. While it waits it polls ``done_workers()`` and ``num_connections()`` as
``psrt.Server.join`` does, so state a bad peer left behind that Python cannot read (a job name
that is not UTF-8, say) ends this process and shows up in the tests as a dead ps task.

Imported, :class:`PsProcess` starts one and reaps it by PID.
"""

from __future__ import annotations

import argparse
import os
import resource
import signal
import subprocess
import sys
import threading
from pathlib import Path

import psrt  # noqa: E402

# The directory holding the psrt this test imported (src/ in a dev tree, site-packages when
# installed), so child processes import the same build.
SRC = str(Path(psrt.__file__).resolve().parents[1])


class PsProcess:
    """A ps task in a subprocess; ``address`` is "127.0.0.1:PORT" once it is up.

    Args:
        port: Port to listen on (0: the OS picks, the bound one is read back).
        task: The task index the server reports in HELLO.
        max_payload: The server's frame size limit in bytes (None: the core's default).
        cpu: Pin the process to this CPU (benchmarks), or None.
        nofile: Limit the process to this many file descriptors (RLIMIT_NOFILE), or None.
        address_space_extra: Limit the process's address space (RLIMIT_AS) to what it uses
            once started plus this many bytes, or None: allocations past it fail.
    """

    def __init__(self, port: int = 0, task: int = 0, max_payload: int | None = None,
                 cpu: int | None = None, nofile: int | None = None,
                 address_space_extra: int | None = None) -> None:
        cmd = [sys.executable, __file__, "--port", str(port), "--task", str(task)]
        if max_payload is not None:
            cmd += ["--max-payload", str(max_payload)]
        if nofile is not None:
            cmd += ["--nofile", str(nofile)]
        if address_space_extra is not None:
            cmd += ["--address-space-extra", str(address_space_extra)]
        env = dict(os.environ)
        env["PYTHONPATH"] = SRC + os.pathsep + env.get("PYTHONPATH", "")
        preexec = (lambda: os.sched_setaffinity(0, {cpu})) if cpu is not None else None
        self.proc = subprocess.Popen(cmd, stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                     stderr=subprocess.PIPE, env=env, text=True,
                                     preexec_fn=preexec)
        line = self.proc.stdout.readline()
        if not line.strip().isdigit():
            self.stop()
            raise RuntimeError(f"ps task did not start: {line!r} {self.stderr()}")
        self.port = int(line)
        self.address = f"127.0.0.1:{self.port}"

    @property
    def pid(self) -> int:
        return self.proc.pid

    def alive(self) -> bool:
        return self.proc.poll() is None

    def stderr(self) -> str:
        if self.alive() or self.proc.stderr is None:
            return ""
        return self.proc.stderr.read()

    def kill(self) -> None:
        """SIGKILL, as a crashed or lost machine: no socket is closed in an orderly way."""
        self.proc.kill()
        self.proc.wait(10)

    def stop(self) -> None:
        """Terminates (SIGTERM), waits, and kills if it has not gone within 5 s."""
        if self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(5)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait(5)
        for f in (self.proc.stdin, self.proc.stdout, self.proc.stderr):
            if f is not None:
                try:
                    f.close()
                except OSError:
                    pass


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--host", default="127.0.0.1")
    parser.add_argument("--port", type=int, default=0)
    parser.add_argument("--job", default="ps")
    parser.add_argument("--task", type=int, default=0)
    parser.add_argument("--max-payload", type=int, default=None)
    parser.add_argument("--nofile", type=int, default=None)
    parser.add_argument("--address-space-extra", type=int, default=None)
    args = parser.parse_args()

    from psrt import _core

    max_payload = _core.DEFAULT_MAX_PAYLOAD if args.max_payload is None else args.max_payload
    server = _core.Server(args.host, args.port, args.job, args.task, max_payload)
    stop = threading.Event()
    signal.signal(signal.SIGTERM, lambda *_: stop.set())
    signal.signal(signal.SIGINT, lambda *_: stop.set())

    def watch_stdin() -> None:
        sys.stdin.read()
        stop.set()

    threading.Thread(target=watch_stdin, daemon=True).start()
    if args.nofile is not None:
        resource.setrlimit(resource.RLIMIT_NOFILE, (args.nofile, args.nofile))
    if args.address_space_extra is not None:
        with open("/proc/self/status") as f:
            vm_kb = next(int(line.split()[1]) for line in f if line.startswith("VmSize:"))
        limit = vm_kb * 1024 + args.address_space_extra
        resource.setrlimit(resource.RLIMIT_AS, (limit, limit))
    print(server.port, flush=True)
    while not stop.is_set():
        server.wait(0.05)
        server.done_workers()
        server.num_connections()
    server.stop()


if __name__ == "__main__":
    main()
