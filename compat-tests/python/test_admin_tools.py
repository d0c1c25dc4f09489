"""Kafka's admin tools that a single broker without an authorizer answers the way Apache Kafka
does: kafka-acls (SECURITY_DISABLED: "No Authorizer is configured"), kafka-leader-election (every
leader is already the preferred one; unknown partitions fail), and kafka-transactions before any
transaction (none listed, an unknown id; an idempotent producer's state per partition).
"""
from confluent_kafka import Producer

from helpers import create_topic, unique
from kafka_tools import run_class

ACL_COMMAND = "org.apache.kafka.tools.AclCommand"
LEADER_ELECTION_COMMAND = "org.apache.kafka.tools.LeaderElectionCommand"
TRANSACTIONS_COMMAND = "org.apache.kafka.tools.TransactionsCommand"


def run(main_class, bootstrap, *args):
    res = run_class(main_class, "--bootstrap-server", bootstrap, *args, timeout_s=120)
    return res.returncode, res.stdout, res.stderr


def test_kafka_acls_says_no_authorizer_is_configured(broker):
    topic = unique("acl")
    create_topic(broker.bootstrap, topic, 1)
    rc, out, err = run(ACL_COMMAND, broker.bootstrap, "--list")
    assert rc != 0 and "SecurityDisabledException: No Authorizer is configured on the broker" in out + err
    # Kafka 4.4's tool prints DescribeAcls' wording for --add, although the broker's CreateAcls
    # answer says "No Authorizer is configured." (checked with raw requests; 4.1's tool printed
    # that); --remove prints DeleteAcls' "No Authorizer is configured.".
    for action, message in ((["--add"], "No Authorizer is configured on the broker"),
                            (["--remove", "--force"], "No Authorizer is configured.")):
        rc, out, err = run(ACL_COMMAND, broker.bootstrap, *action, "--allow-principal", "User:bob",
                           "--operation", "Read", "--topic", topic)
        assert rc != 0 and f"SecurityDisabledException: {message}" in out + err, \
            f"{action}: {out + err}"


def test_kafka_leader_election_finds_every_leader_in_place(broker):
    topic = unique("elect")
    create_topic(broker.bootstrap, topic, 2)
    for election in ("preferred", "unclean"):
        rc, out, err = run(LEADER_ELECTION_COMMAND, broker.bootstrap, "--election-type", election,
                           "--topic", topic, "--partition", "1")
        assert rc == 0, out + err
        assert f"Valid replica already elected for partitions {topic}-1" in out, out + err
    rc, out, err = run(LEADER_ELECTION_COMMAND, broker.bootstrap, "--election-type", "preferred",
                       "--all-topic-partitions")
    assert rc == 0 and "elected" not in out, out + err
    rc, out, err = run(LEADER_ELECTION_COMMAND, broker.bootstrap, "--election-type", "preferred",
                       "--topic", topic, "--partition", "7")
    assert rc != 0, out + err
    assert f"UnknownTopicOrPartitionException: No such partition as {topic}-7" in out + err


def test_kafka_transactions_lists_none_and_describes_idempotent_producers(broker):
    topic = unique("producers")
    create_topic(broker.bootstrap, topic, 1)
    rc, out, err = run(TRANSACTIONS_COMMAND, broker.bootstrap, "list")
    assert rc == 0 and out.split() == ["TransactionalId", "Coordinator", "ProducerId",
                                       "TransactionState"], out + err
    rc, out, err = run(TRANSACTIONS_COMMAND, broker.bootstrap, "describe", "--transactional-id",
                       unique("txn"))
    assert rc != 0 and "could not be found" in out + err, out + err

    producer = Producer({"bootstrap.servers": broker.bootstrap, "enable.idempotence": True,
                         "linger.ms": 0})
    for i in range(5):
        producer.produce(topic, value=b"v%d" % i, partition=0)
        assert producer.flush(30) == 0
    rc, out, err = run(TRANSACTIONS_COMMAND, broker.bootstrap, "describe-producers", "--topic",
                       topic, "--partition", "0")
    assert rc == 0, out + err
    header, *rows = [[cell.strip() for cell in line.split("\t")] for line in out.strip().splitlines()]
    assert [h for h in header if h] == ["ProducerId", "ProducerEpoch", "LatestCoordinatorEpoch",
                                        "LastSequence", "LastTimestamp",
                                        "CurrentTransactionStartOffset"], out
    assert len(rows) == 1, out
    producer_id, epoch, coordinator_epoch, last_sequence, _, start_offset = rows[0][:6]
    assert int(producer_id) >= 0 and epoch == "0" and coordinator_epoch == "-1", out
    assert last_sequence == "4" and start_offset == "None", out
