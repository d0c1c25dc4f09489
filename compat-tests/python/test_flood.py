"""Backpressure, with real producers.

The flood: 50 producers flood the broker while one consumer reads slowly and a dozen others read
the whole topic as fast as they can with large fetches. The broker must slow the producers down
rather than drop anything or grow without bound: no producer sees an error of any kind (their
delivery timeouts outlast the test, so nothing even times out), every acknowledged record is
consumed back, and (sluice only) the broker reports that its request memory pool ran out and its
peak resident memory stays within the bound ARCHITECTURE.md ("Memory bounds") states for this
configuration. Kafka's JVM heap alone is larger, so against Kafka the memory half does not apply.
Whether the producers' own queues also fill (BufferError) in the flood depends on whether the
Python loop outruns the broker on the machine at hand, so the flood only reports it.

The hold-back: with all of `queued.max.request.bytes` taken by one unfinished request, the broker
reads no other socket. A producer's requests then wait in TCP, its local queue fills and produce()
raises BufferError; once the memory is free, every record is delivered, none lost, none failed.
"""
import os
import re
import socket
import struct
import threading
import time

from confluent_kafka import Consumer, TopicPartition

from helpers import consume_partitions, create_topic, deadline_after, make_producer, unique, watermarks

PRODUCERS = 50
FAST_CONSUMERS = 12
PARTITIONS = 8
FLOOD_SECONDS = 15
VALUE_BYTES = 4096
# A broker made slower by an fsync after every append, with a request memory pool smaller than
# what the producers keep in flight (50 producers, up to 5 requests of up to 1 MB each): their
# first requests, sent together once metadata arrives, are certain to exhaust it. (On a machine
# whose disk syncs fast, the broker keeps up with the Python loop after that opening burst.)
QUEUED_MAX_REQUEST_BYTES = 1024 * 1024
SLOW_BROKER = {"log.flush.interval.messages": 1,
               "queued.max.request.bytes": QUEUED_MAX_REQUEST_BYTES,
               "socket.request.max.bytes": QUEUED_MAX_REQUEST_BYTES}
# ARCHITECTURE.md, "Memory bounds": RSS <= 64 MiB + queued.max.request.bytes + 64 KiB per
# connection + the index pages touched (20 B per 4 KiB of records, 5 MiB per GiB). Here: 1 MiB
# of requests, the sockets counted at their peak (about 80: 5 MiB), and under 1 GiB of records
# (asserted): about 75 MiB. The peak measured on sluice is 35-50 MiB.
FIXED_KIB, PER_CONNECTION_KIB, INDEX_PAGES_KIB, MAX_RECORD_BYTES = 64 * 1024, 64, 5 * 1024, 1 << 30
# Longer than the whole test: a record (or a request waiting for the broker to read it) that
# cannot be delivered at once waits, never expires, so any delivery failure is a real one.
DELIVERY_TIMEOUT_MS = 600_000
# The hold-back: a producer with a small local queue, held back by a broker that reads nothing.
HOLD_BACK_QUEUE_KIB = 256
HOLD_BACK_SECONDS = 1.0
EXHAUSTED = re.compile(r"request memory exhausted \(queued\.max\.request\.bytes\)")


def rss_kib(pid, field):
    with open(f"/proc/{pid}/status") as f:
        for line in f:
            if line.startswith(field + ":"):
                return int(line.split()[1])
    raise AssertionError(f"{field} missing for pid {pid}")


class Outcomes:
    """What the clients saw, from librdkafka's threads (callbacks) and the test's threads."""

    def __init__(self):
        self.lock = threading.Lock()
        self.acked, self.failed, self.client_errors = set(), [], []
        self.buffer_full = 0

    def on_delivery(self, err, msg):
        with self.lock:
            if err is None:
                self.acked.add(msg.value())
            else:
                self.failed.append(err)

    def on_error(self, err):
        with self.lock:
            self.client_errors.append(err)


def fast_consumer(bootstrap, topic, outcomes, stop, counts, i):
    """Reads every partition from the start, as fast as it can, with large fetches."""
    c = Consumer({"bootstrap.servers": bootstrap, "group.id": unique("fast"),
                  "enable.auto.commit": False, "error_cb": outcomes.on_error,
                  "fetch.max.bytes": 32 * 1024 * 1024, "max.partition.fetch.bytes": 8 * 1024 * 1024,
                  "receive.message.max.bytes": 34 * 1024 * 1024,
                  "queued.max.messages.kbytes": 32 * 1024})
    c.assign([TopicPartition(topic, p, 0) for p in range(PARTITIONS)])
    try:
        while not stop.is_set():
            for m in c.consume(num_messages=10000, timeout=0.5):
                if m.error():
                    outcomes.on_error(m.error())
                else:
                    counts[i] += len(m.value())
    finally:
        c.close()


