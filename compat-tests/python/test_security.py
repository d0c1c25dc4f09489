"""Security, differential: the same SASL users, the same ACLs and the same requests against the
broker under test and against Apache Kafka give the same outcome, case by case (the table
CASES below: principal, action, resource, the error expected; validated against Apache
Kafka 4.4.0 with `KAFKA_LIBS=<4.4.0 jars> KAFKA_MANAGED=1`). Clients are confluent-kafka's
(librdkafka) over SASL_PLAINTEXT with PLAIN and SCRAM-SHA-256; ACLs are made with the admin
client by the super user. Also: SCRAM credentials created with AlterUserScramCredentials
(what `kafka-configs --add-config SCRAM-SHA-256=[...]` sends), wrong passwords,
`kafka-acls --add/--list/--remove`, and kcat producing and consuming over SASL/PLAIN (its
SCRAM is refused by both brokers, see the test). The second table, WIRE_CASES, sends the requests no Python
client sends (KIP-848 ConsumerGroupHeartbeat/ConsumerGroupDescribe, DescribeTopicPartitions,
DescribeProducers, DescribeTransactions, OffsetDelete, DescribeGroups with authorized
operations, ElectLeaders, the transaction APIs) as raw requests (`acl_wire.py`), compared field by field.

Both brokers run the same overrides: the listener named PLAINTEXT speaks SASL_PLAINTEXT
(Kafka's controller listener stays PLAINTEXT, its principal ANONYMOUS a super user) and is
the inter-broker listener, PLAIN users from the listener's JAAS config, and the
StandardAuthorizer.
"""
import subprocess
import time

import pytest
from confluent_kafka import Consumer, KafkaError, KafkaException, Producer, TopicPartition
from confluent_kafka.admin import (AclBinding, AclBindingFilter, AclOperation, AclPermissionType,
                                   AdminClient, ConfigResource, NewTopic, ResourcePatternType,
                                   ResourceType, ScramCredentialInfo, ScramMechanism,
                                   UserScramCredentialUpsertion)

import acl_wire as wire
from helpers import unique
from kafka_tools import run_class

JAAS = ('org.apache.kafka.common.security.plain.PlainLoginModule required username="admin" '
        'password="admin-secret" user_admin="admin-secret" user_alice="alice-secret" '
        'user_bob="bob-secret";')
BROKER_OVERRIDES = {
    "listener.security.protocol.map": "PLAINTEXT:SASL_PLAINTEXT,CONTROLLER:PLAINTEXT",
    "sasl.enabled.mechanisms": "PLAIN,SCRAM-SHA-256",
    "sasl.mechanism.inter.broker.protocol": "PLAIN",
    # Kafka's broker-to-broker client (KIP-890's verification of transactional offsets) takes
    # the listener's protocol from the map only when the listener is named.
    "inter.broker.listener.name": "PLAINTEXT",
    "listener.name.plaintext.plain.sasl.jaas.config": JAAS,
    "listener.name.plaintext.scram-sha-256.sasl.jaas.config":
        "org.apache.kafka.common.security.scram.ScramLoginModule required;",
    "authorizer.class.name": "org.apache.kafka.metadata.authorizer.StandardAuthorizer",
    "super.users": "User:admin;User:ANONYMOUS",
    "num.partitions": "1",
}
PASSWORDS = {"admin": "admin-secret", "alice": "alice-secret", "bob": "bob-secret"}
TIMEOUT_S = 20


def sasl(broker, user, password=None, mechanism="PLAIN"):
    return {"bootstrap.servers": broker.bootstrap, "security.protocol": "SASL_PLAINTEXT",
            "sasl.mechanism": mechanism, "sasl.username": user,
            "sasl.password": password or PASSWORDS[user]}


def admin(broker, user="admin"):
    return AdminClient(sasl(broker, user))


def result(future):
    """The error name of an admin future, or NO_ERROR."""
    try:
        future.result(timeout=TIMEOUT_S)
        return "NO_ERROR"
    except KafkaException as e:
        return e.args[0].name()


def acl(name, pattern, principal, op, permission, rtype=ResourceType.TOPIC):
    return AclBinding(rtype, name, pattern, principal, "*", op, permission)


