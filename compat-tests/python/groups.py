"""Helpers for test_groups.py: waiting, reading a group's committed offsets, group members in
child processes (group_worker.py), and idempotent producer streams.

Every wait here has a deadline; nothing loops forever.
"""
import json
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

from confluent_kafka import Consumer, KafkaException, Producer, TopicPartition

from helpers import deadline_after

RESULTS_DIR = Path(__file__).resolve().parent.parent / ".cache" / "results"
WORKER = Path(__file__).resolve().parent / "group_worker.py"


def wait_until(cond, timeout_s, what, tick=None, interval=0.05):
    """Call tick() then cond() until cond() is truthy; fail with `what()` after the deadline."""
    end = deadline_after(timeout_s)
    while True:
        if tick:
            tick()
        result = cond()
        if result:
            return result
        if time.monotonic() > end:
            raise AssertionError(f"not within {timeout_s}s: {what() if callable(what) else what}")
        time.sleep(interval)


class Committed:
    """OffsetFetch for one group through a confluent Consumer that never joins the group."""

    def __init__(self, bootstrap, group):
        self.consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": group,
                                  "enable.auto.commit": False})

    def get(self, topic, partitions, timeout_s=60, metadata=False):
        """{partition: offset or None}; retried (e.g. while the coordinator loads after a restart)."""
        end = deadline_after(timeout_s)
        while True:
            try:
                tps = self.consumer.committed([TopicPartition(topic, p) for p in range(partitions)],
                                              timeout=10)
                errors = [tp.error for tp in tps if tp.error]
                if not errors:
                    def value(tp):
                        off = tp.offset if tp.offset >= 0 else None
                        return (off, tp.metadata) if metadata else off
                    return {tp.partition: value(tp) for tp in tps}
                last = errors
            except KafkaException as e:
                last = e
            if time.monotonic() > end:
                raise AssertionError(f"OffsetFetch failed for {timeout_s}s: {last}")
            time.sleep(0.5)

    def close(self):
        self.consumer.close()


def record_result(broker, key, value):
    """Merge key: value into .cache/results/groups-<broker kind>.json (kept across tests)."""
    RESULTS_DIR.mkdir(parents=True, exist_ok=True)
    path = RESULTS_DIR / f"groups-{broker.kind}.json"
    data = json.loads(path.read_text()) if path.exists() else {}
    data[key] = {**value, "at": time.strftime("%Y-%m-%dT%H:%M:%S")}
    path.write_text(json.dumps(data, indent=2, sort_keys=True) + "\n")


# -- confluent-kafka: a group of child processes, one SIGKILLed ----------------------------------
class WorkerProc:
    """A group_worker.py child process and what it reported so far."""

    def __init__(self, name, bootstrap, group, topic, strategy, workdir):
        self.name = name
        self.path = workdir / f"{name}.jsonl"
        self.path.touch()
        self.err_path = workdir / f"{name}.stderr"
        with open(self.err_path, "wb") as err:
            self.proc = subprocess.Popen([sys.executable, str(WORKER), bootstrap, group, topic,
                                          strategy, str(self.path)],
                                         stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
                                         stderr=err)
        self.started = time.monotonic()
        self._file = open(self.path)
        self._buf = ""
        self.live = True
        self.assignments = []  # (t, [partitions]) in order
        self.records = []      # [partition, offset, value]
        self.batches = []      # (t, [[partition, offset, value], ..]) in order
        self.commit_errors = []
        self.errors = []
        self.closed = False
        self.held = None  # the batch recorded but not committed, after hold()

    @property
    def assignment(self):
        return set(self.assignments[-1][1]) if self.assignments else None

    def assignment_at(self, t):
        before = [parts for at, parts in self.assignments if at <= t]
        return set(before[-1]) if before else set()

    def poll(self):
        self._buf += self._file.read()
        *lines, self._buf = self._buf.split("\n")
        for line in lines:
            ev = json.loads(line)
            kind = ev["k"]
            if kind == "assignment":
                self.assignments.append((ev["t"], ev["parts"]))
            elif kind == "recs":
                self.records.extend(ev["r"])
                self.batches.append((ev["t"], ev["r"]))
            elif kind == "commit_error":
                self.commit_errors.append((ev["t"], ev["where"], ev["error"]))
            elif kind == "error":
                self.errors.append(ev["error"])
            elif kind == "closed":
                self.closed = True
            elif kind == "holding":
                self.held = ev["r"]
        if self.live and self.proc.poll() is not None:
            raise AssertionError(f"worker {self.name} exited with {self.proc.returncode} on its "
                                 f"own:\n{self.stderr_tail()}")

    def stderr_tail(self):
        return "\n".join(self.err_path.read_text(errors="replace").splitlines()[-30:])

    def hold(self):
        """Make the worker stop after recording its next batch, without committing it."""
        Path(f"{self.path}.hold").touch()

    def kill9(self):
        self.live = False
        self.proc.kill()
        self.proc.wait(10)
        self.poll()

    def terminate(self, timeout_s=30):
        """SIGTERM: the worker commits, closes (LeaveGroup) and exits 0."""
        self.live = False
        self.proc.send_signal(signal.SIGTERM)
        try:
            code = self.proc.wait(timeout_s)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            raise AssertionError(f"worker {self.name} did not exit within {timeout_s}s of SIGTERM:"
                                 f"\n{self.stderr_tail()}")
        self.poll()
        assert code == 0, f"worker {self.name} exited {code}:\n{self.stderr_tail()}"
        assert self.closed, f"worker {self.name} exited without closing its consumer"

    def stop_quietly(self):
        if self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait(10)