def open_sockets(pid):
    """The broker's sockets: its connections and its listener."""
    count = 0
    for fd in os.listdir(f"/proc/{pid}/fd"):
        try:
            count += os.readlink(f"/proc/{pid}/fd/{fd}").startswith("socket:")
        except FileNotFoundError:
            pass  # closed meanwhile
    return count


def test_fifty_producers_and_a_slow_consumer(broker_factory):
    broker = broker_factory(SLOW_BROKER)
    topic = unique("flood")
    create_topic(broker.bootstrap, topic, PARTITIONS)
    out = Outcomes()
    producers = [make_producer(broker.bootstrap, **{
        "linger.ms": 5, "queue.buffering.max.kbytes": 4096, "error_cb": out.on_error,
        "message.timeout.ms": DELIVERY_TIMEOUT_MS, "request.timeout.ms": DELIVERY_TIMEOUT_MS})
        for _ in range(PRODUCERS)]
    stop = threading.Event()
    peak_rss, peak_sockets = [0], [0]

    def sample_memory():
        while not stop.is_set():
            peak_rss[0] = max(peak_rss[0], rss_kib(broker._pid, "VmRSS"))
            peak_sockets[0] = max(peak_sockets[0], open_sockets(broker._pid))
            time.sleep(0.2)

    slow_seen = [0]

    def slow_consumer():
        c = Consumer({"bootstrap.servers": broker.bootstrap, "group.id": unique("slow"),
                      "auto.offset.reset": "earliest", "enable.auto.commit": False,
                      "error_cb": out.on_error})
        c.subscribe([topic])
        try:
            while not stop.is_set():
                slow_seen[0] += len(c.consume(num_messages=100, timeout=0.5))
                time.sleep(0.05)
        finally:
            c.close()

    fast_bytes = [0] * FAST_CONSUMERS
    threads = [threading.Thread(target=sample_memory), threading.Thread(target=slow_consumer)]
    threads += [threading.Thread(target=fast_consumer, args=(broker.bootstrap, topic, out, stop, fast_bytes, i))
                for i in range(FAST_CONSUMERS)]
    for t in threads:
        t.start()
    sent = 0
    start = time.monotonic()
    end = start + FLOOD_SECONDS
    pad = b"x" * VALUE_BYTES
    try:
        while time.monotonic() < end:
            for i, p in enumerate(producers):
                try:
                    p.produce(topic, key=str(sent).encode(), value=b"%d-%d-" % (i, sent) + pad,
                              on_delivery=out.on_delivery)
                    sent += 1
                except BufferError:
                    out.buffer_full += 1  # the client's queue is full: the broker holds it back
                    p.poll(0.01)
                p.poll(0)
        flush_deadline = deadline_after(180)
        for p in producers:
            remaining = p.flush(max(1.0, flush_deadline - time.monotonic()))
            assert remaining == 0, f"{remaining} records still unacknowledged after the flush deadline"
        flushed_s = time.monotonic() - start
    finally:
        stop.set()
        for t in threads:
            t.join(timeout=30)

    print(f"\nflood: {sent} sent, {len(out.acked)} acked in {flushed_s:.1f} s, {out.buffer_full} "
          f"BufferErrors, slow consumer read {slow_seen[0]}, fast consumers read "
          f"{[b >> 20 for b in fast_bytes]} MiB, client errors {out.client_errors[:5]}")
    assert not out.failed, f"{len(out.failed)} deliveries failed, first {out.failed[:5]}"
    assert not out.client_errors, f"clients saw errors: {out.client_errors[:5]}"
    assert len(out.acked) == sent, f"{sent} sent, {len(out.acked)} acknowledged"
    # They read concurrently with the flood; each kept up with at least half of it (in practice all).
    value_bytes = sum(len(v) for v in out.acked)
    assert all(b >= value_bytes // 2 for b in fast_bytes), (
        f"fast consumers read {fast_bytes} B of {value_bytes} B of values")

    ends = {p: high for p, (_, high) in watermarks(broker.bootstrap, topic, PARTITIONS).items()}
    got = consume_partitions(broker.bootstrap, topic, ends, timeout_s=300)
    consumed = {m.value() for msgs in got.values() for m in msgs}
    missing = out.acked - consumed
    assert not missing, f"{len(missing)} acknowledged records were not consumed back"

    record_bytes = len(out.acked) * VALUE_BYTES
    bound_kib = (FIXED_KIB + QUEUED_MAX_REQUEST_BYTES // 1024 + PER_CONNECTION_KIB * peak_sockets[0]
                 + INDEX_PAGES_KIB)
    print(f"flood: broker peak RSS {peak_rss[0] / 1024:.0f} MiB (VmHWM "
          f"{rss_kib(broker._pid, 'VmHWM') / 1024:.0f} MiB), {peak_sockets[0]} sockets at most, "
          f"{record_bytes >> 20} MiB of records; bound {bound_kib / 1024:.0f} MiB")
    if broker.kind == "sluice":
        assert record_bytes < MAX_RECORD_BYTES, "more records than the index-page allowance covers"
        hwm = rss_kib(broker._pid, "VmHWM")
        assert hwm <= bound_kib, f"sluice peak RSS {hwm / 1024:.0f} MiB exceeds {bound_kib / 1024:.0f} MiB"
        log = broker.output_file.read_text(errors="replace")
        assert EXHAUSTED.search(log), "the broker never ran out of request memory: no backpressure from it"


