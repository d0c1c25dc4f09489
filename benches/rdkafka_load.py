#!/usr/bin/env python3
"""librdkafka load generator for the sluice-vs-Kafka benchmarks (runs on confluent-kafka).

Every sub-command prints one JSON object on stdout; diagnostics go to stderr.

  create     --bootstrap B --topic T --partitions P
  produce    --bootstrap B --topic T --count N --size S --compression none|lz4
  txn-produce --bootstrap B --topic T --count N --per-txn K   transactions of K records each
  consume    --bootstrap B --topic T --count N [--passes K] [--isolation read_committed|...]
  latency    --bootstrap B --topic T --rate R --seconds D --size S
  firstack   --bootstrap B --topic T --deadline SECONDS

Payloads: a pool of 1,024 distinct values; each is half random bytes and half a repeated
16-byte pattern, so lz4 shrinks a batch to roughly half (Kafka's ProducerPerformance instead
sends one random A-Z payload for every record).
"""

import argparse
import json
import multiprocessing as mp
import os
import socket
import struct
import sys
import time

from confluent_kafka import Consumer, KafkaException, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic


def log(*args):
    print("rdkafka_load:", *args, file=sys.stderr, flush=True)


def payload_pool(size, n=1024):
    rnd = os.urandom(size // 2 * n)
    pat = (b"sluice-benchmark" * (size // 16 + 1))[: size - size // 2]
    return [rnd[i * (size // 2):(i + 1) * (size // 2)] + pat for i in range(n)]


def percentiles(values, ps=(50, 99, 99.9)):
    if not values:
        return {str(p): None for p in ps}
    v = sorted(values)
    out = {}
    for p in ps:
        k = min(len(v) - 1, max(0, int(round(p / 100.0 * len(v) + 0.5)) - 1))
        out[str(p)] = v[k]
    return out


def cmd_create(a):
    admin = AdminClient({"bootstrap.servers": a.bootstrap})
    fs = admin.create_topics([NewTopic(a.topic, a.partitions, 1)], operation_timeout=30,
                             request_timeout=30)
    for _, f in fs.items():
        f.result(timeout=60)
    # Wait until metadata shows every partition with a leader.
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        md = admin.list_topics(topic=a.topic, timeout=10)
        t = md.topics.get(a.topic)
        if t and t.error is None and len(t.partitions) == a.partitions and all(
                p.leader >= 0 for p in t.partitions.values()):
            print(json.dumps({"topic": a.topic, "partitions": a.partitions}))
            return 0
        time.sleep(0.05)
    raise SystemExit(f"topic {a.topic} has no leaders after 60 s")


def cmd_produce(a):
    pool = payload_pool(a.size)
    errors = []
    acked = [0]

    def on_delivery(err, _msg):
        if err is not None:
            errors.append(str(err))
        else:
            acked[0] += 1

    p = Producer({
        "bootstrap.servers": a.bootstrap,
        "acks": "all",
        "compression.codec": a.compression,
        "queue.buffering.max.messages": 200000,
        "message.timeout.ms": 120000,
    })
    # Connect and fetch metadata before the clock starts.
    p.list_topics(topic=a.topic, timeout=30)
    n = a.count
    npool = len(pool)
    produce = p.produce
    t0 = time.perf_counter()
    i = 0
    while i < n:
        try:
            produce(a.topic, pool[i % npool], on_delivery=on_delivery)
            i += 1
        except BufferError:
            p.poll(0.005)
            continue
        if i % 1000 == 0:
            p.poll(0)
    left = p.flush(a.timeout)
    secs = time.perf_counter() - t0
    if left or errors:
        raise SystemExit(f"produce: {left} unacknowledged, {len(errors)} errors "
                         f"(first: {errors[:1]})")
    nbytes = n * a.size
    print(json.dumps({"records": n, "bytes": nbytes, "secs": secs,
                      "mb_s": nbytes / secs / 1e6, "rec_s": n / secs}))
    return 0


def cmd_txn_produce(a):
    """A transactional producer: begin, K records, commit, until N records are committed.
    commit_transaction() waits for every record of the transaction to be acknowledged and for
    the broker to accept the commit, so the clock covers both."""
    pool = payload_pool(a.size)
    p = Producer({
        "bootstrap.servers": a.bootstrap,
        "transactional.id": f"bench-txn-{os.getpid()}",
        "acks": "all",
        "compression.codec": a.compression,
        "queue.buffering.max.messages": 200000,
        # librdkafka requires message.timeout.ms <= transaction.timeout.ms (60 s by default).
        "message.timeout.ms": 60000,
    })
    p.init_transactions(60)  # before the clock starts
    p.list_topics(topic=a.topic, timeout=30)
    n, k, npool = a.count, a.per_txn, len(pool)
    produce = p.produce
    t0 = time.perf_counter()
    i = txns = 0
    while i < n:
        p.begin_transaction()
        end = min(n, i + k)
        while i < end:
            try:
                produce(a.topic, pool[i % npool])
                i += 1
            except BufferError:
                p.poll(0.005)
                continue
            if i % 1000 == 0:
                p.poll(0)
        p.commit_transaction(a.timeout)
        txns += 1
    secs = time.perf_counter() - t0
    nbytes = n * a.size
    print(json.dumps({"records": n, "bytes": nbytes, "secs": secs, "transactions": txns,
                      "mb_s": nbytes / secs / 1e6, "rec_s": n / secs, "txn_s": txns / secs}))
    return 0


def partitions_of(client, topic):
    md = client.list_topics(topic=topic, timeout=30)
    t = md.topics[topic]
    if t.error is not None:
        raise SystemExit(f"metadata for {topic}: {t.error}")
    return sorted(t.partitions)


def cmd_consume(a):
    c = Consumer({
        "bootstrap.servers": a.bootstrap,
        "group.id": "bench-rdkafka",  # required by the client; no group is joined (assign)
        "enable.auto.commit": False,
        "enable.partition.eof": False,
        "fetch.message.max.bytes": 1048576,
        # librdkafka stops fetching for fetch.queue.backoff.ms (default 1000) once its local
        # queue holds queued.min.messages (100,000). A broker that fetches faster than this
        # Python loop drains fills the queue, and the loop then drains it in a fraction of a
        # second and idles for the rest: the figure would measure that idle time. 10 ms is the
        # remedy librdkafka's documentation gives; it applies to both brokers alike.
        "fetch.queue.backoff.ms": 10,
        **({"isolation.level": a.isolation} if a.isolation else {}),
    })
    parts = partitions_of(c, a.topic)
    got = 0
    nbytes = 0
    t0 = None
    deadline = time.monotonic() + a.timeout
    for _ in range(a.passes):  # each pass reads the topic from the start again
        c.assign([TopicPartition(a.topic, p, 0) for p in parts])
        want = got + a.count
        while got < want:
            if time.monotonic() > deadline:
                raise SystemExit(f"consume: {got}/{a.count * a.passes} records after "
                                 f"{a.timeout} s")
            msgs = c.consume(num_messages=10000, timeout=1.0)
            for m in msgs:
                if m.error() is not None:
                    raise SystemExit(f"consume error: {m.error()}")
                if t0 is None:
                    t0 = time.perf_counter()  # clock starts at the first record
                got += 1
                nbytes += len(m.value())
        c.unassign()
    secs = time.perf_counter() - t0
    c.close()
    print(json.dumps({"records": got, "bytes": nbytes, "secs": secs,
                      "mb_s": nbytes / secs / 1e6, "rec_s": got / secs}))
    return 0


def latency_consumer(bootstrap, topic, ready, stop, out_q):
    c = Consumer({
        "bootstrap.servers": bootstrap,
        "group.id": "bench-rdkafka-lat",
        "enable.auto.commit": False,
        "fetch.wait.max.ms": 100,
        "fetch.min.bytes": 1,
    })
    parts = partitions_of(c, topic)
    # Start at the end: only records produced from now on are timed.
    tps = []
    for p in parts:
        _, high = c.get_watermark_offsets(TopicPartition(topic, p), timeout=30)
        tps.append(TopicPartition(topic, p, high))
    c.assign(tps)
    c.poll(0.5)  # connect and start fetching
    ready.set()
    lat = []
    while True:
        # poll() hands over each record as soon as librdkafka has it (consume(n, timeout)
        # would hold records back until n arrived or the timeout passed).
        m = c.poll(0.05)
        now = time.time_ns()
        if m is not None and m.error() is None:
            sent = struct.unpack_from(">q", m.value())[0]
            lat.append((now - sent) / 1e6)
        if stop.is_set() and m is None:
            break
    c.close()
    out_q.put(lat)


def cmd_latency(a):
    ctx = mp.get_context("fork")
    ready, stop, out_q = ctx.Event(), ctx.Event(), ctx.Queue()
    cons = ctx.Process(target=latency_consumer, args=(a.bootstrap, a.topic, ready, stop, out_q))
    cons.start()
    if not ready.wait(60):
        cons.kill()
        raise SystemExit("latency: consumer not ready after 60 s")
    pool = payload_pool(a.size, 64)
    prod_lat = []
    errors = []

    conf = {
        "bootstrap.servers": a.bootstrap,
        "acks": "all",
        "message.timeout.ms": 60000,
    }
    if a.linger_ms is not None:
        conf["linger.ms"] = a.linger_ms
    p = Producer(conf)
    p.list_topics(topic=a.topic, timeout=30)
    n = int(a.rate * a.seconds)
    interval = 1.0 / a.rate
    t_start = time.perf_counter()
    for i in range(n):
        target = t_start + i * interval
        while True:
            d = target - time.perf_counter()
            if d <= 0:
                break
            p.poll(min(d, 0.001))
        sent_ns = time.time_ns()
        t_send = time.perf_counter()
        value = struct.pack(">q", sent_ns) + pool[i % len(pool)][8:]

        def cb(err, msg, t_send=t_send):
            if err is not None:
                errors.append(str(err))
            else:
                prod_lat.append((time.perf_counter() - t_send) * 1e3)
        p.produce(a.topic, value, on_delivery=cb)
        p.poll(0)
    achieved = n / (time.perf_counter() - t_start)
    left = p.flush(60)
    time.sleep(1.0)
    stop.set()
    try:
        e2e = out_q.get(timeout=60)
    finally:
        cons.join(10)
        if cons.is_alive():
            cons.kill()
    if left or errors:
        raise SystemExit(f"latency: {left} unacknowledged, {len(errors)} errors {errors[:1]}")
    print(json.dumps({
        "records": n, "rate_target": a.rate, "rate_achieved": achieved,
        "produce_ms": percentiles(prod_lat), "e2e_ms": percentiles(e2e),
        "e2e_received": len(e2e),
    }))
    return 0


def port_open(host, port):
    s = socket.socket()
    s.settimeout(0.2)
    try:
        s.connect((host, port))
        return True
    except OSError:
        return False
    finally:
        s.close()


def cmd_firstack(a):
    """Waits for the port, then produces one record until it is acknowledged. Prints the
    CLOCK_MONOTONIC times (seconds) of port-open and of the acknowledgement; the caller
    subtracts its own monotonic start time (the clock is system-wide)."""
    host, port = a.bootstrap.rsplit(":", 1)
    port = int(port)
    deadline = time.monotonic() + a.deadline
    # Tell the caller we are loaded and polling.
    print("ready", flush=True)
    while not port_open(host, port):
        if time.monotonic() > deadline:
            raise SystemExit("firstack: port never opened")
        time.sleep(0.001)  # the port-open time is known to within this
    t_port = time.monotonic()
    acked = []
    while not acked:
        if time.monotonic() > deadline:
            raise SystemExit("firstack: no acknowledged produce before the deadline")
        p = Producer({
            "bootstrap.servers": a.bootstrap,
            "acks": "all",
            "linger.ms": 0,
            "reconnect.backoff.ms": 10,
            "reconnect.backoff.max.ms": 50,
            "retry.backoff.ms": 10,
            "retry.backoff.max.ms": 50,
            "topic.metadata.refresh.fast.interval.ms": 10,
            "message.timeout.ms": max(1000, int((deadline - time.monotonic()) * 1000)),
        })

        def cb(err, msg):
            if err is None:
                acked.append(time.monotonic())
            else:
                log("firstack: delivery failed:", err)
        p.produce(a.topic, b"first", on_delivery=cb)
        while p.flush(0.05) and time.monotonic() < deadline and not acked:
            pass
        if not acked:
            p.flush(1)
            time.sleep(0.01)
    print(json.dumps({"t_port": t_port, "t_ack": acked[0]}))
    return 0


def main():
    ap = argparse.ArgumentParser()
    sub = ap.add_subparsers(dest="cmd", required=True)
    for name in ("create", "produce", "txn-produce", "consume", "latency", "firstack"):
        s = sub.add_parser(name)
        s.add_argument("--bootstrap", required=True)
        s.add_argument("--topic", required=True)
        s.add_argument("--partitions", type=int, default=1)
        s.add_argument("--count", type=int, default=100000)
        s.add_argument("--size", type=int, default=1024)
        s.add_argument("--compression", default="none")
        s.add_argument("--rate", type=float, default=5000)
        s.add_argument("--seconds", type=float, default=10)
        s.add_argument("--timeout", type=float, default=300)
        s.add_argument("--passes", type=int, default=1)
        s.add_argument("--deadline", type=float, default=120)
        s.add_argument("--per-txn", type=int, default=100, help="txn-produce: records per transaction")
        s.add_argument("--isolation", default=None,
                       help="consume: isolation.level (default: librdkafka's, read_committed)")
        s.add_argument("--linger-ms", type=float, default=None,
                       help="latency: producer linger.ms (default: librdkafka's, 5 ms)")
    a = ap.parse_args()
    try:
        return {"create": cmd_create, "produce": cmd_produce, "txn-produce": cmd_txn_produce,
                "consume": cmd_consume,
                "latency": cmd_latency, "firstack": cmd_firstack}[a.cmd](a)
    except KafkaException as e:
        raise SystemExit(f"{a.cmd}: {e}")


if __name__ == "__main__":
    sys.exit(main())