def owners_ok(workers, partitions, need_all_members=False, at=None):
    """Every partition owned by exactly one of `workers`; optionally every worker owns some."""
    owned = [w.assignment_at(at) if at is not None else (w.assignment or set()) for w in workers]
    if any(w.assignment is None for w in workers) and at is None:
        return False
    flat = [p for parts in owned for p in parts]
    if sorted(flat) != list(range(partitions)):
        return False
    return not need_all_members or all(owned)


def covered_since(workers, partitions, t0):
    """Seconds from t0 until the assignments reported by `workers` first covered every partition
    with one owner each, replayed from the workers' timestamps."""
    times = sorted({t for w in workers for t, _ in w.assignments if t > t0})
    for t in times:
        if owners_ok(workers, partitions, at=t):
            return t - t0
    return None


class KeyedStream(threading.Thread):
    """A default confluent producer with enable.idempotence=True writing `count` keyed records
    at about `rate` per second; value = the record number."""

    def __init__(self, bootstrap, topic, count, rate):
        super().__init__(daemon=True)
        self.producer = Producer({"bootstrap.servers": bootstrap, "enable.idempotence": True})
        self.topic, self.count, self.rate = topic, count, rate
        self.acked = {}   # n -> (partition, offset)
        self.failed = {}  # n -> error name
        self.exc = None

    def _cb(self, n):
        def cb(err, msg):
            if err is None:
                self.acked[n] = (msg.partition(), msg.offset())
            else:
                self.failed[n] = err.name()
        return cb

    def run(self):
        try:
            t0, chunk = time.monotonic(), 50
            for start in range(0, self.count, chunk):
                while (pause := t0 + start / self.rate - time.monotonic()) > 0:
                    self.producer.poll(pause)  # returns early when it serves a callback
                for n in range(start, min(start + chunk, self.count)):
                    while True:
                        try:
                            self.producer.produce(self.topic, key=f"key-{n % 997}".encode(),
                                                  value=str(n).encode(), on_delivery=self._cb(n))
                            break
                        except BufferError:
                            self.producer.poll(0.05)
                self.producer.poll(0)
            left = self.producer.flush(120)
            assert left == 0, f"{left} records undelivered 120 s after the last produce"
        except BaseException as e:  # reported by the test
            self.exc = e

    def finish(self, timeout_s=180):
        self.join(timeout_s)
        assert not self.is_alive(), "producer thread still running"
        if self.exc:
            raise self.exc
        assert not self.failed, f"{len(self.failed)} deliveries failed: " \
            f"{sorted(set(self.failed.values()))}"
        assert len(self.acked) == self.count


# -- the idempotent producer across kill -9 ------------------------------------------------------
class NumberedStream(threading.Thread):
    """confluent producer, enable.idempotence=True, otherwise defaults. Record n goes to
    partition n % parts with value n, so partition p must read p, p+parts, p+2*parts, ..."""

    def __init__(self, bootstrap, topic, parts):
        super().__init__(daemon=True)
        self.producer = Producer({"bootstrap.servers": bootstrap, "enable.idempotence": True})
        self.topic, self.parts = topic, parts
        self.acked, self.failed = {}, {}  # n -> offset / error name
        self.range, self.rate, self.exc = None, None, None
        self.sent = 0

    def _cb(self, n):
        def cb(err, msg):
            if err is None:
                self.acked[n] = msg.offset()
            else:
                self.failed[n] = err.name()
        return cb

    def produce(self, n):
        while True:
            try:
                self.producer.produce(self.topic, value=str(n).encode(), key=str(n).encode(),
                                      partition=n % self.parts, on_delivery=self._cb(n))
                self.sent += 1
                return
            except BufferError:
                self.producer.poll(0.05)

    def produce_now(self, first, count):
        for n in range(first, first + count):
            self.produce(n)
        assert self.producer.flush(60) == 0

    def stream(self, first, count, rate):
        self.range, self.rate = (first, first + count), rate
        self.start()

    def run(self):
        try:
            next_at = time.monotonic()
            first, stop = self.range
            for start in range(first, stop, 50):
                # At most 2000 unacknowledged, and no catching up after a stall: the stream
                # goes on at its rate after a restart instead of finishing in one burst.
                while self.sent - len(self.acked) - len(self.failed) > 2000:
                    self.producer.poll(0.05)
                next_at = max(next_at, time.monotonic())
                while (pause := next_at - time.monotonic()) > 0:
                    self.producer.poll(pause)  # returns early when it serves a callback
                next_at += 50 / self.rate
                for n in range(start, min(start + 50, stop)):
                    self.produce(n)
                self.producer.poll(0)
            left = self.producer.flush(150)
            assert left == 0, f"{left} records undelivered 150 s after the last produce"
        except BaseException as e:
            self.exc = e
