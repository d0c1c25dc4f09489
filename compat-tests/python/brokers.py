"""The broker under test, as a process this harness controls (or an external address).

Three modes, chosen by the environment (see conftest.py):
  SLUICE_BIN=/path/to/sluice   start sluice per module/test on a free loopback port
  KAFKA_MANAGED=1              start Apache Kafka the same way (kafka/start-kafka.sh), to validate tests
  KAFKA_BOOTSTRAP=host:port    use an already running broker; tests that must kill the broker
                               or read its files are skipped with a reason
"""
import os
import random
import signal
import socket
import subprocess
import time
from pathlib import Path

KAFKA_DIR = Path(__file__).resolve().parent.parent / "kafka"
SLUICE_START_TIMEOUT_S = 20  # sluice should listen within a second; don't wait for a dud long
START_TIMEOUT_S = 60
STOP_TIMEOUT_S = 30


def free_port() -> int:
    """A bindable loopback port below the kernel's ephemeral range (32768+ on Linux): a client
    that keeps reconnecting to a stopped broker's ephemeral port can connect to itself and
    hold the port, which then fails the restart."""
    rnd = random.Random()
    for _ in range(200):
        port = rnd.randrange(20000, 32000)
        with socket.socket() as s:
            try:
                s.bind(("127.0.0.1", port))
                return port
            except OSError:
                continue
    raise RuntimeError("no free port in 20000-32000")


def port_open(port: int) -> bool:
    try:
        with socket.create_connection(("127.0.0.1", port), timeout=0.5):
            return True
    except OSError:
        return False


def pid_alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    # A zombie still answers kill(0); it is dead once no thread is left tearing down (the
    # thread-group leader turns Z while other threads still hold the sockets open).
    try:
        with open(f"/proc/{pid}/stat") as f:
            fields = f.read().rsplit(")", 1)[1].split()
        return fields[0] != "Z" or int(fields[17]) > 1
    except OSError:
        return False


class Broker:
    """One single-node broker. `overrides` are Kafka property names (key -> value)."""

    def __init__(self, kind, root=None, overrides=None, bootstrap=None, sluice_bin=None):
        self.kind = kind  # "sluice" | "kafka" | "external"
        self.root = Path(root) if root else None
        self.overrides = dict(overrides or {})
        self.sluice_bin = sluice_bin
        self._proc = None
        self._pid = None
        self.events = []  # human-readable history, shown when a test fails
        self._t0 = time.monotonic()
        if kind == "external":
            self.bootstrap = bootstrap
            self.port = int(bootstrap.rsplit(":", 1)[1])
        else:
            self.root.mkdir(parents=True, exist_ok=True)
            self.port = free_port()
            self.bootstrap = f"127.0.0.1:{self.port}"

    def _event(self, text):
        self.events.append(f"{time.monotonic() - self._t0:.1f}s {text}")

    @property
    def controllable(self) -> bool:
        return self.kind != "external"

    @property
    def log_dir(self) -> Path:
        """The broker's log.dirs: one folder per partition, `<topic>-<partition>`."""
        assert self.controllable, "an external broker's files are not reachable"
        return self.root / "data"

    @property
    def output_file(self) -> Path:
        return self.root / ("broker.out" if self.kind == "sluice" else "kafka.out")

    def partition_dir(self, topic: str, partition: int) -> Path:
        return self.log_dir / f"{topic}-{partition}"

    # -- lifecycle -------------------------------------------------------------------------
    def start(self):
        assert self.controllable and not self.is_running()
        self._event(f"start {self.kind} on {self.bootstrap}")
        if self.kind == "sluice":
            self._start_sluice()
        else:
            self._start_kafka()
        self._event("port open")
        return self

    def _start_sluice(self):
        self.log_dir.mkdir(parents=True, exist_ok=True)
        args = [self.sluice_bin,
                "--override", f"listeners=PLAINTEXT://127.0.0.1:{self.port}",
                "--override", f"log.dirs={self.log_dir}"]
        for k, v in self.overrides.items():
            args += ["--override", f"{k}={v}"]
        out = open(self.output_file, "ab")
        self._proc = subprocess.Popen(args, stdout=out, stderr=subprocess.STDOUT,
                                      stdin=subprocess.DEVNULL)
        out.close()
        self._pid = self._proc.pid
        deadline = time.monotonic() + SLUICE_START_TIMEOUT_S
        while not port_open(self.port):
            if self._proc.poll() is not None:
                raise RuntimeError(f"sluice exited with {self._proc.returncode} during startup:\n"
                                   + self.output_tail())
            if time.monotonic() > deadline:
                self.kill9()
                raise RuntimeError(f"sluice did not open port {self.port} in {SLUICE_START_TIMEOUT_S}s:\n"
                                   + self.output_tail())
            time.sleep(0.05)

    def _start_kafka(self):
        args = [str(KAFKA_DIR / "start-kafka.sh"), str(self.port), str(self.root)]
        args += [f"{k}={v}" for k, v in self.overrides.items()]
        res = subprocess.run(args, capture_output=True, text=True, timeout=START_TIMEOUT_S + 30)
        if res.returncode != 0:
            raise RuntimeError(f"start-kafka.sh failed ({res.returncode}):\n{res.stderr}")
        self._pid = int(res.stdout.strip().splitlines()[-1])

    def is_running(self) -> bool:
        if self._proc is not None:
            return self._proc.poll() is None
        return self._pid is not None and pid_alive(self._pid)

    def _wait_exit(self, timeout_s) -> bool:
        """Wait until the process is gone and its port no longer accepts connections."""
        deadline = time.monotonic() + timeout_s
        while self.is_running() or port_open(self.port):
            if time.monotonic() > deadline:
                return False
            time.sleep(0.05)
        return True

    def stop(self):
        """Graceful stop (SIGTERM). Raises if the broker needs SIGKILL to go away."""
        if not self.is_running():
            self._event("stop: was not running")
            return None
        os.kill(self._pid, signal.SIGTERM)
        graceful = self._wait_exit(STOP_TIMEOUT_S)
        if not graceful:
            self.kill9()
            raise AssertionError(f"{self.kind} did not exit within {STOP_TIMEOUT_S}s of SIGTERM")
        code = self._proc.returncode if self._proc else None
        self._event(f"stopped by SIGTERM, exit code {code}")
        self._forget_pid()
        return code

    def kill9(self):
        if self.is_running():
            os.kill(self._pid, signal.SIGKILL)
            if not self._wait_exit(10):
                raise AssertionError(f"pid {self._pid} survived SIGKILL for 10s")
        self._event("killed with SIGKILL")
        self._forget_pid()

    def _forget_pid(self):
        if self.kind == "kafka":
            (self.root / "kafka.pid").unlink(missing_ok=True)
        self._proc = None
        self._pid = None

    def restart(self):
        self.stop()
        return self.start()

    def output_tail(self, lines=60) -> str:
        if not self.controllable or not self.output_file.exists():
            return ""
        text = self.output_file.read_text(errors="replace").splitlines()
        return "\n".join(text[-lines:])

    def describe(self) -> str:
        return f"{self.kind} broker at {self.bootstrap}" + (f", root {self.root}" if self.root else "")
