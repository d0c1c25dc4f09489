"""Consumer groups and idempotent producers through real clients with their default settings.

- confluent-kafka: 3 members in child processes (group_worker.py) with the `range` (eager) and
  `cooperative-sticky` assignors while an idempotent producer writes; one member is SIGKILLed
  with a batch processed but not committed (its session of 6 s must time out), one joins, one
  leaves cleanly. Every record is processed (that batch again by its new owner), the committed
  offsets reach the log end, and no partition has two owners at the end. The time
  from the kill until the survivors own every partition again is printed, stored as a JUnit
  suite property `rebalance_after_kill_s[<assignor>]`, and written to
  .cache/results/groups-<broker>.json.
- kafka-python: a 2-member group with explicit commit(); a later member resumes at the commits.
- kcat: `kcat -G` balanced consumer, committed offsets and `-o beginning`.
- Static membership (group.instance.id): a rejoin within the session timeout is no rebalance.
- Group membership across kill -9 (control): the group comes back Stable with its members and
  assignment, members that keep heartbeating are not rebalanced, and Kafka's DumpLogSegments
  --offsets-decoder decodes the stored GroupMetadata record.
- Committed offsets across a graceful restart and across kill -9 (control).
- The idempotent producer across two broker kill -9s mid-stream (control): exactly once, in order.
- Kafka's `kafka-consumer-groups` tool: --list, --describe (--state, --members --verbose),
  --reset-offsets (--execute, --dry-run), --delete-offsets, --delete; and what it refuses while
  the group has a member (reset, delete, delete-offsets).

The brokers run with group.initial.rebalance.delay.ms=300 (Kafka's default is 3000), both sluice
and Kafka, so that a new group forms quickly.
"""
import json
import subprocess
import threading
import time

import pytest
from confluent_kafka import Consumer, TopicPartition
from confluent_kafka.admin import AdminClient
from kafka import KafkaConsumer, KafkaProducer
from kafka import TopicPartition as KpTopicPartition

from groups import (Committed, KeyedStream, NumberedStream, WorkerProc, covered_since, owners_ok,
                    record_result, wait_until)
from helpers import (consume_partitions, create_topic, deadline_after, make_producer, produce_all,
                     unique, watermarks)
from kafka_tools import consumer_groups, dump_log_segments, table
from segments import segment_files

# The KIP-848 settings give consumer-protocol members the same 6 s session and 1 s heartbeat
# interval the classic members ask for (the defaults, 45 s and 5 s, would make the test slow).
GROUP_OVERRIDES = {"group.initial.rebalance.delay.ms": 300,
                   "group.consumer.min.session.timeout.ms": 6000,
                   "group.consumer.session.timeout.ms": 6000,
                   "group.consumer.min.heartbeat.interval.ms": 1000,
                   "group.consumer.heartbeat.interval.ms": 1000}
BROKER_OVERRIDES = GROUP_OVERRIDES  # read by conftest.py's module-scoped `broker`


# -- confluent-kafka: a group of child processes, one SIGKILLed ----------------------------------
PARTITIONS = 6
GROUP_RECORDS = 30_000


@pytest.mark.parametrize("strategy", ["range", "cooperative-sticky", "consumer:uniform",
                                      "consumer:range"])