def take_request_memory(bootstrap, frame_bytes):
    """A connection that announces a request of `frame_bytes` and sends only its header: the
    broker sets that much request memory aside and waits for the rest, which never comes."""
    host, port = bootstrap.rsplit(":", 1)
    sock = socket.create_connection((host, int(port)), timeout=10)
    sock.sendall(struct.pack(">ihhih", frame_bytes, 18, 0, 1, -1))  # ApiVersions v0, no client id
    return sock


def test_out_of_request_memory_holds_producers_back(broker_factory):
    broker = broker_factory({"queued.max.request.bytes": QUEUED_MAX_REQUEST_BYTES,
                             "socket.request.max.bytes": QUEUED_MAX_REQUEST_BYTES})
    topic = unique("held")
    create_topic(broker.bootstrap, topic, 1)
    out = Outcomes()
    producer = make_producer(broker.bootstrap, **{
        "queue.buffering.max.kbytes": HOLD_BACK_QUEUE_KIB, "error_cb": out.on_error,
        "message.timeout.ms": DELIVERY_TIMEOUT_MS, "request.timeout.ms": DELIVERY_TIMEOUT_MS})
    producer.produce(topic, value=b"before", on_delivery=out.on_delivery)
    assert producer.flush(30) == 0, "the first record was not acknowledged"

    hog = take_request_memory(broker.bootstrap, QUEUED_MAX_REQUEST_BYTES)
    try:
        time.sleep(0.5)  # the broker reads the size prefix and sets the whole pool aside
        sent, held_back = 1, False
        pad = b"x" * VALUE_BYTES
        # Four times what the local queue holds: a broker that kept reading would drain it.
        for i in range(4 * HOLD_BACK_QUEUE_KIB * 1024 // VALUE_BYTES):
            try:
                producer.produce(topic, value=b"%d-" % i + pad, on_delivery=out.on_delivery)
                sent += 1
            except BufferError:
                held_back = True  # the queue is full: produce() pushes back on the application
                break
            producer.poll(0.005)
        assert held_back, f"{sent} records queued without the producer's queue filling"
        producer.poll(HOLD_BACK_SECONDS)
        with out.lock:
            acked_while_held = len(out.acked)
        assert acked_while_held == 1, (
            f"{acked_while_held - 1} records acknowledged while no request memory was free")
    finally:
        hog.close()  # the unfinished request is dropped and its memory freed

    assert producer.flush(60) == 0, "records still unacknowledged once the memory was free"
    assert not out.failed, f"{len(out.failed)} deliveries failed, first {out.failed[:5]}"
    assert not out.client_errors, f"the producer saw errors: {out.client_errors[:5]}"
    assert len(out.acked) == sent, f"{sent} sent, {len(out.acked)} acknowledged"
    got = consume_partitions(broker.bootstrap, topic, {0: sent})
    assert {m.value() for m in got[0]} == out.acked, "what was consumed is not what was acknowledged"
