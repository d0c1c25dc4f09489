"""TLS with real clients, against sluice and Apache Kafka alike: a listener named PLAINTEXT that
speaks SSL with a PKCS12 key store and a PEM trust store made by openssl when the module runs,
client certificates required, their principals mapped by ssl.principal.mapping.rules
(CN=admin -> User:admin, a super user), and the StandardAuthorizer. confluent-kafka produces
and consumes (fetched records over TLS), a client whose certificate maps to a user without ACLs
is refused TOPIC_AUTHORIZATION_FAILED, kcat lists metadata with its certificate and fails
without one, produces and consumes over TLS, and Kafka's own kafka-topics tool connects with a
PKCS12 client key store.
"""
import subprocess
import time

import pytest
from confluent_kafka import Consumer, Producer, TopicPartition

from conftest import BrokerFactory
from helpers import unique
from kafka_tools import run_class
from tls_certs import make_certs

PASSWORD = "changeit"


@pytest.fixture(scope="module")
def certs(tmp_path_factory):
    return make_certs(tmp_path_factory.mktemp("certs"), PASSWORD)


@pytest.fixture(scope="module")
def tls_broker(certs, tmp_path_factory):
    factory = BrokerFactory(tmp_path_factory.mktemp("tls_broker"))
    b = factory({
        "listener.security.protocol.map": "PLAINTEXT:SSL,CONTROLLER:PLAINTEXT",
        "ssl.keystore.type": "PKCS12",
        "ssl.keystore.location": str(certs / "broker.p12"),
        "ssl.keystore.password": PASSWORD,
        "ssl.truststore.type": "PEM",
        "ssl.truststore.location": str(certs / "ca.pem"),
        "ssl.client.auth": "required",
        "ssl.principal.mapping.rules": "RULE:^CN=([a-z]+),OU=test$/$1/L,DEFAULT",
        "ssl.endpoint.identification.algorithm": "",
        "authorizer.class.name": "org.apache.kafka.metadata.authorizer.StandardAuthorizer",
        "super.users": "User:admin;User:ANONYMOUS",
        "num.partitions": "1",
    })
    yield b
    b.stop()


def ssl_conf(broker, certs, user):
    return {"bootstrap.servers": broker.bootstrap, "security.protocol": "SSL",
            "ssl.ca.location": str(certs / "ca.pem"),
            "ssl.certificate.location": str(certs / f"{user}.pem"),
            "ssl.key.location": str(certs / f"{user}.key")}


def test_produce_and_consume_over_tls_with_client_certificates(tls_broker, certs):
    topic = unique("tls")
    producer = Producer(dict(ssl_conf(tls_broker, certs, "admin"), **{"acks": "all"}))
    errors = []
    values = [f"value-{i}".encode() * 50 for i in range(2000)]
    for v in values:
        producer.produce(topic, v, on_delivery=lambda err, msg: errors.append(err))
    producer.flush(30)
    assert errors and not any(errors), errors[:3]
    consumer = Consumer(dict(ssl_conf(tls_broker, certs, "admin"), **{"group.id": unique("g")}))
    consumer.assign([TopicPartition(topic, 0, 0)])
    got = []
    deadline = time.monotonic() + 30
    while len(got) < len(values) and time.monotonic() < deadline:
        m = consumer.poll(0.5)
        if m is not None and not m.error():
            got.append(m.value())
    consumer.close()
    assert got == values


def test_a_certificate_principal_without_acls_is_refused(tls_broker, certs):
    producer = Producer(dict(ssl_conf(tls_broker, certs, "alice"), **{"message.timeout.ms": 10000}))
    errors = []
    producer.produce(unique("tls-alice"), b"v", on_delivery=lambda err, msg: errors.append(err))
    producer.flush(20)
    assert errors and errors[0] and errors[0].name() == "TOPIC_AUTHORIZATION_FAILED", errors


def test_kcat_with_and_without_a_certificate(tls_broker, certs):
    base = ["kcat", "-b", tls_broker.bootstrap, "-X", "security.protocol=SSL",
            "-X", f"ssl.ca.location={certs / 'ca.pem'}", "-m", "10"]
    ok = subprocess.run(base + ["-X", f"ssl.certificate.location={certs / 'admin.pem'}",
                                "-X", f"ssl.key.location={certs / 'admin.key'}", "-L"],
                        capture_output=True, text=True, timeout=60)
    assert ok.returncode == 0 and "1 brokers" in ok.stdout, ok.stdout + ok.stderr
    refused = subprocess.run(base + ["-L"], capture_output=True, text=True, timeout=60)
    assert refused.returncode != 0, refused.stdout


def test_kcat_produces_and_consumes_over_tls(tls_broker, certs):
    base = ["kcat", "-b", tls_broker.bootstrap, "-X", "security.protocol=SSL",
            "-X", f"ssl.ca.location={certs / 'ca.pem'}", "-m", "15",
            "-X", f"ssl.certificate.location={certs / 'admin.pem'}",
            "-X", f"ssl.key.location={certs / 'admin.key'}"]
    topic = unique("tls-kcat")
    lines = "".join(f"k{i}:{'v' * (i % 300)} {i}\n" for i in range(2000))
    res = subprocess.run(base + ["-P", "-t", topic, "-K:", "-X", "acks=all"], input=lines,
                         capture_output=True, text=True, timeout=60)
    assert res.returncode == 0, res.stderr
    res = subprocess.run(base + ["-C", "-t", topic, "-o", "beginning", "-e", "-f", "%k:%s\n"],
                         capture_output=True, text=True, timeout=60)
    assert res.returncode == 0 and res.stdout == lines, res.stderr


def test_kafka_topics_with_a_pkcs12_client_key_store(tls_broker, certs, tmp_path):
    conf = tmp_path / "client.properties"
    conf.write_text(f"security.protocol=SSL\nssl.keystore.type=PKCS12\n"
                    f"ssl.keystore.location={certs / 'admin.p12'}\nssl.keystore.password={PASSWORD}\n"
                    f"ssl.truststore.type=PEM\nssl.truststore.location={certs / 'ca.pem'}\n"
                    "ssl.endpoint.identification.algorithm=\n")
    topic = unique("tls-tool")
    res = run_class("org.apache.kafka.tools.TopicCommand", "--bootstrap-server", tls_broker.bootstrap,
                    "--command-config", conf, "--create", "--topic", topic, "--partitions", "2",
                    timeout_s=120)
    assert res.returncode == 0, res.stdout + res.stderr
    res = run_class("org.apache.kafka.tools.TopicCommand", "--bootstrap-server", tls_broker.bootstrap,
                    "--command-config", conf, "--list", timeout_s=120)
    assert res.returncode == 0 and topic in res.stdout.split(), res.stdout + res.stderr