@pytest.fixture(scope="module")
def world(broker):
    """Topics and ACLs, made once by the super user."""
    p = unique("acl")
    names = {k: f"{p}-{k}" for k in ("read", "write", "hidden", "pfx-a")}
    names["pfx"] = f"{p}-pfx-"
    names["group"] = f"{p}-group"
    names["cgroup"] = f"{p}-consumers"
    names["prefix"] = p
    names["gpfx"] = f"{p}-g-"      # groups alice may read and delete offsets of
    names["spfx"] = f"{p}-shared-"  # groups alice may only describe
    names["txn"] = f"{p}-txn"      # a transactional id alice may describe
    names["txw"] = f"{p}-txw-"     # transactional ids alice may write
    a = admin(broker)
    for f in a.create_topics([NewTopic(names[k], 1, 1) for k in ("read", "write", "hidden", "pfx-a")]).values():
        assert result(f) == "NO_ERROR"
    L, P = ResourcePatternType.LITERAL, ResourcePatternType.PREFIXED
    allow, deny = AclPermissionType.ALLOW, AclPermissionType.DENY
    acls = [
        acl(names["read"], L, "User:alice", AclOperation.READ, allow),
        acl(names["write"], L, "User:alice", AclOperation.WRITE, allow),
        acl(names["write"], L, "User:*", AclOperation.WRITE, allow),
        acl(names["write"], L, "User:bob", AclOperation.WRITE, deny),
        acl(names["pfx"], P, "User:bob", AclOperation.ALL, allow),
        acl(names["group"], L, "User:alice", AclOperation.READ, allow, ResourceType.GROUP),
        acl(names["cgroup"], L, "User:*", AclOperation.READ, allow, ResourceType.GROUP),
        acl(names["gpfx"], P, "User:alice", AclOperation.READ, allow, ResourceType.GROUP),
        acl(names["gpfx"], P, "User:alice", AclOperation.DELETE, allow, ResourceType.GROUP),
        acl(names["spfx"], P, "User:alice", AclOperation.DESCRIBE, allow, ResourceType.GROUP),
        acl(names["txn"], L, "User:alice", AclOperation.DESCRIBE, allow,
            ResourceType.TRANSACTIONAL_ID),
        acl(names["txw"], P, "User:alice", AclOperation.WRITE, allow,
            ResourceType.TRANSACTIONAL_ID),
    ]
    for f in a.create_acls(acls).values():
        assert result(f) == "NO_ERROR"
    # Kafka applies ACLs through its metadata log: wait until the broker's authorizer has them
    # all, then a moment for every request handler to see them.
    every = AclBindingFilter(ResourceType.ANY, None, ResourcePatternType.ANY, None, None,
                             AclOperation.ANY, AclPermissionType.ANY)
    deadline = time.monotonic() + TIMEOUT_S
    while time.monotonic() < deadline:
        listed = a.describe_acls(every).result(timeout=TIMEOUT_S)
        if sum(b.name.startswith(p) for b in listed) >= len(acls):
            break
        time.sleep(0.2)
    time.sleep(1)
    return names


def produce(broker, user, topic):
    producer = Producer(dict(sasl(broker, user), **{"message.timeout.ms": 10000, "acks": "all"}))
    errors = []
    producer.produce(topic, b"v", on_delivery=lambda err, msg: errors.append(err))
    producer.flush(TIMEOUT_S)
    return errors[0].name() if errors and errors[0] else "NO_ERROR"


def metadata(broker, user, topic):
    md = admin(broker, user).list_topics(topic, timeout=TIMEOUT_S)
    t = md.topics[topic]
    return t.error.name() if t.error else "NO_ERROR"


def consume(broker, user, topic):
    # The group (which librdkafka looks up even for assigned partitions) may be read by all.
    group = topic.rsplit("-", 1)[0] + "-consumers"
    errors = []
    c = Consumer(dict(sasl(broker, user), **{"group.id": group, "enable.auto.commit": False,
                                              "enable.partition.eof": True,
                                              "error_cb": errors.append}))
    try:
        c.assign([TopicPartition(topic, 0, 0)])
        deadline = time.monotonic() + 10
        while time.monotonic() < deadline:
            m = c.poll(0.5)
            if m is None:
                continue
            if m.error():
                if m.error().code() == KafkaError._PARTITION_EOF:
                    return "NO_ERROR"
                return m.error().name()
            return "NO_ERROR"
        return errors[0].name() if errors else "NO_ERROR"
    finally:
        c.close()