def test_confluent_group_kill_join_leave(broker, tmp_path, strategy, record_testsuite_property):
    label = strategy.replace(":", "-")
    topic, group = unique(f"grp-{label}"), unique(f"g-{label}")
    create_topic(broker.bootstrap, topic, PARTITIONS)
    workers = {}
    stream = None
    committed = Committed(broker.bootstrap, group)

    def tick():
        for w in workers.values():
            w.poll()

    def live():
        return [w for w in workers.values() if w.live]

    def state():
        return {w.name: (sorted(w.assignment) if w.assignment is not None else None,
                         len(w.records), "live" if w.live else "gone") for w in workers.values()}

    def spawn(name):
        workers[name] = WorkerProc(name, broker.bootstrap, group, topic, strategy, tmp_path)
        return workers[name]

    def wait_owned(need_all, timeout_s, what):
        wait_until(lambda: owners_ok(live(), PARTITIONS, need_all_members=need_all), timeout_s,
                   lambda: f"{what}; workers (assignment, records, state): {state()}", tick)

    timings = {}
    phases = [(time.monotonic(), "start")]  # to tell which rebalance a commit error came from
    try:
        for name in ("c1", "c2", "c3"):
            spawn(name)
        wait_owned(True, 60, "3 members did not share the 6 partitions")
        stream = KeyedStream(broker.bootstrap, topic, GROUP_RECORDS, rate=1500)
        stream.start()
        wait_until(lambda: sum(len(w.records) for w in workers.values()) >= 6000, 60,
                   lambda: f"fewer than 6000 records processed: {state()}", tick)

        victim = workers["c1"]
        assert victim.assignment, f"c1 owns no partition: {state()}"
        victim.hold()
        wait_until(lambda: victim.held, 30, lambda: f"c1 did not hold a batch: {state()}", tick)
        t_kill = time.monotonic()
        phases.append((t_kill, "kill"))
        victim.kill9()
        wait_owned(False, 60, "the survivors did not take over c1's partitions")
        timings["rebalance_after_kill_s"] = covered_since(live(), PARTITIONS, t_kill)

        c4 = spawn("c4")
        phases.append((c4.started, "join"))
        wait_owned(True, 60, "c4 did not get a share of the partitions")
        timings["join_s"] = covered_since(live(), PARTITIONS, c4.started)

        t_leave = time.monotonic()
        phases.append((t_leave, "leave"))
        workers["c2"].terminate()
        wait_owned(False, 60, "c3 and c4 did not take over c2's partitions")
        timings["leave_s"] = covered_since(live(), PARTITIONS, t_leave)

        stream.finish()
        ends = {p: high for p, (low, high) in watermarks(broker.bootstrap, topic, PARTITIONS).items()}
        assert sum(ends.values()) == GROUP_RECORDS, \
            f"log end offsets {ends} hold {sum(ends.values())} records, produced {GROUP_RECORDS} " \
            "(an idempotent producer must not duplicate)"
        last = {}

        def caught_up():
            last["committed"] = committed.get(topic, PARTITIONS)
            return last["committed"] == ends
        wait_until(caught_up, 90, lambda: f"committed {last.get('committed')} != log end {ends}; "
                   f"workers {state()}", tick, interval=0.5)
        # After the last rebalance: every partition has exactly one live owner.
        tick()
        assert owners_ok(live(), PARTITIONS, need_all_members=True), state()
        final_owners = {w.name: sorted(w.assignment) for w in live()}
        for w in live():
            w.terminate()
        assert committed.get(topic, PARTITIONS) == ends, "commits changed while closing"
    finally:
        for w in workers.values():
            w.stop_quietly()
        committed.close()

    # Every acknowledged record was processed, with the value produced at its offset.
    processed = {}
    for w in workers.values():
        for p, off, value in w.records:
            processed.setdefault((p, off), set()).add(value)
    by_position = {pos: str(n) for n, pos in stream.acked.items()}
    missing = sorted(pos for pos in by_position if pos not in processed)
    assert not missing, f"{len(missing)} acknowledged records never processed, e.g. {missing[:5]}"
    wrong = [(pos, vals) for pos, vals in processed.items() if vals != {by_position.get(pos)}]
    assert not wrong, f"records with unexpected values (position, values): {wrong[:5]}"
    # c1's last batch was processed but never committed: the new owners process it again.
    held = {(p, off) for p, off, _ in workers["c1"].held}
    again = {(p, off) for w in workers.values() if w.name != "c1" for p, off, _ in w.records}
    assert held <= again, f"{len(held - again)} of c1's {len(held)} uncommitted records were " \
        f"not processed again after its session expired, e.g. {sorted(held - again)[:5]}"
    deliveries = sum(len(w.records) for w in workers.values())
    errors = {w.name: w.errors for w in workers.values() if w.errors}
    assert not errors, f"consumer errors: {errors}"

    def phase(t):
        return [name for at, name in phases if at <= t][-1]
    # Not asserted: librdkafka's cooperative members commit while a join is under way, and
    # Kafka answers some of those commits ILLEGAL_GENERATION too.
    commit_errors = {w.name: [f"{err} in {where} after {phase(t)}"
                              for t, where, err in w.commit_errors]
                     for w in workers.values() if w.commit_errors}

    summary = {**{k: round(v, 2) if v is not None else None for k, v in timings.items()},
               "records": GROUP_RECORDS, "deliveries": deliveries,
               "redelivered": deliveries - GROUP_RECORDS, "final_owners": final_owners,
               "commit_errors": commit_errors}
    print(f"{broker.kind} {strategy}: {json.dumps(summary)}")
    record_result(broker, f"confluent_group[{strategy}]", summary)
    for k in ("rebalance_after_kill_s", "join_s", "leave_s"):
        record_testsuite_property(f"{k}[{strategy}]", summary[k])
    assert timings["rebalance_after_kill_s"] is not None


# -- kafka-python: two members, explicit commit() ------------------------------------------------
class KpMember(threading.Thread):
    """A kafka-python KafkaConsumer in a group, in its own thread; commit() after every batch."""

    def __init__(self, bootstrap, group, topic):
        super().__init__(daemon=True)
        self.conf = dict(bootstrap_servers=bootstrap, group_id=group, enable_auto_commit=False,
                         auto_offset_reset="earliest")
        self.topic = topic
        self.stop_flag = threading.Event()
        self.records = []  # (partition, offset, value)
        self.assignment = set()
        self.commit_errors = []
        self.exc = None

    def run(self):
        try:
            consumer = KafkaConsumer(self.topic, **self.conf)
            dirty = False
            try:
                while not self.stop_flag.is_set():
                    for tp, msgs in consumer.poll(timeout_ms=200).items():
                        self.records.extend((tp.partition, m.offset, m.value.decode()) for m in msgs)
                        dirty = dirty or bool(msgs)
                    if dirty:
                        try:
                            consumer.commit()
                            dirty = False
                        except Exception as e:  # CommitFailedError after a rebalance
                            self.commit_errors.append(repr(e))
                    self.assignment = {tp.partition for tp in consumer.assignment()}
                if dirty:
                    consumer.commit()
            finally:
                consumer.close()
        except BaseException as e:
            self.exc = e

    def finish(self):
        self.stop_flag.set()
        self.join(30)
        assert not self.is_alive(), "kafka-python member did not stop within 30 s"
        if self.exc:
            raise self.exc


