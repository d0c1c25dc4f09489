"""Kafka's DumpLogSegments (`kafka-dump-log`) reads the transaction files the broker wrote.

One librdkafka transactional producer writes four transactions to a 1-partition topic with
1 MiB segments: committed, aborted, aborted with 200 KB records so that the transaction spans a
segment roll, committed. After a graceful stop:
- `--transaction-log-decoder` on the coordinator's `__transaction_state` partition decodes the
  transactional.id's state records: Empty, then Ongoing / Prepare* / Complete* per transaction,
  with the producer id, epoch, timeout and partitions;
- `--print-data-log` on the data segments shows each record at its acknowledged offset in a
  transactional batch of that producer, and a COMMIT or ABORT control record right after each
  transaction;
- the `.txnindex` files hold exactly one entry per aborted transaction, in the segment that
  holds its ABORT marker: producer id, first offset (for the spanning one, in the segment
  before), last offset (the marker), last stable offset (the marker + 1).
"""
import json
import re

import pytest

from helpers import create_topic, unique
from txn import BROKER_OVERRIDES, Sender, coordinator_partition, dump, txn_producer

BATCH_RE = re.compile(r"^baseOffset: (\d+) lastOffset: (\d+) count: (\d+) baseSequence: (-?\d+) "
                      r"lastSequence: (-?\d+) producerId: (-?\d+) producerEpoch: (-?\d+) "
                      r"partitionLeaderEpoch: (-?\d+) isTransactional: (\w+) isControl: (\w+) ")
RECORD_RE = re.compile(r"^\| offset: (\d+) .*?headerKeys: \[[^\]]*\] (.*)$")
TXNINDEX_RE = re.compile(r"^version: (\d+) producerId: (-?\d+) firstOffset: (\d+) lastOffset: (\d+) "
                         r"lastStableOffset: (\d+)$")


def parse_data(stdout):
    """[(offset, batch dict, record text after the header keys)] for every record."""
    out, batch = [], None
    for line in stdout.splitlines():
        if (m := BATCH_RE.match(line)):
            batch = dict(pid=int(m[6]), epoch=int(m[7]), transactional=m[9] == "true",
                         control=m[10] == "true")
        elif (m := RECORD_RE.match(line)):
            out.append((int(m[1]), batch, m[2]))
    return out


# TransactionLogValue.TransactionStatus ids: 4.4's DumpLogSegments prints the names, 4.1's the ids.
STATES = {0: "Empty", 1: "Ongoing", 2: "PrepareCommit", 3: "PrepareAbort", 4: "CompleteCommit",
          5: "CompleteAbort", 6: "Dead", 7: "PrepareEpochFence"}


def parse_txn_log(stdout):
    """[(key json, value json or None)] of the decoded __transaction_state records."""
    out = []
    for line in stdout.splitlines():
        if line.startswith("| offset: "):
            key = line.split(" key: ", 1)[1].split(" payload: ", 1)[0]
            value = line.split(" payload: ", 1)[1] if " payload: " in line else None
            out.append((json.loads(key), json.loads(value) if value and value != "<DELETE>" else None))
    return out


@pytest.mark.control
def test_dump_log_decodes_transaction_state_markers_and_txnindex(broker_factory):
    broker = broker_factory(BROKER_OVERRIDES)
    topic, tid = unique("txn-dump"), unique("dump")
    create_topic(broker.bootstrap, topic, 1, config={"segment.bytes": "1048576"})
    s = Sender(txn_producer(broker.bootstrap, tid), topic)
    plan = [("commit", 3, 10), ("abort", 3, 10), ("abort", 8, 200_000), ("commit", 2, 10)]
    txns = []
    for outcome, n, size in plan:
        s.producer.begin_transaction()
        sent = [s.send(0, f"{outcome}-{len(txns)}-{i}-" + "x" * size) for i in range(n)]
        getattr(s.producer, outcome + "_transaction")(60)
        txns.append((outcome, sent))
    s.producer.close()
    broker.stop()

    # __transaction_state: the id's records, in order.
    state_dir = broker.log_dir / f"__transaction_state-{coordinator_partition(tid)}"
    logs = sorted(state_dir.glob("*.log"))
    assert logs, f"no segments in {state_dir}"
    decoded = [(k, v) for k, v in parse_txn_log(dump(logs, "--transaction-log-decoder"))
               if k["data"]["transactionalId"] == tid]
    states = [STATES.get(v["data"]["transactionStatus"], v["data"]["transactionStatus"])
              for _, v in decoded]
    want = ["Empty"]
    for outcome, _, _ in plan:
        word = "Commit" if outcome == "commit" else "Abort"
        want += ["Ongoing", f"Prepare{word}", f"Complete{word}"]
    assert states == want, f"transaction states of {tid}: {states}"
    pids = {v["data"]["producerId"] for _, v in decoded}
    assert len(pids) == 1, f"one producer id: {pids}"
    pid = pids.pop()
    assert {v["data"]["transactionTimeoutMs"] for _, v in decoded} == {60000}
    for (_, v), state in zip(decoded, states):
        parts = v["data"]["transactionPartitions"]
        if state == "Empty":
            assert parts is None, v
        elif state.startswith("Complete"):
            assert parts == [], v
        else:
            assert parts == [{"topic": topic, "partitionIds": [0]}], v

    # The data segments: records at their offsets, a marker after each transaction.
    segments = sorted((broker.log_dir / f"{topic}-0").glob("*.log"))
    assert len(segments) >= 2, f"the 200 KB records must roll the 1 MiB segment: {segments}"
    records = parse_data(dump(segments, "--print-data-log"))
    want_records, markers, expected_index = [], [], []
    for outcome, sent in txns:
        want_records += [(o, f"key: {v} payload: {v}") for _, o, v in sent]
        marker = sent[-1][1] + 1
        markers.append((marker, "ABORT" if outcome == "abort" else "COMMIT"))
        want_records.append((marker, f"endTxnMarker: {markers[-1][1]} coordinatorEpoch: 0"))
        if outcome == "abort":
            expected_index.append((marker, (0, pid, sent[0][1], marker, marker + 1)))
    assert [(o, text) for o, _, text in records] == want_records
    assert all(b["transactional"] and b["pid"] == pid for _, b, _ in records), \
        "every batch transactional, of the one producer"
    assert [o for o, b, _ in records if b["control"]] == [m for m, _ in markers]

    # .txnindex: each aborted transaction in the segment that holds its ABORT marker.
    bases = [int(p.stem) for p in segments]
    want_index = {}
    for marker, entry in expected_index:
        base = max(b for b in bases if b <= marker)
        want_index.setdefault(f"{base:020d}.txnindex", []).append(entry)
    index_files = sorted((broker.log_dir / f"{topic}-0").glob("*.txnindex"))
    got_index, current = {}, None
    for line in dump(index_files).splitlines():
        if line.startswith("Dumping "):
            current = line.split("/")[-1]
        elif (m := TXNINDEX_RE.match(line)):
            got_index.setdefault(current, []).append(tuple(int(x) for x in m.groups()))
        elif line.strip():
            raise AssertionError(f"unexpected txnindex dump line: {line}")
    assert got_index == want_index
    spanning = expected_index[1][1]
    assert max(b for b in bases if b <= spanning[2]) < max(b for b in bases if b <= spanning[3]), \
        "the spanning aborted transaction starts in an earlier segment than its marker"
