"""Backpressure: 50 producers flood the broker while one consumer reads slowly.

The broker must slow the producers down rather than drop anything or grow without bound:
no producer sees an error other than a retriable timeout, every acknowledged record is
consumed back, and (sluice only) the broker's peak resident memory stays under the bound
ARCHITECTURE.md states for default settings (256 MiB). Kafka's JVM heap alone is larger, so
against Kafka only the no-loss half applies.
"""
import threading
import time

from confluent_kafka import Consumer, KafkaError

from helpers import consume_partitions, create_topic, deadline_after, make_producer, unique, watermarks

PRODUCERS = 50
PARTITIONS = 8
FLOOD_SECONDS = 15
VALUE_BYTES = 4096
RSS_BOUND_KIB = 256 * 1024


def rss_kib(pid, field):
    with open(f"/proc/{pid}/status") as f:
        for line in f:
            if line.startswith(field + ":"):
                return int(line.split()[1])
    raise AssertionError(f"{field} missing for pid {pid}")


def test_fifty_producers_and_a_slow_consumer(broker_factory):
    broker = broker_factory()
    topic = unique("flood")
    create_topic(broker.bootstrap, topic, PARTITIONS)
    acked, errors = set(), []
    lock = threading.Lock()

    def on_delivery(err, msg):
        with lock:
            if err is None:
                acked.add(msg.value())
            else:
                errors.append(err)

    producers = [make_producer(broker.bootstrap, **{"linger.ms": 5, "queue.buffering.max.kbytes": 4096,
                                                    "message.timeout.ms": 120000})
                 for _ in range(PRODUCERS)]
    stop = threading.Event()
    peak_rss = [0]

    def sample_memory():
        while not stop.is_set():
            peak_rss[0] = max(peak_rss[0], rss_kib(broker._pid, "VmRSS"))
            time.sleep(0.2)

    slow_seen = [0]

    def slow_consumer():
        c = Consumer({"bootstrap.servers": broker.bootstrap, "group.id": unique("slow"),
                      "auto.offset.reset": "earliest", "enable.auto.commit": False})
        c.subscribe([topic])
        try:
            while not stop.is_set():
                slow_seen[0] += len(c.consume(num_messages=100, timeout=0.5))
                time.sleep(0.05)
        finally:
            c.close()

    threads = [threading.Thread(target=sample_memory), threading.Thread(target=slow_consumer)]
    for t in threads:
        t.start()
    sent = 0
    end = time.monotonic() + FLOOD_SECONDS
    pad = b"x" * VALUE_BYTES
    try:
        while time.monotonic() < end:
            for i, p in enumerate(producers):
                try:
                    p.produce(topic, key=str(sent).encode(), value=b"%d-%d-" % (i, sent) + pad,
                              on_delivery=on_delivery)
                    sent += 1
                except BufferError:
                    p.poll(0.01)  # the client's buffer is full: this is the backpressure
                p.poll(0)
        flush_deadline = deadline_after(180)
        for p in producers:
            remaining = p.flush(max(1.0, flush_deadline - time.monotonic()))
            assert remaining == 0, f"{remaining} records still unacknowledged after the flush deadline"
    finally:
        stop.set()
        for t in threads:
            t.join(timeout=30)

    not_timeouts = [e for e in errors if e.code() != KafkaError._MSG_TIMED_OUT]
    assert not not_timeouts, f"producers saw errors other than timeouts: {not_timeouts[:5]}"
    assert len(acked) > PRODUCERS * 100, f"only {len(acked)} records were acknowledged"
    ends = {p: high for p, (_, high) in watermarks(broker.bootstrap, topic, PARTITIONS).items()}
    got = consume_partitions(broker.bootstrap, topic, ends, timeout_s=300)
    consumed = {m.value() for msgs in got.values() for m in msgs}
    missing = acked - consumed
    assert not missing, f"{len(missing)} acknowledged records were not consumed back"
    print(f"\nflood: {len(acked)} acked of {sent} sent, {len(errors)} timeouts, slow consumer read "
          f"{slow_seen[0]}, broker peak RSS {peak_rss[0] / 1024:.0f} MiB "
          f"(VmHWM {rss_kib(broker._pid, 'VmHWM') / 1024:.0f} MiB)")
    if broker.kind == "sluice":
        hwm = rss_kib(broker._pid, "VmHWM")
        assert hwm < RSS_BOUND_KIB, f"sluice peak RSS {hwm / 1024:.0f} MiB exceeds {RSS_BOUND_KIB // 1024} MiB"