def kp_produce(bootstrap, topic, first, count):
    """kafka-python's default producer (idempotent); -> {n: (partition, offset)}."""
    producer = KafkaProducer(bootstrap_servers=bootstrap)
    try:
        futures = {n: producer.send(topic, key=f"key-{n % 101}".encode(), value=str(n).encode())
                   for n in range(first, first + count)}
        producer.flush(timeout=60)
        return {n: (md.partition, md.offset) for n, md in
                ((n, f.get(timeout=1)) for n, f in futures.items())}
    finally:
        producer.close(timeout=10)


def test_kafka_python_group_commit_and_resume(broker):
    parts, first_batch, second_batch = 4, 4000, 400
    topic, group = unique("kp-group"), unique("kp-g")
    create_topic(broker.bootstrap, topic, parts)
    members = [KpMember(broker.bootstrap, group, topic) for _ in range(2)]
    for m in members:
        m.start()
    try:
        def shared():
            owned = [m.assignment for m in members]
            return all(owned) and sorted(p for o in owned for p in o) == list(range(parts))
        wait_until(shared, 60, lambda: f"2 members did not share {parts} partitions: "
                   f"{[m.assignment for m in members]} {[m.exc for m in members]}")
        acked = kp_produce(broker.bootstrap, topic, 0, first_batch)
        wait_until(lambda: sum(len(m.records) for m in members) >= first_batch, 60,
                   lambda: f"consumed {[len(m.records) for m in members]} of {first_batch}")
        time.sleep(1)  # nothing more may arrive
    finally:
        for m in members:
            m.finish()
    assert all(m.records for m in members), "one member consumed nothing"
    consumed = [(p, off) for m in members for p, off, _ in m.records]
    assert len(consumed) == len(set(consumed)) == first_batch, \
        f"{len(consumed)} deliveries of {len(set(consumed))} records; expected {first_batch} once each"
    values = {(p, off): v for m in members for p, off, v in m.records}
    assert {pos: values.get(pos) for pos in acked.values()} == \
        {pos: str(n) for n, pos in acked.items()}
    ends = {p: high for p, (low, high) in watermarks(broker.bootstrap, topic, parts).items()}

    # Both closed; a new member resumes at the committed offsets.
    more = kp_produce(broker.bootstrap, topic, first_batch, second_batch)
    consumer = KafkaConsumer(**members[0].conf)
    try:
        committed = {p: consumer.committed(KpTopicPartition(topic, p)) for p in range(parts)}
        assert committed == ends, f"committed {committed}, log end before the second batch {ends}"
        consumer.subscribe([topic])
        got = []
        end = deadline_after(60)
        while len(got) < second_batch:
            assert time.monotonic() < end, f"resumed member got {len(got)} of {second_batch}"
            for tp, msgs in consumer.poll(timeout_ms=500).items():
                got.extend((tp.partition, m.offset, m.value.decode()) for m in msgs)
        consumer.commit()
    finally:
        consumer.close()
    assert sorted(got) == sorted((p, off, str(n)) for n, (p, off) in more.items())
    first = {}
    for p, off, _ in got:
        first.setdefault(p, off)
    assert all(first[p] == ends[p] for p in first), f"first offsets {first}, committed {ends}"


# -- kcat -G -------------------------------------------------------------------------------------
def kcat(*args, stdin=None, timeout_s=60):
    res = subprocess.run(["kcat", *args], input=stdin, capture_output=True, timeout=timeout_s)
    assert res.returncode == 0, f"kcat {' '.join(args)} exited {res.returncode}:\n" \
        f"{res.stderr.decode(errors='replace')}"
    return res


def kcat_group(bootstrap, group, topic, *extra):
    """`kcat -G group topic -e` (exits at the end of every assigned partition) -> sorted lines."""
    out = kcat("-b", bootstrap, "-G", group, "-e", "-f", "%p %o %k %s\n", *extra, topic).stdout
    return sorted(out.decode().splitlines())


