#!/usr/bin/env python3
"""Rebalance time of a 10-member consumer group when one member leaves and when one joins,
for the classic protocol and for the KIP-848 consumer protocol, on sluice and Apache Kafka 4.4.

    benches/rebalance.py [--sluice BIN] [--reps 3] [--members 10] [--partitions 30]

Each repetition starts a fresh broker (one at a time; sluice then Kafka, alternating order),
forms a group of `--members` confluent-kafka consumers (compat-tests/python/group_worker.py,
each in its own process) on a topic of `--partitions` partitions while nothing is produced, then:

- leave: one member closes (SIGTERM: commit, close, LeaveGroup or heartbeat -1); the time until
  the others own every partition, each exactly once;
- join: a new member starts; the time until all members own partitions again, each partition
  once.

Times are measured from the action (the SIGTERM, the new member's process start) to the first
moment the members' reported assignments give every member some partitions and every partition
one owner. Classic members use the
`range` assignor with librdkafka's defaults (session 45 s, heartbeat 3 s); consumer-protocol
members `group.remote.assignor=uniform`, with the brokers' defaults (heartbeat interval 5 s,
`group.consumer.assignment.interval.ms` 1 s). Both brokers run with their defaults except
`group.initial.rebalance.delay.ms=300`. Prints a JSON line per measurement and a table of
medians; writes benches/rebalance-results.json.
"""
import argparse
import json
import statistics
import sys
import tempfile
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
REPO = HERE.parent
sys.path.insert(0, str(REPO / "compat-tests" / "python"))
from brokers import Broker  # noqa: E402
from groups import WorkerProc, owners_ok, wait_until  # noqa: E402
from helpers import create_topic, unique  # noqa: E402

PROTOCOLS = {"classic": "range", "consumer": "consumer:uniform"}


def settled_since(workers, partitions, t0):
    """Seconds from t0 until the workers' reported assignments first gave every worker some
    partitions and every partition exactly one owner."""
    times = sorted({t for w in workers for t, _ in w.assignments if t > t0})
    for t in times:
        owned = [w.assignment_at(t) for w in workers]
        if all(owned) and sorted(p for o in owned for p in o) == list(range(partitions)):
            return t - t0
    return None


def measure(broker, protocol, members, partitions, work):
    topic, group = unique(f"rb-{protocol}"), unique(f"rbg-{protocol}")
    create_topic(broker.bootstrap, topic, partitions)
    workers = {}
    strategy = PROTOCOLS[protocol]

    def live():
        return [w for w in workers.values() if w.live]

    def tick():
        for w in workers.values():
            w.poll()

    def settled(need_all):
        return owners_ok(live(), partitions, need_all_members=need_all)

    try:
        for i in range(members):
            workers[f"m{i}"] = WorkerProc(f"m{i}", broker.bootstrap, group, topic, strategy, work)
        wait_until(lambda: settled(True), 180, lambda: "the group did not form", tick)
        time.sleep(2)
        tick()
        t_leave = time.monotonic()
        workers["m0"].terminate()
        wait_until(lambda: settled(True), 120, lambda: "no settlement after the leave", tick)
        leave_s = settled_since(live(), partitions, t_leave)
        time.sleep(2)
        tick()
        joiner = WorkerProc("joiner", broker.bootstrap, group, topic, strategy, work)
        workers["joiner"] = joiner
        wait_until(lambda: settled(True), 120, lambda: "no settlement after the join", tick)
        join_s = settled_since(live(), partitions, joiner.started)
        return {"leave_s": leave_s, "join_s": join_s}
    finally:
        for w in workers.values():
            w.stop_quietly()


def run_meta(args):
    """When, on what commit and how loaded: what RESULTS.md says about the run."""
    import os
    import subprocess
    commit = subprocess.run(["git", "-C", str(REPO), "rev-parse", "HEAD"],
                            capture_output=True, text=True).stdout.strip()
    return {
        "date": time.strftime("%Y-%m-%d %H:%M:%S UTC", time.gmtime()),
        "commit": commit,
        "load_at_end": os.getloadavg()[0],
        "reps": args.reps,
        "members": args.members,
        "partitions": args.partitions,
    }


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--sluice", default=str(REPO / "target" / "release" / "sluice"))
    ap.add_argument("--reps", type=int, default=3)
    ap.add_argument("--members", type=int, default=10)
    ap.add_argument("--partitions", type=int, default=30)
    args = ap.parse_args()
    results = []
    for rep in range(args.reps):
        order = ["sluice", "kafka"] if rep % 2 == 0 else ["kafka", "sluice"]
        for kind in order:
            with tempfile.TemporaryDirectory(prefix=f"rebalance-{kind}-") as root:
                broker = Broker(kind, root=root, overrides={"group.initial.rebalance.delay.ms": 300},
                                sluice_bin=args.sluice if kind == "sluice" else None).start()
                try:
                    for protocol in PROTOCOLS:
                        work = Path(root) / f"w-{protocol}"
                        work.mkdir()
                        m = measure(broker, protocol, args.members, args.partitions, work)
                        row = {"broker": kind, "protocol": protocol, "rep": rep, **m}
                        print(json.dumps(row), flush=True)
                        results.append(row)
                finally:
                    broker.stop()
    meta = run_meta(args)
    (HERE / "rebalance-results.json").write_text(
        json.dumps({"meta": meta, "results": results}, indent=1) + "\n")
    print(f"\n| {args.members}-member group | sluice | Kafka 4.4 |\n|---|---|---|")
    for protocol in PROTOCOLS:
        for what in ("leave_s", "join_s"):
            cells = []
            for kind in ("sluice", "kafka"):
                xs = [r[what] for r in results if r["broker"] == kind and r["protocol"] == protocol
                      and r[what] is not None]
                cells.append(f"{statistics.median(xs):.2f} s" if xs else "n/a")
            print(f"| {protocol}, one member {what[:-2]}s | {cells[0]} | {cells[1]} |")


if __name__ == "__main__":
    main()
