"""One confluent-kafka consumer-group member, run as its own process by test_groups.py so that
the test can SIGKILL it (no LeaveGroup: the broker must notice through the session timeout).

    python group_worker.py BOOTSTRAP GROUP TOPIC STRATEGY OUT_FILE

STRATEGY is a classic assignor (`range`, `cooperative-sticky`), or `consumer:ASSIGNOR` for the
KIP-848 consumer protocol (`group.protocol=consumer`, `group.remote.assignor=ASSIGNOR`), whose
session timeout and heartbeat interval the broker sets.

It subscribes to TOPIC, and after every non-empty batch writes the records it processed to
OUT_FILE and then commits synchronously (`commit(asynchronous=False)`): a record is written down
before its offset is committed, so anything committed has been recorded as processed.
It also commits what it consumed when partitions are revoked.
Once OUT_FILE.hold exists, the next batch is recorded but not committed: the worker reports
{"k": "holding", "r": [..]} and waits to be SIGKILLed (librdkafka keeps heartbeating meanwhile).

OUT_FILE gets one JSON object per line, each with "k" (kind) and "t" (time.monotonic(), which is
comparable between processes on Linux):
  {"k": "assignment", "parts": [..]}   the full assignment, whenever it changed
  {"k": "assign"|"revoke"|"lost", "parts": [..]}   each rebalance callback
  {"k": "recs", "r": [[partition, offset, value], ..]}
  {"k": "commit_error", "where": "loop"|"revoke"|"close", "error": NAME}
  {"k": "error", "error": TEXT}         a consumer error delivered with a message
  {"k": "closed"}                       after close() on SIGTERM
SIGTERM: finish the batch, commit, close() (LeaveGroup), exit 0.
"""
import json
import os
import signal
import sys
import time

from confluent_kafka import Consumer, KafkaError, KafkaException


class Worker:
    def __init__(self, bootstrap, group, topic, strategy, out_path):
        self.out = open(out_path, "a", buffering=1)
        self.hold_path = out_path + ".hold"
        self.stop = False
        self.dirty = False  # consumed records whose offsets are not committed yet
        conf = {
            "bootstrap.servers": bootstrap,
            "group.id": group,
            "enable.auto.commit": False,
            "auto.offset.reset": "earliest",
        }
        if strategy.startswith("consumer:"):
            conf.update({"group.protocol": "consumer",
                         "group.remote.assignor": strategy.split(":", 1)[1]})
        else:
            conf.update({"partition.assignment.strategy": strategy,
                         "session.timeout.ms": 6000, "heartbeat.interval.ms": 1000})
        self.consumer = Consumer(conf)
        self.consumer.subscribe([topic], on_assign=self.on_assign, on_revoke=self.on_revoke,
                                on_lost=self.on_lost)

    def emit(self, kind, **fields):
        self.out.write(json.dumps({"k": kind, "t": time.monotonic(), **fields}) + "\n")
        self.out.flush()

    def commit(self, where):
        try:
            self.consumer.commit(asynchronous=False)
            self.dirty = False
        except KafkaException as e:
            err = e.args[0]
            if err.code() == KafkaError._NO_OFFSET:
                self.dirty = False
            else:
                self.emit("commit_error", where=where, error=err.name())

    def on_assign(self, consumer, parts):
        self.emit("assign", parts=sorted(p.partition for p in parts))

    def on_revoke(self, consumer, parts):
        self.emit("revoke", parts=sorted(p.partition for p in parts))
        if self.dirty:
            self.commit("revoke")

    def on_lost(self, consumer, parts):
        self.emit("lost", parts=sorted(p.partition for p in parts))

    def run(self):
        assignment = None
        while not self.stop:
            msgs = self.consumer.consume(num_messages=500, timeout=0.1)
            recs = []
            for m in msgs:
                if m.error():
                    self.emit("error", error=str(m.error()))
                    continue
                recs.append([m.partition(), m.offset(), m.value().decode()])
            if recs:
                self.emit("recs", r=recs)
                self.dirty = True
                if os.path.exists(self.hold_path):
                    self.emit("holding", r=recs)
                    while True:  # processed, never committed; the test SIGKILLs us now
                        time.sleep(1)
            if self.dirty:
                self.commit("loop")
            now = sorted(tp.partition for tp in self.consumer.assignment())
            if now != assignment:
                assignment = now
                self.emit("assignment", parts=now)
        if self.dirty:
            self.commit("close")
        self.consumer.close()
        self.emit("closed")


def main():
    worker = Worker(*sys.argv[1:6])

    def on_term(*_):
        worker.stop = True

    signal.signal(signal.SIGTERM, on_term)
    worker.run()


if __name__ == "__main__":
    main()