def test_kcat_balanced_consumer(broker):
    parts = 3
    topic, group = unique("kcat-g"), unique("kcat-grp")
    create_topic(broker.bootstrap, topic, parts)

    def produce(first, count):
        lines = "".join(f"key-{n}:value-{n}\n" for n in range(first, first + count)).encode()
        kcat("-b", broker.bootstrap, "-P", "-t", topic, "-K:", "-X", "acks=all", stdin=lines)

    def values(lines):
        return sorted(line.split(" ")[3] for line in lines)

    def expect(first, count):
        return sorted(f"value-{n}" for n in range(first, first + count))

    produce(0, 3000)
    # A new group starts at the beginning only when asked to; kcat's default is the end.
    assert kcat_group(broker.bootstrap, unique("kcat-new"), topic) == []
    got = kcat_group(broker.bootstrap, group, topic, "-o", "beginning")
    assert values(got) == expect(0, 3000)
    ends = {p: high for p, (low, high) in watermarks(broker.bootstrap, topic, parts).items()}
    committed = Committed(broker.bootstrap, group)
    try:
        assert committed.get(topic, parts) == ends, "kcat's offsets were not committed on exit"
    finally:
        committed.close()
    # The same group again: the committed offsets hold, so nothing new.
    assert kcat_group(broker.bootstrap, group, topic) == []
    produce(3000, 500)
    again = kcat_group(broker.bootstrap, group, topic)
    assert values(again) == expect(3000, 500)
    firsts = {}
    for line in sorted(again, key=lambda s: (int(s.split(" ")[0]), int(s.split(" ")[1]))):
        p, off = map(int, line.split(" ")[:2])
        firsts.setdefault(p, off)
    assert all(firsts[p] == ends[p] for p in firsts), f"resumed at {firsts}, committed {ends}"
    # kcat's -o in -G mode overrides the committed offsets: everything again.
    assert values(kcat_group(broker.bootstrap, group, topic, "-o", "beginning")) == expect(0, 3500)
    # And a new group with -o beginning reads everything.
    assert values(kcat_group(broker.bootstrap, unique("kcat-new"), topic, "-o", "beginning")) \
        == expect(0, 3500)


# -- static membership (group.instance.id) -------------------------------------------------------
class StaticMember:
    """A confluent consumer with group.instance.id, polled by the test; records rebalance events."""

    def __init__(self, bootstrap, group, topic, instance, events, session_ms=6000):
        self.instance, self.events = instance, events
        self.consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": group,
                                  "group.instance.id": instance, "session.timeout.ms": session_ms,
                                  "heartbeat.interval.ms": 1000, "enable.auto.commit": False,
                                  "auto.offset.reset": "earliest"})
        self.consumer.subscribe([topic], on_assign=self._cb("assign"), on_revoke=self._cb("revoke"),
                                on_lost=self._cb("lost"))

    def _cb(self, kind):
        def cb(consumer, parts):
            self.events.append((time.monotonic(), self.instance, kind,
                                sorted(p.partition for p in parts)))
        return cb

    def poll(self):
        for m in self.consumer.consume(num_messages=100, timeout=0.05):
            assert not m.error(), m.error()

    def owned(self):
        return sorted(tp.partition for tp in self.consumer.assignment())


def test_static_membership(broker):
    """A static member that closes (no LeaveGroup) and comes back with its group.instance.id
    within the session timeout gets its partitions back without a rebalance; one that does not
    come back is removed when its session times out."""
    parts, topic, group = 4, unique("static"), unique("g-static")
    create_topic(broker.bootstrap, topic, parts)
    events = []
    a = StaticMember(broker.bootstrap, group, topic, "instance-a", events)
    b = StaticMember(broker.bootstrap, group, topic, "instance-b", events)
    members = [a, b]

    def tick():
        for m in members:
            m.poll()

    def split_between(*ms):
        owned = [m.owned() for m in ms]
        return all(owned) and sorted(p for o in owned for p in o) == list(range(parts))

    try:
        wait_until(lambda: split_between(a, b), 60,
                   lambda: f"not shared: a {a.owned()} b {b.owned()}", tick)
        before = {m.instance: m.owned() for m in members}
        a.consumer.close()  # a static member sends no LeaveGroup
        members.remove(a)
        t_back = time.monotonic()
        a = StaticMember(broker.bootstrap, group, topic, "instance-a", events)
        members.append(a)
        wait_until(lambda: a.owned() == before["instance-a"], 20,
                   lambda: f"instance-a did not get {before['instance-a']} back: {a.owned()}", tick)
        back_s = time.monotonic() - t_back
        assert back_s < 5, f"instance-a took {back_s:.1f}s to get its partitions back"
        end = deadline_after(2)
        while time.monotonic() < end:
            tick()
        b_events = [e for e in events if e[1] == "instance-b" and e[0] > t_back]
        assert not b_events, f"instance-b was rebalanced by a static rejoin: {b_events}"
        assert b.owned() == before["instance-b"]

        a.consumer.close()
        members.remove(a)
        t_gone = time.monotonic()
        wait_until(lambda: b.owned() == list(range(parts)), 30,
                   lambda: f"instance-b owns {b.owned()} after instance-a left for good", tick)
        takeover_s = time.monotonic() - t_gone
        assert takeover_s > 4, f"instance-b took over after {takeover_s:.1f}s, before a 6 s " \
            "session could time out (did the static member send LeaveGroup?)"
        print(f"{broker.kind}: static rejoin {back_s:.2f}s, takeover after session timeout "
              f"{takeover_s:.2f}s")
    finally:
        for m in members:
            m.consumer.close()


