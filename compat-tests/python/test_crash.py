"""(f) Crash tests: kill -9 while producing, and damaged segment files after kill -9.

Record number `seq` of partition p has key "p-seq" and a value derived from (p, seq), and is
always produced at the offset we expect it at, so any record read back can be checked on its
own: the record at offset o of partition p must be record (p, o). A valid log is then exactly
a contiguous prefix 0..n-1 of what was sent.
"""
import collections
import random
import threading
import time
import warnings

import pytest
from confluent_kafka import Producer

from helpers import consume_partitions, create_topic, deadline_after, unique, watermarks
from records import T0_MS

PARTITIONS = 3
ROUNDS = 4


def key(p, seq):
    return f"{p}-{seq}".encode()


def value(p, seq):
    return f"{p}:{seq}:".encode() + random.Random(p * 1_000_003 + seq).randbytes(50 + seq * 37 % 450)


def timestamp(seq):
    return T0_MS + 10 * seq


def verify_prefix(bootstrap, topic, partitions):
    """Read every partition up to its high watermark; assert it is a valid prefix. -> {p: n}"""
    wm = watermarks(bootstrap, topic, partitions)
    assert all(low == 0 for low, _ in wm.values()), f"log start offsets moved: {wm}"
    ends = {p: high for p, (_, high) in wm.items()}
    got = consume_partitions(bootstrap, topic, ends)
    for p, msgs in got.items():
        for m in msgs:
            o = m.offset()
            if (m.key(), m.value(), m.timestamp()[1]) != (key(p, o), value(p, o), timestamp(o)):
                raise AssertionError(f"{topic}/{p} offset {o}: not the record sent for that offset "
                                     f"(key {m.key()!r}, {len(m.value() or b'')} value bytes)")
    return ends


class Stream:
    """Produces records round-robin over the partitions, from next_seq on, in a thread.

    One request in flight: a non-idempotent producer with several in flight may reorder
    batches when one is retried (seen against Kafka right after a restart), and then the log
    is no longer a prefix of the sent sequence through no fault of the broker."""

    def __init__(self, bootstrap, topic, next_seq):
        self.producer = Producer({"bootstrap.servers": bootstrap, "acks": "all", "linger.ms": 2,
                                  "max.in.flight.requests.per.connection": 1,
                                  "message.timeout.ms": 30000, "log_level": 0})
        self.topic, self.seq = topic, dict(next_seq)
        self.acked, self.failed = [], 0  # acked: (p, seq, offset)
        self.errors = collections.Counter()  # delivery errors by name, for failure messages
        self.stop_flag = threading.Event()
        self.thread = threading.Thread(target=self._run, daemon=True)

    def _cb(self, p, seq):
        def cb(err, msg):
            if err is None:
                self.acked.append((p, seq, msg.offset()))
            else:
                self.failed += 1
                self.errors[err.name()] += 1
        return cb

    def _run(self):
        sent = 0
        while not self.stop_flag.is_set():
            if sent - len(self.acked) - self.failed > 20000:  # bound what is in flight
                self.producer.poll(0.01)
                continue
            for p in self.seq:
                s = self.seq[p]
                try:
                    self.producer.produce(self.topic, value=value(p, s), key=key(p, s), partition=p,
                                          timestamp=timestamp(s), on_delivery=self._cb(p, s))
                except BufferError:
                    self.producer.poll(0.01)
                    continue
                self.seq[p] = s + 1
                sent += 1
            self.producer.poll(0)

    def start(self):
        self.thread.start()

    def wait_acked(self, n, timeout_s=60):
        end = deadline_after(timeout_s)
        while len(self.acked) < n:
            assert self.thread.is_alive(), "producer thread died"
            assert time.monotonic() < end, f"only {len(self.acked)} of {n} records acked in {timeout_s}s"
            time.sleep(0.01)

    def abandon(self):
        """Stop producing and drop everything not yet acknowledged (no retry reaches a new broker)."""
        self.stop_flag.set()
        self.thread.join(10)
        assert not self.thread.is_alive()
        self.producer.purge(in_queue=True, in_flight=True)
        self.producer.flush(10)
        self.producer = None  # destroyed now: no client keeps reconnecting to the dead broker


@pytest.mark.control
@pytest.mark.parametrize("flush_every_message", [False, True], ids=["default-flush", "flush-every-message"])
def test_kill9_during_produce(broker_factory, flush_every_message):
    overrides = {"log.flush.interval.messages": 1} if flush_every_message else {}
    b = broker_factory(overrides)
    topic = unique("crash")
    create_topic(b.bootstrap, topic, PARTITIONS)
    rnd = random.Random(42)
    ends = {p: 0 for p in range(PARTITIONS)}
    lost_acked = 0
    for r in range(ROUNDS):
        stream = Stream(b.bootstrap, topic, ends)
        stream.start()
        stream.wait_acked(3000 + rnd.randrange(5000))
        time.sleep(rnd.random() * 0.2)
        b.kill9()  # mid-stream: the producer thread is still sending
        stream.abandon()
        b.start()
        try:
            new_ends = verify_prefix(b.bootstrap, topic, PARTITIONS)
        except AssertionError as e:
            raise AssertionError(f"round {r}: {e}\nproducer delivery errors: {dict(stream.errors)}")
        for p in ends:
            assert new_ends[p] >= ends[p], f"round {r}: partition {p} lost records verified before"
        wrong = [(p, s, o) for p, s, o in stream.acked if o != s]
        assert not wrong, f"round {r}: acked at unexpected offsets (partition, seq, offset): {wrong[:5]}"
        missing = [(p, s) for p, s, _ in stream.acked if s >= new_ends[p]]
        lost_acked += len(missing)
        print(f"round {r}: {len(stream.acked)} acked, {stream.failed} failed "
              f"{dict(stream.errors)}, {len(missing)} acked but lost; log ends {new_ends}")
        if flush_every_message:
            assert not missing, (f"round {r}: {len(missing)} acknowledged records missing after "
                                 f"restart with log.flush.interval.messages=1, e.g. {missing[:5]}")
        ends = new_ends
    assert sum(ends.values()) > ROUNDS * 3000 * 0.5, f"too little data survived: {ends}"
    if lost_acked:  # not asserted without flushing (the brief's contract), but worth seeing
        warnings.warn(f"{lost_acked} acknowledged records lost across {ROUNDS} kill -9; the page "
                      "cache survives kill -9, so Kafka keeps them even without fsync")
