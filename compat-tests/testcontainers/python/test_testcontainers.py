"""testcontainers-python's Kafka module (the Confluent-style contract) against sluice's image:
produce, consume, and a consumer group that commits, with confluent-kafka. The README's Python
example is `test_readme_example` (the same text)."""

import os

from confluent_kafka import Consumer, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic
from testcontainers.community.kafka import KafkaContainer

IMAGE = os.environ.get("SLUICE_IMAGE", "localhost/sluice:latest")


def test_readme_example():
    # README: Testcontainers for Python
    with KafkaContainer(IMAGE) as kafka:
        bootstrap = kafka.get_bootstrap_server()
        admin = AdminClient({"bootstrap.servers": bootstrap})
        admin.create_topics([NewTopic("payments", num_partitions=2)])["payments"].result()
        producer = Producer({"bootstrap.servers": bootstrap})
        for i in range(10):
            producer.produce("payments", key=str(i), value=f"paid-{i}")
        assert producer.flush(30) == 0
        consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": "ledger",
                             "auto.offset.reset": "earliest", "enable.auto.commit": False})
        consumer.subscribe(["payments"])
        values = set()
        for _ in range(60):
            message = consumer.poll(1.0)
            if message is not None and message.error() is None:
                values.add(message.value().decode())
            if len(values) == 10:
                break
        consumer.commit(asynchronous=False)
        committed = consumer.committed([TopicPartition("payments", p) for p in (0, 1)], timeout=10)
        consumer.close()
        assert values == {f"paid-{i}" for i in range(10)}
        assert sum(tp.offset for tp in committed) == 10
    # end of README example