# -- group membership across kill -9, and Kafka's decoder on the stored records -------------------
def describe_group(bootstrap, group):
    """(state name, {instance id: (member id, client id, sorted partitions)}) via the AdminClient."""
    admin = AdminClient({"bootstrap.servers": bootstrap})
    desc = admin.describe_consumer_groups([group], request_timeout=10)[group].result(timeout=30)
    members = {m.group_instance_id: (m.member_id, m.client_id,
                                     sorted(tp.partition for tp in m.assignment.topic_partitions))
               for m in desc.members}
    return desc.state.name, members


@pytest.mark.control
def test_group_resumes_after_kill9_and_kafka_decodes_its_records(broker_factory):
    """A Stable group is stored when its rebalance completes. After kill -9 and a restart,
    DescribeGroups shows it Stable with the same members and assignment, and members that keep
    heartbeating through the restart are not rebalanced. Then Kafka's DumpLogSegments
    --offsets-decoder reads the group's records in __consumer_offsets."""
    b = broker_factory(GROUP_OVERRIDES)
    parts, topic, group = 4, unique("grp-kill9"), unique("g-kill9")
    create_topic(b.bootstrap, topic, parts)
    events = []
    # Sessions outlast a broker restart (Kafka's takes several seconds).
    members = [StaticMember(b.bootstrap, group, topic, f"instance-{i}", events, session_ms=60000)
               for i in range(2)]

    def tick():
        for m in members:
            m.poll()

    def shared():
        owned = [m.owned() for m in members]
        return all(owned) and sorted(p for o in owned for p in o) == list(range(parts))

    try:
        wait_until(shared, 60, lambda: f"not shared: {[m.owned() for m in members]}", tick)
        state, before = describe_group(b.bootstrap, group)
        assert state == "STABLE" and len(before) == 2, (state, before)
        owned = {m.instance: m.owned() for m in members}
        assert {i: d[2] for i, d in before.items()} == owned
        t_kill = time.monotonic()
        b.kill9()
        b.start()
        end = deadline_after(8)  # several heartbeats after the restart
        while time.monotonic() < end:
            tick()
        state, after = describe_group(b.bootstrap, group)
        assert (state, after) == ("STABLE", before), f"before the kill {before}, after {state} {after}"
        moved = [e for e in events if e[0] > t_kill]
        assert not moved, f"members were rebalanced after the restart: {moved}"
        assert {m.instance: m.owned() for m in members} == owned
    finally:
        for m in members:
            m.consumer.close()
    b.stop()

    # The group's records: offset commits (none here) and GroupMetadata, as Kafka decodes them.
    logs = [f for p in range(50) for f in segment_files(b.partition_dir("__consumer_offsets", p), ".log")
            if f.stat().st_size > 0]
    dump = dump_log_segments(logs, "--offsets-decoder")
    lines = [line for line in dump.splitlines() if group in line and "protocolType" in line]
    assert lines, f"no GroupMetadata record of {group} decoded:\n{dump[-3000:]}"
    last = lines[-1]
    print(f"{b.kind}: {last}")
    for text in ['"protocolType":"consumer"', '"protocol":"range"', *before]:
        assert text in last, f"{text} missing from the decoded record: {last}"
    for member_id, _, _ in before.values():
        assert member_id in last, f"{member_id} missing from the decoded record: {last}"


@pytest.mark.control
def test_consumer_protocol_group_across_kill9_mid_rebalance(broker_factory, tmp_path):
    """KIP-848 members (confluent-kafka, group.protocol=consumer) while the broker is killed with
    kill -9 in the middle of a rebalance (a third member has just joined) and restarted: the
    members carry on under the same member ids (their sessions outlast the restart), the group
    settles with every partition owned by one member, and after it settles no record is
    processed twice."""
    overrides = {**GROUP_OVERRIDES, "group.consumer.session.timeout.ms": 60000}
    b = broker_factory(overrides)
    topic, group = unique("grp-848-kill9"), unique("g-848-kill9")
    create_topic(b.bootstrap, topic, PARTITIONS)
    workers = {}
    stream = None

    def tick():
        for w in workers.values():
            w.poll()

    def state():
        return {w.name: (sorted(w.assignment or []), len(w.records)) for w in workers.values()}

    def members():
        admin = AdminClient({"bootstrap.servers": b.bootstrap})
        desc = admin.describe_consumer_groups([group], request_timeout=10)[group].result(timeout=30)
        return {m.member_id for m in desc.members}

    try:
        for name in ("k1", "k2"):
            workers[name] = WorkerProc(name, b.bootstrap, group, topic, "consumer:uniform", tmp_path)
        wait_until(lambda: owners_ok(list(workers.values()), PARTITIONS, need_all_members=True),
                   60, lambda: f"2 members did not share the partitions: {state()}", tick)
        stream = KeyedStream(b.bootstrap, topic, 6000, rate=500)
        stream.start()
        wait_until(lambda: sum(len(w.records) for w in workers.values()) >= 500, 60,
                   lambda: f"fewer than 500 records processed: {state()}", tick)
        workers["k3"] = WorkerProc("k3", b.bootstrap, group, topic, "consumer:uniform", tmp_path)
        wait_until(lambda: members() and len(members()) == 3, 30, lambda: f"k3 did not join: {state()}",
                   tick)
        before = members()
        b.kill9()
        b.start()
        wait_until(lambda: owners_ok(list(workers.values()), PARTITIONS, need_all_members=True),
                   90, lambda: f"the group did not settle after the restart: {state()}", tick)
        stream.finish()
        settled = time.monotonic()
        assert members() == before, "members had to rejoin under new member ids"
        end = deadline_after(5)
        while time.monotonic() < end:
            tick()
        owners = {p: w.name for w in workers.values() for p in (w.assignment or [])}
        after = [(w.name, p, off) for w in workers.values() for t, recs in w.batches if t > settled
                 for p, off, _ in recs]
        seen = {}
        for name, p, off in after:
            seen.setdefault((p, off), []).append(name)
        twice = {pos: who for pos, who in seen.items() if len(who) > 1}
        assert not twice, f"records processed twice after the group settled: {sorted(twice.items())[:5]}"
        strangers = [(n, p, off) for n, p, off in after if owners.get(p) != n]
        assert not strangers, f"records processed by a member that does not own them: {strangers[:5]}"
        errors = {w.name: w.errors for w in workers.values() if w.errors}
        print(f"{b.kind}: members {sorted(before)}; final {state()}; errors {errors}")
    finally:
        if stream is not None and stream.is_alive():
            stream.join(60)
        for w in workers.values():
            w.stop_quietly()


