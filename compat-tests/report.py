#!/usr/bin/env python3
"""Write compat-tests/REPORT.md, the compatibility report card, from the latest result files:

  .cache/results/librdkafka-<broker>-<mode>.json   librdkafka/run.sh (librdkafka's tests/0xxx)
  .cache/results/franz-go-<broker>-<mode>.json     franz-go/run.sh (franz-go's pkg/kgo tests)
  .cache/results/kafkajs-<broker>-<mode>.json      kafkajs/run.sh (our kafkajs scenarios)
  .cache/results/core-<broker>.xml                 run-core.sh (our Python suite, JUnit XML)
  java/target/surefire-reports/TEST-*.xml          java/run.sh (our Java suite, surefire XML)
  java/target/client-3.9/surefire-reports/...      java/run.sh --client 3.9 (the same on the 3.9 client)

<mode> is `all` (every broker test: the full report) or `allow` (tests.allow: the CI run).
Usage: report.py [--out PATH] [--check]   (--check: exit 1 if no result file exists at all)
"""
import argparse
import datetime
import glob
import json
import os
import re
import sys
import xml.etree.ElementTree as ET
from pathlib import Path

HERE = Path(__file__).resolve().parent
RESULTS = HERE / ".cache" / "results"
BROKER_NAMES = {"sluice": "sluice", "kafka": "Apache Kafka 4.4.0"}
MODE_NAMES = {"all": "full run", "allow": "CI (tests.allow)", "tests": "selection"}
# Suites whose scenarios are ours (not the client's own tests): named so in the table.
SUITE_NAMES = {"kafkajs": "kafkajs (ours)"}


def count_allow(path: Path):
    if not path.exists():
        return None
    return sum(1 for line in path.read_text().splitlines() if line.split("#", 1)[0].strip())


def pinned(pattern, path: Path, default="?"):
    try:
        m = re.search(pattern, path.read_text(), re.M)
    except OSError:
        return default
    return m.group(1) if m else default


def day(iso: str):
    return iso[:10] if iso else "?"


def json_rows():
    rows = []
    for path in sorted(RESULTS.glob("*-*-*.json")):
        try:
            doc = json.loads(path.read_text())
        except (OSError, ValueError):
            continue
        if "suite" not in doc or "tests" not in doc or doc.get("mode") == "tests":
            continue  # a hand-picked selection (--tests) says nothing about the suite
        tests = doc["tests"].values()
        n = {s: sum(1 for t in tests if t["status"] == s)
             for s in ("pass", "fail", "skip", "excluded", "not-run")}
        rows.append({
            "suite": SUITE_NAMES.get(doc["suite"], doc["suite"]),
            "client": doc.get("client", doc["suite"]),
            "broker": doc["broker"], "mode": doc.get("mode", "?"),
            "run": n["pass"] + n["fail"] + n["skip"], "passed": n["pass"], "failed": n["fail"],
            "skipped": n["skip"], "excluded": n["excluded"], "date": day(doc.get("date", "")),
            "seconds": doc.get("seconds"),
            "allow": count_allow(HERE / doc["suite"] / "tests.allow"),
            "findings": f"{doc['suite']}/FINDINGS.md",
        })
    return rows


def junit_counts(paths):
    run = failed = skipped = 0
    seconds = 0.0
    stamp = None
    for p in paths:
        root = ET.parse(p).getroot()
        suites = [root] if root.tag == "testsuite" else root.iter("testsuite")
        for s in suites:
            run += int(s.get("tests", 0))
            failed += int(s.get("failures", 0)) + int(s.get("errors", 0))
            skipped += int(s.get("skipped", 0))
            seconds += float(s.get("time", 0) or 0)
            stamp = stamp or s.get("timestamp")
    if not stamp and paths:
        mtime = max(os.path.getmtime(p) for p in paths)
        stamp = datetime.datetime.fromtimestamp(mtime, datetime.timezone.utc).isoformat()
    return run, failed, skipped, round(seconds), day(stamp or "")


def python_rows():
    rows = []
    req = HERE / "python" / "requirements.txt"
    ck = pinned(r"^confluent-kafka==(\S+)", req)
    kp = pinned(r"^kafka-python==(\S+)", req)
    client = f"confluent-kafka {ck}, kafka-python {kp}, kcat"
    for broker in ("sluice", "kafka"):
        path = RESULTS / f"core-{broker}.xml"
        if not path.exists():
            continue
        run, failed, skipped, secs, date = junit_counts([path])
        rows.append({"suite": "python (ours)", "client": client, "broker": broker, "mode": "last run",
                     "run": run, "passed": run - failed - skipped, "failed": failed,
                     "skipped": skipped, "excluded": 0, "date": date, "seconds": secs,
                     "allow": None, "findings": "FINDINGS.md"})
    return rows


