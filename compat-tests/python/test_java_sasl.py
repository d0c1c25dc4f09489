"""The Java client and Kafka's own tools over SASL_SSL, on sluice and on Apache Kafka alike:
`kafka-configs --alter --add-config 'SCRAM-SHA-512=[iterations=8192,password=...]'
--entity-type users` (and `--describe`), then the new user produces with ProducerPerformance
and consumes with the console consumer over SCRAM-SHA-512; a wrong SCRAM password fails; an
OAUTHBEARER client with Kafka's unsecured login (an unsigned token for `sub`) lists topics.
The listener named PLAINTEXT speaks SASL_SSL (PKCS12 key store and PEM trust store made by
openssl when the module runs); the admin logs in with PLAIN.
"""
import pytest

from conftest import BrokerFactory
from helpers import unique
from kafka_tools import run_class
from tls_certs import make_certs

PASSWORD = "changeit"


def config_command():
    """kafka-configs' class: kafka.admin.ConfigCommand up to Kafka 4.3, in kafka-tools since."""
    probe = run_class("org.apache.kafka.tools.ConfigCommand", "--version", timeout_s=60)
    return "kafka.admin.ConfigCommand" if "Could not find or load main class" in probe.stderr \
        else "org.apache.kafka.tools.ConfigCommand"
PLAIN_JAAS = ('org.apache.kafka.common.security.plain.PlainLoginModule required username="admin" '
              'password="admin-secret" user_admin="admin-secret";')


@pytest.fixture(scope="module")
def certs(tmp_path_factory):
    return make_certs(tmp_path_factory.mktemp("certs"), PASSWORD)


@pytest.fixture(scope="module")
def sasl_ssl(certs, tmp_path_factory):
    factory = BrokerFactory(tmp_path_factory.mktemp("sasl_ssl_broker"))
    b = factory({
        "listener.security.protocol.map": "PLAINTEXT:SASL_SSL,CONTROLLER:PLAINTEXT",
        "sasl.enabled.mechanisms": "PLAIN,SCRAM-SHA-512,OAUTHBEARER",
        "sasl.mechanism.inter.broker.protocol": "PLAIN",
        "listener.name.plaintext.plain.sasl.jaas.config": PLAIN_JAAS,
        "listener.name.plaintext.scram-sha-512.sasl.jaas.config":
            "org.apache.kafka.common.security.scram.ScramLoginModule required;",
        "listener.name.plaintext.oauthbearer.sasl.jaas.config":
            "org.apache.kafka.common.security.oauthbearer.OAuthBearerLoginModule required;",
        "ssl.keystore.type": "PKCS12",
        "ssl.keystore.location": str(certs / "broker.p12"),
        "ssl.keystore.password": PASSWORD,
        "ssl.truststore.type": "PEM",
        "ssl.truststore.location": str(certs / "ca.pem"),
        "ssl.endpoint.identification.algorithm": "",
        "num.partitions": "1",
    })
    yield b
    b.stop()


def client_config(tmp_path, certs, mechanism, jaas):
    path = tmp_path / f"{mechanism.lower()}-{unique('c')}.properties"
    path.write_text("security.protocol=SASL_SSL\n"
                    f"sasl.mechanism={mechanism}\nsasl.jaas.config={jaas}\n"
                    f"ssl.truststore.type=PEM\nssl.truststore.location={certs / 'ca.pem'}\n")
    return path


def scram_jaas(user, password):
    return f'org.apache.kafka.common.security.scram.ScramLoginModule required username="{user}" password="{password}";'


def test_scram_user_made_with_kafka_configs_produces_and_consumes(sasl_ssl, certs, tmp_path):
    admin = client_config(tmp_path, certs, "PLAIN", 'org.apache.kafka.common.security.plain.PlainLoginModule required username="admin" password="admin-secret";')
    user = unique("carol")
    command = config_command()
    res = run_class(command, "--bootstrap-server", sasl_ssl.bootstrap,
                    "--command-config", admin, "--alter", "--entity-type", "users", "--entity-name", user,
                    "--add-config", "SCRAM-SHA-512=[iterations=8192,password=carol-secret]", timeout_s=120)
    assert res.returncode == 0, res.stdout + res.stderr
    res = run_class(command, "--bootstrap-server", sasl_ssl.bootstrap,
                    "--command-config", admin, "--describe", "--entity-type", "users", "--entity-name", user,
                    timeout_s=120)
    assert "SCRAM-SHA-512=iterations=8192" in res.stdout, res.stdout + res.stderr
    carol = client_config(tmp_path, certs, "SCRAM-SHA-512", scram_jaas(user, "carol-secret"))
    topic = unique("scram")
    res = run_class("org.apache.kafka.tools.ProducerPerformance", "--topic", topic, "--num-records", "1000",
                    "--record-size", "100", "--throughput", "-1", "--producer.config", carol,
                    "--producer-props", f"bootstrap.servers={sasl_ssl.bootstrap}", "acks=all", timeout_s=180)
    assert res.returncode == 0 and "1000 records sent" in res.stdout, res.stdout + res.stderr
    res = run_class("org.apache.kafka.tools.consumer.ConsoleConsumer", "--bootstrap-server", sasl_ssl.bootstrap,
                    "--consumer.config", carol, "--topic", topic, "--from-beginning", "--max-messages", "1000",
                    "--timeout-ms", "30000", timeout_s=180)
    records = [line for line in res.stdout.splitlines() if len(line) == 100]
    assert res.returncode == 0 and len(records) == 1000, res.stdout[-500:] + res.stderr[-2000:]
    wrong = client_config(tmp_path, certs, "SCRAM-SHA-512", scram_jaas(user, "guess"))
    res = run_class("org.apache.kafka.tools.TopicCommand", "--bootstrap-server", sasl_ssl.bootstrap,
                    "--command-config", wrong, "--list", timeout_s=120)
    assert res.returncode != 0 and "Authentication failed" in res.stdout + res.stderr, res.stdout + res.stderr


def test_oauthbearer_unsecured_token_lists_topics(sasl_ssl, certs, tmp_path):
    oauth = client_config(tmp_path, certs, "OAUTHBEARER",
                          'org.apache.kafka.common.security.oauthbearer.OAuthBearerLoginModule required '
                          'unsecuredLoginStringClaim_sub="dave";')
    res = run_class("org.apache.kafka.tools.TopicCommand", "--bootstrap-server", sasl_ssl.bootstrap,
                    "--command-config", oauth, "--list", timeout_s=120)
    assert res.returncode == 0, res.stdout + res.stderr