# -- committed offsets across restart and kill -9 ------------------------------------------------
def group_commit(bootstrap, group, topic, partitions, offsets, tag, timeout_s=60):
    """Join `group`, read a little, commit `offsets` {p: offset} with metadata, leave."""
    c = Consumer({"bootstrap.servers": bootstrap, "group.id": group, "enable.auto.commit": False,
                  "auto.offset.reset": "earliest"})
    try:
        c.subscribe([topic])
        end = deadline_after(timeout_s)
        seen = set()
        while len(seen) < partitions:
            assert time.monotonic() < end, f"group member saw partitions {seen} only"
            for m in c.consume(num_messages=100, timeout=0.5):
                assert not m.error(), m.error()
                seen.add(m.partition())
        c.commit(offsets=[TopicPartition(topic, p, off, f"{tag}-{p}") for p, off in offsets.items()],
                 asynchronous=False)
    finally:
        c.close()


def assert_resumes(bootstrap, group, topic, partitions, offsets, tag, timeout_s=60):
    """A new member of `group` finds `offsets` committed (with metadata) and starts there."""
    committed = Committed(bootstrap, group)
    try:
        got = committed.get(topic, partitions, metadata=True)
    finally:
        committed.close()
    assert got == {p: (off, f"{tag}-{p}") for p, off in offsets.items()}
    c = Consumer({"bootstrap.servers": bootstrap, "group.id": group, "enable.auto.commit": False,
                  "auto.offset.reset": "error"})
    first = {}
    try:
        c.subscribe([topic])
        end = deadline_after(timeout_s)
        while len(first) < partitions:
            assert time.monotonic() < end, f"resumed member got first offsets {first} only"
            for m in c.consume(num_messages=100, timeout=0.5):
                assert not m.error(), m.error()
                first.setdefault(m.partition(), m.offset())
    finally:
        c.close()
    assert first == offsets, f"resumed at {first}, committed {offsets}"


@pytest.mark.control
def test_committed_offsets_survive_restart_and_kill9(broker_factory):
    b = broker_factory(GROUP_OVERRIDES)
    parts, topic, group = 3, unique("grp-restart"), unique("g-restart")
    create_topic(b.bootstrap, topic, parts)
    produce_all(make_producer(b.bootstrap), topic,
                [(n % parts, f"k{n}".encode(), f"v{n}".encode(), None, None) for n in range(3000)])

    first = {0: 111, 1: 222, 2: 333}
    group_commit(b.bootstrap, group, topic, parts, first, "before-restart")
    b.restart()
    assert_resumes(b.bootstrap, group, topic, parts, first, "before-restart")

    second = {0: 444, 1: 555, 2: 999}
    group_commit(b.bootstrap, group, topic, parts, second, "before-kill")
    b.kill9()
    b.start()
    assert_resumes(b.bootstrap, group, topic, parts, second, "before-kill")