def java_rows():
    """One row per Java client the suite last ran on: Kafka's own (target/surefire-reports) and
    the older one of the client-3.9 profile (target/client-3.9/surefire-reports, tools aside)."""
    pom = HERE / "java" / "pom.xml"
    clients = [
        ("target", pinned(r"<kafka.version>([^<]+)</kafka.version>", pom)),
        ("target/client-3.9", pinned(r"<kafka.clients.version>(3[^<]+)</kafka.clients.version>", pom)),
    ]
    rows = []
    for build_dir, version in clients:
        reports = HERE / "java" / build_dir / "surefire-reports"
        paths = sorted(glob.glob(str(reports / "TEST-*.xml")))
        if not paths:
            continue
        run, failed, skipped, secs, date = junit_counts(paths)
        # The XML does not name the broker; the tests' output does: "<Class>: <kind> broker at ...".
        broker = "?"
        for out in sorted(glob.glob(str(reports / "*-output.txt"))):
            with open(out, errors="replace") as f:
                m = re.search(r": (sluice|kafka|external) broker at ", f.read(200000))
            if m:
                broker = m.group(1)
                break
        allow = count_allow(HERE / "java" / "tests.allow")
        rows.append({"suite": "java (ours)", "client": f"Apache Kafka Java client {version}",
                     "broker": broker, "mode": "last run", "run": run,
                     "passed": run - failed - skipped, "failed": failed, "skipped": skipped,
                     "excluded": 0, "date": date, "seconds": secs, "allow": allow,
                     "findings": "java/FINDINGS.md"})
    return rows


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--out", default=str(HERE / "REPORT.md"))
    ap.add_argument("--check", action="store_true")
    args = ap.parse_args()

    rows = json_rows() + python_rows() + java_rows()
    if not rows and args.check:
        print("report.py: no result files under compat-tests/.cache/results", file=sys.stderr)
        return 1
    order = {"librdkafka": 0, "franz-go": 1, "kafkajs (ours)": 2, "python (ours)": 3, "java (ours)": 4}
    rows.sort(key=lambda r: (order.get(r["suite"], 9), r["broker"] != "sluice",
                             r["mode"] != "all", r["mode"]))
    now = datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%d %H:%M UTC")
    lines = [
        "# Compatibility report card",
        "",
        f"Generated by `compat-tests/report.py` on {now} from the latest result files in",
        "`compat-tests/.cache/results/` and `compat-tests/java/target/{,client-3.9/}surefire-reports/`.",
        "",
        "- **run**: tests that ran (passed + failed + skipped). **excluded**: tests of the suite",
        "  that were not run because they cannot apply to any single-node broker run (for example",
        "  they need no broker at all, or upstream marks them as known issues); the suite's",
        "  FINDINGS.md lists why each failing test fails.",
        "- A *full run* runs every applicable test (`run.sh --all`); a *CI* run runs the",
        "  allowlist (`run.sh`), which must pass entirely; *last run* is whatever the suite ran",
        "  last (the Python and Java suites keep one report each, which a partial run replaces).",
        "",
        "| suite | client | broker | run | tests run | passed | failed | skipped | excluded "
        "| allowlisted | date | time |",
        "|---|---|---|---|---:|---:|---:|---:|---:|---:|---|---:|",
    ]
    for r in rows:
        secs = f"{r['seconds']} s" if r.get("seconds") is not None else ""
        allow = "" if r["allow"] is None else str(r["allow"])
        lines.append(
            f"| {r['suite']} | {r['client']} | {BROKER_NAMES.get(r['broker'], r['broker'])} "
            f"| {MODE_NAMES.get(r['mode'], r['mode'])} | {r['run']} | {r['passed']} | {r['failed']} "
            f"| {r['skipped']} | {r['excluded']} | {allow} | {r['date']} | {secs} |")
    if not rows:
        lines.append("| (no results yet: run the suites first) | | | | | | | | | | | |")
    lines += [
        "",
        "Why tests fail or are excluded: `librdkafka/FINDINGS.md`, `franz-go/FINDINGS.md`,",
        "`kafkajs/FINDINGS.md`, `FINDINGS.md` (Python suite) and the Java suite's README.",
        "",
    ]
    Path(args.out).write_text("\n".join(lines))
    print(f"report.py: wrote {args.out} ({len(rows)} rows)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