# Each keeps its admin client until the future is resolved.
def create_topic(broker, user, topic):
    a = admin(broker, user)
    return result(a.create_topics([NewTopic(topic, 1, 1)])[topic])


def delete_topic(broker, user, topic):
    a = admin(broker, user)
    return result(a.delete_topics([topic], operation_timeout=10)[topic])


def describe_configs(broker, user, topic):
    a = admin(broker, user)
    futures = a.describe_configs([ConfigResource(ConfigResource.Type.TOPIC, topic)])
    return result(next(iter(futures.values())))


def describe_acls(broker, user, _):
    a = admin(broker, user)
    f = AclBindingFilter(ResourceType.ANY, None, ResourcePatternType.ANY, None, None,
                         AclOperation.ANY, AclPermissionType.ANY)
    return result(a.describe_acls(f))


def describe_group(broker, user, group):
    a = admin(broker, user)
    deadline = time.monotonic() + TIMEOUT_S
    while True:  # Kafka's group coordinator may still be loading __consumer_offsets
        outcome = result(a.describe_consumer_groups([group])[group])
        if outcome not in ("NOT_COORDINATOR", "COORDINATOR_LOAD_IN_PROGRESS") \
                or time.monotonic() > deadline:
            return outcome
        time.sleep(0.5)


# (principal, action, resource key in `world`, or a literal name prefixed by "=", expected error)
CASES = [
    ("alice", produce, "write", "NO_ERROR"),
    ("alice", produce, "read", "TOPIC_AUTHORIZATION_FAILED"),
    ("bob", produce, "write", "TOPIC_AUTHORIZATION_FAILED"),          # DENY wins over User:*
    ("bob", produce, "pfx-a", "NO_ERROR"),                            # PREFIXED ALL
    ("alice", metadata, "read", "NO_ERROR"),                          # READ implies DESCRIBE
    ("alice", metadata, "hidden", "TOPIC_AUTHORIZATION_FAILED"),
    ("alice", metadata, "=acl-no-such-topic", "TOPIC_AUTHORIZATION_FAILED"),  # existence hidden
    ("alice", consume, "read", "NO_ERROR"),
    ("bob", metadata, "read", "TOPIC_AUTHORIZATION_FAILED"),
    ("alice", create_topic, "=acl-alice-new", "TOPIC_AUTHORIZATION_FAILED"),
    ("bob", create_topic, "pfx-new", "NO_ERROR"),
    ("alice", delete_topic, "read", "TOPIC_AUTHORIZATION_FAILED"),
    ("alice", describe_configs, "read", "TOPIC_AUTHORIZATION_FAILED"),
    ("bob", describe_configs, "pfx-a", "NO_ERROR"),
    # librdkafka 2.16 reports no error to a DescribeAcls refused CLUSTER_AUTHORIZATION_FAILED
    # (an empty list), on Kafka 4.4 as on sluice; tests/acls.rs checks the code itself.
    ("alice", describe_acls, "read", "NO_ERROR"),
    ("admin", describe_acls, "read", "NO_ERROR"),
    ("alice", describe_group, "group", "NO_ERROR"),
    ("bob", describe_group, "group", "GROUP_AUTHORIZATION_FAILED"),
]


@pytest.mark.parametrize("user,action,key,expected", CASES,
                         ids=[f"{c[0]}-{c[1].__name__}-{c[2]}" for c in CASES])
def test_acl_case(broker, world, user, action, key, expected):
    if key.startswith("="):
        resource = key[1:]
    elif key == "pfx-new":
        resource = world["pfx"] + "new"
    else:
        resource = world[key]
    assert action(broker, user, resource) == expected