# -- the idempotent producer across kill -9 ------------------------------------------------------
@pytest.mark.control
def test_idempotent_producer_across_kill9(broker_factory):
    b = broker_factory(GROUP_OVERRIDES)
    parts, topic, group = 3, unique("idem-kill"), unique("g-idem")
    total, prefix = 24_000, 3000
    create_topic(b.bootstrap, topic, parts)
    stream = NumberedStream(b.bootstrap, topic, parts)
    stream.produce_now(0, prefix)

    # A group member reads the prefix, commits, leaves.
    c = Consumer({"bootstrap.servers": b.bootstrap, "group.id": group, "enable.auto.commit": False,
                  "auto.offset.reset": "earliest"})
    try:
        c.subscribe([topic])
        n_read, end = 0, deadline_after(60)
        while n_read < prefix:
            assert time.monotonic() < end, f"group member read {n_read} of {prefix}"
            msgs = c.consume(num_messages=500, timeout=0.5)
            assert not [m for m in msgs if m.error()], [m.error() for m in msgs if m.error()]
            n_read += len(msgs)
            if msgs:
                c.commit(asynchronous=False)
    finally:
        c.close()
    per_part = {p: prefix // parts for p in range(parts)}

    stream.stream(prefix, total - prefix, rate=2000)
    kills = []
    for at in (prefix + 5000, prefix + 11000):  # twice, while records are in flight
        wait_until(lambda: len(stream.acked) >= at or stream.exc or not stream.is_alive(), 120,
                   lambda: f"{len(stream.acked)} acked")
        assert stream.is_alive(), f"the stream ended before the kill at {at} acked"
        acked_at_kill = len(stream.acked)
        b.kill9()
        time.sleep(0.5)
        t_start = time.monotonic()
        b.start()
        kills.append({"acked_at_kill": acked_at_kill,
                      "restart_s": round(time.monotonic() - t_start, 1)})
    stream.join(240)
    print(f"{b.kind}: kills {kills}, {len(stream.acked)} acked, failed {len(stream.failed)}")
    record_result(b, "idempotent_producer_kill9", {"kills": kills, "acked": len(stream.acked),
                                                   "failed": len(stream.failed)})
    assert not stream.is_alive(), "producer still running"
    if stream.exc:
        raise stream.exc
    assert not stream.failed, f"{len(stream.failed)} deliveries failed: " \
        f"{sorted(set(stream.failed.values()))}"
    assert len(stream.acked) == total

    ends = {p: high for p, (low, high) in watermarks(b.bootstrap, topic, parts).items()}
    got = consume_partitions(b.bootstrap, topic, ends)
    for p in range(parts):
        log = [int(m.value()) for m in got[p]]
        dups = len(log) - len(set(log))
        want = list(range(p, total, parts))
        assert log == want, (f"partition {p}: {len(log)} records ({dups} duplicated), expected "
                             f"{len(want)}; first difference at offset "
                             f"{next((i for i, (x, y) in enumerate(zip(log, want)) if x != y), None)}")
    wrong = [(n, off) for n, off in stream.acked.items() if off != n // parts]
    assert not wrong, f"acknowledged at other offsets than stored (n, offset): {wrong[:5]}"

    # A group member after the restart resumes at the offsets committed before the kill.
    c = Consumer({"bootstrap.servers": b.bootstrap, "group.id": group, "enable.auto.commit": False,
                  "auto.offset.reset": "error"})
    first, count = {}, 0
    try:
        c.subscribe([topic])
        end = deadline_after(60)
        while count < total - prefix:
            assert time.monotonic() < end, f"resumed member read {count} of {total - prefix}"
            msgs = c.consume(num_messages=1000, timeout=0.5)
            for m in msgs:
                assert not m.error(), m.error()
                first.setdefault(m.partition(), m.offset())
                count += 1
            if msgs:
                c.commit(asynchronous=False)
    finally:
        c.close()
    assert first == per_part, f"resumed at {first}, committed before the kill {per_part}"
    committed = Committed(b.bootstrap, group)
    try:
        assert committed.get(topic, parts) == ends
    finally:
        committed.close()


# -- kafka-consumer-groups -----------------------------------------------------------------------
def test_kafka_consumer_groups_tool(broker):
    parts, per_part = 3, 100
    topic, group = unique("cg-tool"), unique("cg-tool-g")
    create_topic(broker.bootstrap, topic, parts)
    produce_all(make_producer(broker.bootstrap), topic,
                [(n % parts, None, f"v{n}".encode(), None, None) for n in range(parts * per_part)])
    commits = {0: 100, 1: 60, 2: 30}
    member = Consumer({"bootstrap.servers": broker.bootstrap, "group.id": group,
                       "client.id": "cg-tool-member", "enable.auto.commit": False,
                       "auto.offset.reset": "earliest"})
    try:
        member.subscribe([topic])
        seen, end = set(), deadline_after(60)
        while len(seen) < parts:
            assert time.monotonic() < end, f"member saw partitions {seen} only"
            seen |= {m.partition() for m in member.consume(num_messages=300, timeout=0.5)
                     if not m.error()}
        member.commit(offsets=[TopicPartition(topic, p, o) for p, o in commits.items()],
                      asynchronous=False)

        assert group in consumer_groups(broker.bootstrap, "--list").split()
        rows = table(consumer_groups(broker.bootstrap, "--describe", "--group", group))
        rows = {int(r["PARTITION"]): r for r in rows if r.get("TOPIC") == topic}
        assert sorted(rows) == list(range(parts)), rows
        for p, r in rows.items():
            assert (r["GROUP"], int(r["CURRENT-OFFSET"]), int(r["LOG-END-OFFSET"]), int(r["LAG"])) \
                == (group, commits[p], per_part, per_part - commits[p]), r
            assert r["CONSUMER-ID"] != "-" and r["CLIENT-ID"] == "cg-tool-member", r
        out = consumer_groups(broker.bootstrap, "--describe", "--group", group, "--state")
        # GROUP  COORDINATOR (ID)  ASSIGNMENT-STRATEGY  STATE  #MEMBERS
        words = out.splitlines()[-1].split()
        assert words[0] == group and words[-3:] == ["range", "Stable", "1"], out
        members = table(consumer_groups(broker.bootstrap, "--describe", "--group", group,
                                        "--members", "--verbose"))
        assert [(m["CLIENT-ID"], m["#PARTITIONS"], m["CURRENT-ASSIGNMENT"]) for m in members] == \
            [("cg-tool-member", str(parts), f"{topic}:{','.join(map(str, range(parts)))}")], members

        # What the tool refuses while the group has a member (it still exits 0).
        out = consumer_groups(broker.bootstrap, "--reset-offsets", "--group", group, "--topic", topic,
                              "--to-earliest", "--execute")
        assert f"Error: Assignments can only be reset if the group '{group}' is inactive, but the " \
            "current state is Stable." in out, out
        out = consumer_groups(broker.bootstrap, "--delete", "--group", group)
        assert "GroupNotEmptyException" in out, out  # DeleteGroups: NON_EMPTY_GROUP (68)
        out = consumer_groups(broker.bootstrap, "--delete-offsets", "--group", group, "--topic", topic)
        refused = [line for line in out.splitlines() if line.startswith(f"{topic} ")]
        assert len(refused) == parts and all(  # OffsetDelete: GROUP_SUBSCRIBED_TO_TOPIC (86)
            "Error: org.apache.kafka.common.errors.GroupSubscribedToTopicException" in line
            for line in refused), out
        committed = Committed(broker.bootstrap, group)
        try:
            assert committed.get(topic, parts) == commits, "a refused operation changed the commits"
        finally:
            committed.close()
    finally:
        member.close()

    out, err = consumer_groups(broker.bootstrap, "--describe", "--group", group, stderr=True)
    assert f"Consumer group '{group}' has no active members." in err, (out, err)
    rows = {int(r["PARTITION"]): r for r in table(out) if r.get("TOPIC") == topic}
    assert {p: int(r["CURRENT-OFFSET"]) for p, r in rows.items()} == commits
    assert all(r["CONSUMER-ID"] == "-" for r in rows.values()), rows

    out = consumer_groups(broker.bootstrap, "--reset-offsets", "--group", group, "--topic", topic,
                          "--to-earliest", "--execute")
    assert {int(r["PARTITION"]): int(r["NEW-OFFSET"]) for r in table(out)} == \
        {p: 0 for p in range(parts)}, out
    committed = Committed(broker.bootstrap, group)
    try:
        assert committed.get(topic, parts) == {p: 0 for p in range(parts)}
    finally:
        committed.close()
    assert_reads_from_zero = Consumer({"bootstrap.servers": broker.bootstrap, "group.id": group,
                                       "enable.auto.commit": False, "auto.offset.reset": "error"})
    firsts, count = {}, 0
    try:
        assert_reads_from_zero.subscribe([topic])
        end = deadline_after(60)
        while count < parts * per_part:
            assert time.monotonic() < end, f"after the reset the member read {count} records"
            for m in assert_reads_from_zero.consume(num_messages=300, timeout=0.5):
                assert not m.error(), m.error()
                firsts.setdefault(m.partition(), m.offset())
                count += 1
    finally:
        assert_reads_from_zero.close()
    assert firsts == {p: 0 for p in range(parts)}

    # --dry-run shows the new offsets and changes nothing; --delete-offsets (OffsetDelete).
    out = consumer_groups(broker.bootstrap, "--reset-offsets", "--group", group, "--topic", topic,
                          "--to-latest", "--dry-run")
    assert {int(r["PARTITION"]): int(r["NEW-OFFSET"]) for r in table(out)} == \
        {p: per_part for p in range(parts)}, out
    out = consumer_groups(broker.bootstrap, "--delete-offsets", "--group", group,
                          "--topic", f"{topic}:1")
    assert f"Request succeeded for deleting offsets from group {group}." in out, out
    assert [(r["TOPIC"], r["PARTITION"], r["STATUS"]) for r in table(out, "TOPIC")] == \
        [(topic, "1", "Successful")], out
    committed = Committed(broker.bootstrap, group)
    try:
        assert committed.get(topic, parts) == {0: 0, 1: None, 2: 0}
    finally:
        committed.close()

    out = consumer_groups(broker.bootstrap, "--delete", "--group", group)
    assert f"Deletion of requested consumer groups ('{group}') was successful." in out, out
    assert group not in consumer_groups(broker.bootstrap, "--list").split()
    committed = Committed(broker.bootstrap, group)
    try:
        assert committed.get(topic, parts) == {p: None for p in range(parts)}
    finally:
        committed.close()
