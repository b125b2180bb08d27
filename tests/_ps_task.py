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
import json
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
        secret: The job's shared secret (bytes), or None: no authentication.
        hello_timeout, idle_timeout, max_connections, chunk_bytes, max_inflight_bytes,
            stall_timeout: The server's limits (None: the core's defaults).
        auth_summary: Seconds between the summaries of refused authentications (None: 10).
        cluster: A cluster dict whose job digests HELLO compares (set_cluster_jobs), or None.
    """

    def __init__(self, port: int = 0, task: int = 0, max_payload: int | None = None,
                 cpu: int | None = None, nofile: int | None = None,
                 address_space_extra: int | None = None, secret: bytes | None = None,
                 hello_timeout: float | None = None, idle_timeout: float | None = None,
                 max_connections: int | None = None, chunk_bytes: int | None = None,
                 max_inflight_bytes: int | None = None,
                 stall_timeout: float | None = None,
                 auth_summary: float | None = None, cluster: dict | None = None) -> None:
        cmd = [sys.executable, __file__, "--port", str(port), "--task", str(task)]
        if max_payload is not None:
            cmd += ["--max-payload", str(max_payload)]
        if nofile is not None:
            cmd += ["--nofile", str(nofile)]
        if address_space_extra is not None:
            cmd += ["--address-space-extra", str(address_space_extra)]
        for flag, value in (("--hello-timeout", hello_timeout), ("--idle-timeout", idle_timeout),
                            ("--max-connections", max_connections),
                            ("--chunk-bytes", chunk_bytes),
                            ("--max-inflight-bytes", max_inflight_bytes),
                            ("--stall-timeout", stall_timeout),
                            ("--auth-summary", auth_summary)):
            if value is not None:
                cmd += [flag, str(value)]
        if cluster is not None:
            cmd += ["--cluster-json", json.dumps(cluster)]
        env = dict(os.environ)
        env["PYTHONPATH"] = SRC + os.pathsep + env.get("PYTHONPATH", "")
        env.pop("PSRT_TEST_SECRET", None)
        if secret is not None:
            env["PSRT_TEST_SECRET"] = secret.hex()  # not on the command line: ps shows it
        preexec = (lambda: os.sched_setaffinity(0, {cpu})) if cpu is not None else None
        self.proc = subprocess.Popen(cmd, stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                     stderr=subprocess.PIPE, env=env, text=True,
                                     preexec_fn=preexec)
        # stderr is drained by a thread, so a chatty ps never blocks on a full pipe.
        self._err: list[str] = []
        self._err_reader = threading.Thread(target=self._drain_stderr, daemon=True)
        self._err_reader.start()
        line = self.proc.stdout.readline()
        if not line.strip().isdigit():
            self.stop()
            raise RuntimeError(f"ps task did not start: {line!r} {self.stderr()}")
        self.port = int(line)
        self.address = f"127.0.0.1:{self.port}"

    def _drain_stderr(self) -> None:
        assert self.proc.stderr is not None
        for line in self.proc.stderr:
            self._err.append(line)

    def events(self) -> list[str]:
        """The server's events (failed authentication, closed idle peers, ...) so far."""
        return [line[len("EVENT "):].strip() for line in list(self._err)
                if line.startswith("EVENT ")]

    @property
    def pid(self) -> int:
        return self.proc.pid

    def alive(self) -> bool:
        return self.proc.poll() is None

    def stderr(self) -> str:
        if self.alive():
            return ""
        self._err_reader.join(5)
        return "".join(self._err)

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
        self._err_reader.join(5)  # EOF once the process is gone (a child may hold the pipe)
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
    parser.add_argument("--hello-timeout", type=float, default=10.0)
    parser.add_argument("--idle-timeout", type=float, default=600.0)
    parser.add_argument("--max-connections", type=int, default=1024)
    parser.add_argument("--chunk-bytes", type=int, default=512 << 10)
    parser.add_argument("--max-inflight-bytes", type=int, default=256 << 20)
    parser.add_argument("--stall-timeout", type=float, default=60.0)
    parser.add_argument("--auth-summary", type=float, default=10.0)
    parser.add_argument("--cluster-json", default=None)
    args = parser.parse_args()

    from psrt import _core

    max_payload = _core.DEFAULT_MAX_PAYLOAD if args.max_payload is None else args.max_payload
    secret = bytes.fromhex(os.environ.get("PSRT_TEST_SECRET", ""))
    server = _core.Server(args.host, args.port, args.job, args.task, max_payload, secret,
                          args.hello_timeout, args.idle_timeout, args.max_connections,
                          args.chunk_bytes, args.max_inflight_bytes, args.stall_timeout,
                          auth_summary_s=args.auth_summary)
    if args.cluster_json is not None:
        from psrt.distribute.cluster_spec import ClusterSpec
        from psrt.runtime import targets

        server.set_cluster_jobs(targets.cluster_jobs(ClusterSpec(json.loads(args.cluster_json))))
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
        for event in server.take_events():
            print("EVENT", event, file=sys.stderr, flush=True)
    server.stop()


if __name__ == "__main__":
    main()