# KIP-430 bits: READ 8, WRITE 16, DELETE 64, DESCRIBE 256; every topic operation is 3576.
NO_OPS = wire.NOT_REQUESTED
# (principal, action, expected outcome): see acl_wire.py for what each action returns.
WIRE_CASES = [
    # ConsumerGroupHeartbeat: group READ, then DESCRIBE on every topic named.
    ("alice", wire.heartbeat_unauthorized_group, 30),
    ("alice", wire.heartbeat_names_one_hidden, (29, None)),
    # A regular expression resolves only to the topics the member may describe.
    ("alice", wire.heartbeat_regex_resolves_describable_topics, (0, ["read", "write"])),
    ("bob", wire.heartbeat_regex_resolves_describable_topics, (30, [])),
    # ConsumerGroupDescribe: refused groups first; a group assigned a hidden topic is refused.
    ("alice", wire.consumer_group_describe,
     ("nope", [("nope", 30, NO_OPS, 0), ("own", 0, 8 | 64 | 256, 1), ("shared", 29, NO_OPS, 0)])),
    # DescribeTopicPartitions: named refused (existing or not), all-topics hidden; operations.
    ("alice", wire.describe_topic_partitions(["hidden", "read", "missing"]),
     [("hidden", 29, NO_OPS), ("missing", 29, NO_OPS), ("read", 0, 8 | 256)]),
    ("alice", wire.describe_topic_partitions([]), [("read", 0, 8 | 256), ("write", 0, 16 | 256)]),
    # DENY WRITE does not deny the DESCRIBE that User:*'s ALLOW WRITE implies.
    ("bob", wire.describe_topic_partitions(["write", "pfx-a"]),
     [("pfx-a", 0, 3576), ("write", 0, 256)]),
    ("alice", wire.describe_producers, [("hidden", 29), ("read", 0)]),
    ("alice", wire.describe_transactions, [("txn-other", 53), ("txn", 105)]),
    ("alice", wire.offset_delete_and_describe_groups,
     ([0], 0, [("hidden", 29), ("read", 0)], [("nope", 30, NO_OPS), ("own", 0, 8 | 64 | 256)])),
    ("alice", wire.elect_leaders, (31, [31])),
    # Transactions: the id's WRITE first; AddPartitionsToTxn: topics before existence, never an
    # internal topic (not even for a super user), the rest OPERATION_NOT_ATTEMPTED (55); v4 is
    # for brokers (CLUSTER_ACTION); then the group's and the topics' READ; markers are brokers'.
    ("alice", wire.transactions, {
        "init": 0, "add refused": [55, 29, 29], "add internal": [55, 29], "add v4": 31,
        "add": [0], "offsets refused": 30, "offsets": 0, "txn offset commit": [29, 0],
        "markers": 31, "end": 0, "admin add internal": [55, 29]}),
    ("bob", wire.transactions_refused, {"init": 53, "add": [53], "offsets": 53,
                                        "txn offset commit": 53, "end": 53}),
]


@pytest.mark.parametrize("user,action,expected", WIRE_CASES,
                         ids=[f"{c[0]}-{c[1].__name__}" for c in WIRE_CASES])
def test_wire_case(broker, world, user, action, expected):
    def as_user():
        return wire.login(broker, user, PASSWORDS[user])

    def as_admin():
        return wire.login(broker, "admin", PASSWORDS["admin"])
    assert action(world, as_user, as_admin) == expected


def test_wrong_password_is_refused(broker):
    producer = Producer(dict(sasl(broker, "alice", "wrong"), **{"message.timeout.ms": 5000}))
    md_error = None
    try:
        producer.list_topics(timeout=5)
    except KafkaException as e:
        md_error = e.args[0]
    assert md_error is not None, "metadata with a wrong password must fail"


def test_scram_credentials_set_with_the_admin_api_log_in(broker):
    user = unique("scram")
    a = admin(broker)
    upsert = UserScramCredentialUpsertion(user, ScramCredentialInfo(ScramMechanism.SCRAM_SHA_256, 8192),
                                          b"s3cret", b"salt-salt-salt")
    for f in a.alter_user_scram_credentials([upsert]).values():
        assert result(f) == "NO_ERROR"
    described = a.describe_user_scram_credentials([user])[user].result(timeout=TIMEOUT_S)
    assert [(i.mechanism, i.iterations) for i in described.scram_credential_infos] == \
        [(ScramMechanism.SCRAM_SHA_256, 8192)]
    time.sleep(1)
    md = AdminClient(sasl(broker, user, "s3cret", "SCRAM-SHA-256")).list_topics(timeout=TIMEOUT_S)
    assert md.brokers
    bad = AdminClient(sasl(broker, user, "nope", "SCRAM-SHA-256"))
    with pytest.raises(KafkaException):
        bad.list_topics(timeout=5)


