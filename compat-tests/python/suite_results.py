"""What the client-suite runners (franz-go/run.py, librdkafka/run.py) share after their tests ran:
reading tests.allow, writing the results document that report.py turns into REPORT.md, and the
closing summary with its exit code. Standard library only."""
import datetime
import json
from pathlib import Path

RESULTS = Path(__file__).resolve().parent.parent / ".cache" / "results"


def read_allow(path: Path):
    """The test names a tests.allow lists, without comments and blank lines."""
    names = []
    for line in path.read_text().splitlines():
        line = line.split("#", 1)[0].strip()
        if line:
            names.append(line)
    return names


def finish(*, suite, client, client_version, broker, broker_detail, mode, seconds, results, allow,
           logs, excluded_note="excluded", extra=None):
    """Writes RESULTS/<suite>-<broker>-<mode>.json, prints what passed, failed and regressed, and
    returns the runner's exit code: in allow mode any failure, skip or allowlisted test not
    passing fails the run; otherwise only failures do."""
    RESULTS.mkdir(parents=True, exist_ok=True)
    out = RESULTS / f"{suite}-{broker}-{mode}.json"
    doc = {"suite": suite, "client": client, "client_version": client_version, "broker": broker,
           "broker_detail": broker_detail, "mode": mode,
           "date": datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds"),
           "seconds": seconds, **(extra or {}), "tests": results}
    out.write_text(json.dumps(doc, indent=1) + "\n")

    ran = {n: r for n, r in results.items() if r["status"] in ("pass", "fail", "skip")}
    passed = sorted(n for n, r in ran.items() if r["status"] == "pass")
    failed = sorted(n for n, r in ran.items() if r["status"] == "fail")
    skipped = sorted(n for n, r in ran.items() if r["status"] == "skip")
    excluded = sum(1 for r in results.values() if r["status"] == "excluded")
    if mode == "all" and broker == "sluice":
        new = [n for n in passed if n not in allow]
        if new:
            print("passing but not in tests.allow (add them):\n  " + "\n  ".join(new))
    # An allowlisted test that ran and did not pass, or that the runner now excludes, is lost;
    # only a test left out by a --test selection is not.
    lost = [n for n in allow
            if (n in ran and results[n]["status"] != "pass")
            or results.get(n, {}).get("status") == "excluded"]
    if lost and broker == "sluice":
        print("REGRESSION: allowlisted tests not passing:\n  " + "\n  ".join(lost))
    print(f"run.py: {len(ran)} tests in {seconds} s ({excluded} {excluded_note}); results in {out}; "
          f"logs in {logs}")
    print(f"{len(passed)} passed, {len(failed)} failed, {len(skipped)} skipped")
    if mode == "allow":
        return 1 if lost or failed or skipped else 0
    return 1 if failed else 0
