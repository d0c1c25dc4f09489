"""/metrics after a known workload, parsed with prometheus_client's text parser: a broker
(SLUICE_BIN) with sluice.http.listener, 3 partitions, 90 records produced by confluent-kafka
and read back once; then the per-topic counters, log sizes and request counts must agree."""

import os
import socket
import subprocess
import tempfile
import time
import urllib.request

import pytest
from confluent_kafka import Consumer, Producer
from confluent_kafka.admin import AdminClient, NewTopic
from prometheus_client.parser import text_string_to_metric_families


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest.fixture
def broker():
    binary = os.environ["SLUICE_BIN"]
    kafka_port, http_port = free_port(), free_port()
    with tempfile.TemporaryDirectory() as data:
        process = subprocess.Popen(
            [binary, "--override", f"listeners=PLAINTEXT://127.0.0.1:{kafka_port}",
             "--override", f"log.dirs={data}", "--override", f"sluice.http.listener=127.0.0.1:{http_port}",
             "--override", "sluice.fault.injection.enable=true",
             "--override", "group.initial.rebalance.delay.ms=0"],
            stderr=subprocess.PIPE)
        http = f"http://127.0.0.1:{http_port}"
        for _ in range(100):
            try:
                with urllib.request.urlopen(http + "/ready", timeout=1) as r:
                    if r.status == 200:
                        break
            except OSError:
                time.sleep(0.1)
        yield f"127.0.0.1:{kafka_port}", http
        process.terminate()
        process.wait(timeout=30)


def scrape(http):
    with urllib.request.urlopen(http + "/metrics", timeout=5) as r:
        assert r.headers["content-type"].startswith("text/plain; version=0.0.4")
        text = r.read().decode()
    samples = {}
    for family in text_string_to_metric_families(text):
        for s in family.samples:
            samples[(s.name, tuple(sorted(s.labels.items())))] = s.value
    return samples


def test_counters_after_a_known_workload(broker):
    bootstrap, http = broker
    with urllib.request.urlopen(http + "/health", timeout=5) as r:
        assert r.read() == b"ok\n"
    admin = AdminClient({"bootstrap.servers": bootstrap})
    admin.create_topics([NewTopic("metered", num_partitions=3)])["metered"].result(timeout=10)
    producer = Producer({"bootstrap.servers": bootstrap, "linger.ms": 0})
    for i in range(90):
        producer.produce("metered", value=b"x" * 100, partition=i % 3)
        producer.flush(10)
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": "meter",
                         "auto.offset.reset": "earliest"})
    consumer.subscribe(["metered"])
    read = 0
    deadline = time.time() + 30
    while read < 90 and time.time() < deadline:
        m = consumer.poll(0.5)
        if m is not None and m.error() is None:
            read += 1
    consumer.close()
    assert read == 90
    s = scrape(http)
    topic = (("topic", "metered"),)
    assert s[("kafka_server_brokertopicmetrics_messagesin_total", topic)] == 90
    assert s[("kafka_server_brokertopicmetrics_totalproducerequests_total", topic)] == 90
    assert s[("kafka_server_brokertopicmetrics_failedproducerequests_total", topic)] == 0
    bytes_in = s[("kafka_server_brokertopicmetrics_bytesin_total", topic)]
    assert bytes_in > 90 * 100
    log_bytes = sum(s[("kafka_log_log_size", (("partition", str(p)), ("topic", "metered")))]
                    for p in range(3))
    assert log_bytes == bytes_in, "every appended byte is in the log"
    assert s[("kafka_server_brokertopicmetrics_bytesout_total", topic)] >= bytes_in
    produces = sum(v for (name, labels), v in s.items()
                   if name == "kafka_network_requestmetrics_requests_total"
                   and ("request", "Produce") in labels)
    assert produces == 90
    assert s[("kafka_network_requestmetrics_totaltimems_count", (("request", "Produce"),))] == 90
    assert s[("kafka_server_replicamanager_underreplicatedpartitions", ())] == 0
    assert s[("kafka_server_socket_server_metrics_connection_creation_total", ())] >= 2
    assert ("kafka_server_delayedoperationpurgatory_purgatorysize",
            (("delayedOperation", "Fetch"),)) in s