def test_kafka_acls_add_list_remove(broker, tmp_path):
    conf = tmp_path / "admin.properties"
    conf.write_text("security.protocol=SASL_PLAINTEXT\nsasl.mechanism=PLAIN\n"
                    "sasl.jaas.config=org.apache.kafka.common.security.plain.PlainLoginModule required "
                    'username="admin" password="admin-secret";\n')
    topic = unique("acltool")
    cmd = ["org.apache.kafka.tools.AclCommand", "--bootstrap-server", broker.bootstrap,
           "--command-config", str(conf)]
    res = run_class(*cmd, "--add", "--allow-principal", "User:carol", "--operation", "Read",
                    "--topic", topic, timeout_s=120)
    assert res.returncode == 0, res.stdout + res.stderr
    res = run_class(*cmd, "--list", "--topic", topic, timeout_s=120)
    assert res.returncode == 0 and "principal=User:carol" in res.stdout and "operation=READ" in res.stdout, \
        res.stdout + res.stderr
    res = run_class(*cmd, "--remove", "--force", "--allow-principal", "User:carol", "--operation", "Read",
                    "--topic", topic, timeout_s=120)
    assert res.returncode == 0, res.stdout + res.stderr
    time.sleep(1)
    res = run_class(*cmd, "--list", "--topic", topic, timeout_s=120)
    assert "User:carol" not in res.stdout, res.stdout


def kcat(broker, user, password, mechanism, *args, stdin=None):
    cmd = ["kcat", "-b", broker.bootstrap, "-X", "security.protocol=SASL_PLAINTEXT",
           "-X", f"sasl.mechanisms={mechanism}", "-X", f"sasl.username={user}",
           "-X", f"sasl.password={password}", "-m", "15", *args]
    return subprocess.run(cmd, input=stdin, capture_output=True, timeout=60)


def test_kcat_produces_and_consumes_over_sasl_plain(broker):
    password = PASSWORDS["admin"]
    topic = unique("kcat-plain")
    a = admin(broker)
    assert result(a.create_topics([NewTopic(topic, 1, 1)])[topic]) == "NO_ERROR"
    lines = b"".join(f"k{i}:value {i}\n".encode() for i in range(200))
    res = kcat(broker, "admin", password, "PLAIN", "-P", "-t", topic, "-K:", "-X", "acks=all",
               stdin=lines)
    assert res.returncode == 0, res.stderr.decode()
    res = kcat(broker, "admin", password, "PLAIN", "-C", "-t", topic, "-o", "beginning", "-e",
               "-f", "%k:%s\n")
    assert res.returncode == 0 and res.stdout == lines, res.stderr.decode()
    refused = kcat(broker, "admin", "wrong", "PLAIN", "-L")
    assert refused.returncode != 0 and b"Authentication failed" in refused.stderr, refused.stderr


def test_kcat_scram_is_refused_for_its_repeated_nonce(broker):
    """Debian's kcat runs on librdkafka 2.0.2, whose SCRAM client-final message repeats the
    client nonce after the server's (fixed in librdkafka 2.6.1): Kafka 4.x compares the nonce
    strictly, as RFC 5802 asks, and refuses the proof; so does sluice. confluent-kafka (a
    newer librdkafka) logs in with the same credential."""
    user, password = unique("scram-kcat"), "kcat-secret"
    upsert = UserScramCredentialUpsertion(user, ScramCredentialInfo(ScramMechanism.SCRAM_SHA_256, 4096),
                                          password.encode(), b"kcat-salt-1234")
    a = admin(broker)
    for f in a.alter_user_scram_credentials([upsert]).values():
        assert result(f) == "NO_ERROR"
    time.sleep(1)  # Kafka applies it through its metadata log
    md = AdminClient(sasl(broker, user, password, "SCRAM-SHA-256")).list_topics(timeout=TIMEOUT_S)
    assert md.brokers
    refused = kcat(broker, user, password, "SCRAM-SHA-256", "-L")
    assert refused.returncode != 0 and b"invalid credentials with SASL mechanism SCRAM-SHA-256" \
        in refused.stderr, refused.stderr
