"""A real two-node Ray cluster on this machine for the tests, in a network namespace of its own.

Ray advertises a node's outward address even when told 127.0.0.1, so the cluster, and every
`doit` that joins it, runs in a new network namespace holding only a loopback interface: all of
its traffic stays on 127.0.0.1. A holder process keeps the namespace; `nsenter` puts each
process in it. Each node is a `ray start --block` in a process group of its own, so a test can
kill one node whole (SIGKILL) while the rest of the cluster lives on.
"""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path

BIN = Path(sys.executable).parent
# Brings the namespace's loopback interface up, then holds the namespace open.
_HOLDER = r"""
import fcntl, socket, struct, sys, time
s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
SIOCGIFFLAGS, SIOCSIFFLAGS, IFF_UP = 0x8913, 0x8914, 0x1
flags = struct.unpack("16sH", fcntl.ioctl(s, SIOCGIFFLAGS, struct.pack("16sH", b"lo", 0)))[1]
fcntl.ioctl(s, SIOCSIFFLAGS, struct.pack("16sH", b"lo", flags | IFF_UP))
print("up", flush=True)
sys.stdin.read()  # until the test closes it
"""


def _free_port(inside: list[str]) -> int:
    code = "import socket; s=socket.socket(); s.bind(('127.0.0.1', 0)); print(s.getsockname()[1])"
    out = subprocess.run([*inside, sys.executable, "-c", code], capture_output=True, text=True)
    return int(out.stdout)


class RayCluster:
    """A head (`head_cpus`) and a second node (`node_cpus`), up until `stop()`."""

    def __init__(
        self,
        head_cpus: int = 2,
        node_cpus: int = 2,
        head_env: dict[str, str] | None = None,
        node_env: dict[str, str] | None = None,
    ) -> None:
        self.tmp = Path(tempfile.mkdtemp(prefix="llmtt-ray-"))
        # Unprivileged users get a user namespace too, in which they may set up the network.
        user = [] if os.getuid() == 0 else ["--map-root-user"]
        self.holder = subprocess.Popen(
            ["unshare", "--net", *user, sys.executable, "-c", _HOLDER],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            text=True,
        )
        assert self.holder.stdout is not None
        assert self.holder.stdout.readline().strip() == "up", "no network namespace"
        enter_user = [] if os.getuid() == 0 else ["--user", "--preserve-credentials"]
        self.inside = ["nsenter", f"--target={self.holder.pid}", "--net", *enter_user, "--"]
        port = _free_port(self.inside)
        self.address = f"127.0.0.1:{port}"
        self.env = {
            **{k: v for k, v in os.environ.items() if not k.startswith(("LLMTT_", "RAY_"))},
            "RAY_USAGE_STATS_ENABLED": "0",
            "RAY_ADDRESS": self.address,
        }
        self.nodes: list[subprocess.Popen[bytes]] = []
        self.controller_path = self.env["PATH"]  # what `doit` joining the cluster is given
        self._start(
            "head",
            {"LLMTT_REMOTE_DIR": str(self.tmp / "remote-head"), **(head_env or {})},
            "--head",
            f"--port={port}",
            f"--num-cpus={head_cpus}",
            "--include-dashboard=false",
            f"--temp-dir={self.tmp / 'ray'}",
        )
        self._wait_nodes(1)
        self._start(
            "node",
            {"LLMTT_REMOTE_DIR": str(self.tmp / "remote-node"), **(node_env or {})},
            f"--address={self.address}",
            f"--num-cpus={node_cpus}",
        )
        self._wait_nodes(2)

    def _start(self, name: str, env: dict[str, str], *args: str) -> None:
        log = open(self.tmp / f"{name}.log", "wb")  # noqa: SIM115 - kept open for the node
        node = subprocess.Popen(
            [*self.inside, str(BIN / "ray"), "start", "--block", "--disable-usage-stats", *args],
            env={**self.env, **env},
            stdout=log,
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )
        self.nodes.append(node)

    def _wait_nodes(self, count: int, timeout: float = 120) -> None:
        code = (
            "import ray, sys, time\n"
            "ray.init(log_to_driver=False, logging_level='warning')\n"
            "end = time.time() + float(sys.argv[2])\n"
            "while sum(n['Alive'] for n in ray.nodes()) != int(sys.argv[1]):\n"
            "    assert time.time() < end, ray.nodes()\n"
            "    time.sleep(0.2)\n"
        )
        deadline = time.time() + timeout
        while True:
            done = self.run([sys.executable, "-c", code, str(count), "60"], timeout=timeout)
            if done.returncode == 0:
                return
            if time.time() > deadline:
                logs = "".join(
                    p.read_text(errors="replace")[-2000:] for p in self.tmp.glob("*.log")
                )
                raise AssertionError(f"the Ray cluster did not come up:\n{done.stderr}\n{logs}")
            time.sleep(1)

    def run(
        self, argv: list[str], cwd: Path | None = None, timeout: float = 600, **env: str
    ) -> subprocess.CompletedProcess[str]:
        """A command inside the cluster's network namespace."""
        return subprocess.run(
            [*self.inside, *argv],
            cwd=cwd,
            env={**self.env, **env},
            capture_output=True,
            text=True,
            timeout=timeout,
        )

    def popen(self, argv: list[str], cwd: Path, **env: str) -> subprocess.Popen[str]:
        """A command started inside the namespace, left running."""
        return subprocess.Popen(
            [*self.inside, *argv],
            cwd=cwd,
            env={**self.env, **env},
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )

    def node_pids(self, index: int) -> set[int]:
        """The processes of node `index`: its `ray start` and every descendant."""
        parents = {pid: int(stat.rsplit(")", 1)[1].split()[1]) for pid, stat in _proc("stat")}
        found = {self.nodes[index].pid}
        while more := {pid for pid, parent in parents.items() if parent in found} - found:
            found |= more
        return found

    def kill_node(self, index: int) -> None:
        """Kill node `index` whole, as a machine lost would be: every one of its processes."""
        _kill(self.node_pids(index))
        self.nodes[index].wait()

    def stop(self) -> None:
        """Every process of the cluster ended, the namespace released."""
        for index, node in enumerate(self.nodes):
            if node.poll() is None:
                self.kill_node(index)
        # Ray's own daemons may outlive their node: end whatever names this cluster's folder.
        _kill({pid for pid, cmdline in _proc("cmdline") if str(self.tmp) in cmdline})
        if self.holder.stdin is not None:
            self.holder.stdin.close()
        self.holder.wait(timeout=30)
        shutil.rmtree(self.tmp, ignore_errors=True)


def _proc(name: str) -> Iterator[tuple[int, str]]:
    """Each process's /proc/<pid>/<name> file."""
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            try:
                yield int(entry), Path(f"/proc/{entry}/{name}").read_text(errors="replace")
            except OSError:
                continue


def _kill(pids: set[int]) -> None:
    for pid in pids:
        try:
            os.kill(pid, signal.SIGKILL)
        except OSError:
            pass
