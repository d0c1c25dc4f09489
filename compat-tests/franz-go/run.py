#!/usr/bin/env python3
"""Run franz-go's pkg/kgo tests against sluice or Apache Kafka and record one result per test.

Called by run.sh, which builds the kgo test binary first. Each top-level test runs in its own
test-binary process, and against sluice on its own fresh sluice (a free loopback port and an
empty data dir), so a panic or a hang only fails that test. Against Kafka one broker serves the
whole run (its start takes seconds); the tests use random topic and group names.

Which tests talk to a broker is read from the test sources of the pinned version: a test is a
broker test when it reaches, through the test files' own functions, one of the helpers that dial
KGO_SEEDS or the SASL seeds (adm, newTestClient, testClientOpts, getSeedBrokers, scramSeeds,
oauthSeeds). The others are unit tests that need no broker (they all pass with no broker at all);
they are recorded as excluded and not run.
"""
import argparse
import concurrent.futures
import os
import re
import shutil
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
COMPAT = HERE.parent
sys.path.insert(0, str(COMPAT / "python"))
from brokers import Broker, free_port  # noqa: E402  (stdlib only; shared with the Python suite)
from suite_results import finish, read_allow  # noqa: E402

TEST_TIMEOUT_S = int(os.environ.get("FRANZ_GO_TEST_TIMEOUT_S", "240"))
BROKER_HELPERS = {"adm", "newTestClient", "testClientOpts", "getSeedBrokers", "scramSeeds",
                  "oauthSeeds"}
# Tests whose KIP-848 sub-tests check, before calling anything, whether an earlier test of the
# process learned that the broker speaks KIP-848 (kgo's `allow848`, set by its `adm()` helper).
# Run alone they always skip those sub-tests, so each runs with a primer that calls `adm()` first,
# one test at a time (-test.parallel=1: the primer holds the only slot until its `adm()` call is
# done, and the sub-tests wait for the slot). A skipped /848 sub-test then fails the test.
PRIMED = {"TestGroupSimple": "Test848RegexBrokerResolves"}
# Tests with /848 sub-tests that fail if one is skipped: the primed ones, and TestTxnEtl, whose
# first topic is made through `adm()` before its sub-tests (three of its six use KIP-848 groups
# with transactional offsets).
CHECK_848 = {*PRIMED, "TestTxnEtl"}
# Log lines every test prints; never the reason of a failure.
NOISE = re.compile(r"deleting (topic|group)|NOT DELETING|unable to delete")


def classify(pkgdir: Path):
    """{test name: True if it talks to a broker}, for the Test* functions of the package."""
    funcs = {}
    for f in sorted(pkgdir.glob("*_test.go")):
        text = f.read_text(errors="replace")
        text = re.sub(r"/\*.*?\*/", " ", text, flags=re.S)
        text = re.sub(r"//[^\n]*", " ", text)
        text = re.sub(r'"(?:\\.|[^"\\\n])*"|`[^`]*`', '""', text)
        for part in re.split(r"(?m)^(?=func )", text):
            m = re.match(r"func\s+(?:\([^)]*\)\s*)?(\w+)", part)
            if m and m.group(1) != "init":  # init() sets the seeds; nothing calls it
                funcs[m.group(1)] = funcs.get(m.group(1), "") + part
    idents = {n: set(re.findall(r"\b[A-Za-z_]\w*\b", b)) for n, b in funcs.items()}
    broker = set(BROKER_HELPERS)
    changed = True
    while changed:
        changed = False
        for n, s in idents.items():
            if n not in broker and s & broker:
                broker.add(n)
                changed = True
    return {n: n in broker for n in funcs if re.match(r"Test[A-Z_0-9]", n)}



def reason_from(output: str, name: str):
    """The first error-looking lines the failed test printed, or the panic."""
    lines = output.splitlines()
    for i, line in enumerate(lines):
        if line.startswith("panic: "):
            return " ".join(l.strip() for l in lines[i:i + 2])[:400]
    picked = []
    for line in lines:
        m = re.match(r"^\s+(\w+_test\.go:\d+: .*)$", line)
        if m and not NOISE.search(line):
            picked.append(m.group(1).strip())
    # t.Error/t.Fatal lines come last in a failed test far more often than logs do
    return " | ".join(picked[-3:])[:500]


# The SASL tests get a second listener (SASL_PLAINTEXT, SCRAM-SHA-256 and OAUTHBEARER with
# Kafka's unsecured validator) and the env vars that point the tests at it; the SCRAM user is
# made with kafka-configs over the PLAINTEXT listener. On sluice each SASL test has its own
# broker; against Kafka the one broker of the run has the second listener too.
SASL_TESTS = {"TestSCRAMAuth", "TestSCRAMAuthBadCredentials", "TestOAuthAuth"}
SCRAM_USER, SCRAM_PASSWORD = "kgo", "kgo-secret"


def sasl_broker(kind, root, sluice_bin=None):
    """A started broker with the SASL listener, and that listener's address."""
    b = Broker(kind, root=root, sluice_bin=sluice_bin)
    sasl_port = free_port()
    b.overrides.update({
        "listeners": f"PLAINTEXT://127.0.0.1:{b.port},SASL://127.0.0.1:{sasl_port}",
        "listener.security.protocol.map": "PLAINTEXT:PLAINTEXT,SASL:SASL_PLAINTEXT,CONTROLLER:PLAINTEXT",
        "sasl.enabled.mechanisms": "SCRAM-SHA-256,OAUTHBEARER",
        "listener.name.sasl.scram-sha-256.sasl.jaas.config":
            "org.apache.kafka.common.security.scram.ScramLoginModule required;",
        "listener.name.sasl.oauthbearer.sasl.jaas.config":
            "org.apache.kafka.common.security.oauthbearer.OAuthBearerLoginModule required;",
    })
    b.start()
    res = subprocess.run([str(COMPAT / "kafka" / "run-class.sh"), "org.apache.kafka.tools.ConfigCommand",
                          "--bootstrap-server", b.bootstrap, "--alter", "--entity-type", "users",
                          "--entity-name", SCRAM_USER, "--add-config",
                          f"SCRAM-SHA-256=[iterations=8192,password={SCRAM_PASSWORD}]"],
                         capture_output=True, text=True, timeout=120)
    if res.returncode != 0:
        b.stop()
        raise RuntimeError(f"kafka-configs could not add the SCRAM user: {res.stdout}{res.stderr}"[-300:])
    return b, f"127.0.0.1:{sasl_port}"


class Run:
    def __init__(self, args):
        self.args = args
        self.logs = COMPAT / ".cache" / "franz-go" / "logs" / args.broker
        if self.logs.exists():
            shutil.rmtree(self.logs)
        self.logs.mkdir(parents=True)
        self.work = Path(tempfile.mkdtemp(prefix=f"kgo-{args.broker}-"))
        self.kafka = None
        self.kafka_sasl_seeds = None
        self.sasl_seeds = {}
        self.kafka_lock = threading.Lock()
        self.print_lock = threading.Lock()

    def broker_for(self, name):
        if self.args.broker == "kafka":
            with self.kafka_lock:
                if self.kafka is None:
                    self.kafka, self.kafka_sasl_seeds = sasl_broker("kafka", self.work / "kafka")
                if name in SASL_TESTS:
                    self.sasl_seeds[name] = self.kafka_sasl_seeds
                return self.kafka, False
        if name in SASL_TESTS:
            b, self.sasl_seeds[name] = sasl_broker("sluice", self.work / name, self.args.sluice)
            return b, True
        b = Broker("sluice", root=self.work / name, sluice_bin=self.args.sluice)
        return b.start(), True

    def run_test(self, name):
        t0 = time.monotonic()
        try:
            broker, own = self.broker_for(name)
        except Exception as e:  # noqa: BLE001
            return name, {"status": "fail", "seconds": 0.0, "reason": f"broker did not start: {e}"[:300]}
        env = dict(os.environ, KGO_SEEDS=broker.bootstrap, KGO_TEST_RF="1",
                   KGO_TEST_RECORDS=str(self.args.records))
        for k in ("KGO_TEST_TLS", "KGO_TEST_SCRAM", "KGO_TEST_SCRAM_SEEDS", "KGO_TEST_OAUTH_SEEDS",
                  "KGO_TEST_UNSAFE", "KGO_TEST_CHAOS"):
            env.pop(k, None)
        if name in self.sasl_seeds:
            env.update(KGO_TEST_SCRAM=f"{SCRAM_USER}:{SCRAM_PASSWORD}",
                       KGO_TEST_SCRAM_SEEDS=self.sasl_seeds[name],
                       KGO_TEST_OAUTH_SEEDS=self.sasl_seeds[name])
        pattern = f"^{name}$"
        if name in PRIMED:
            pattern = f"^({PRIMED[name]}|{name})$"
        cmd = [self.args.testbin, "-test.run", pattern, "-test.v", "-test.count=1",
               f"-test.timeout={TEST_TIMEOUT_S}s"]
        if name in PRIMED:
            cmd.append("-test.parallel=1")
        log = self.logs / f"{name}.log"
        with open(log, "wb") as out:
            try:
                proc = subprocess.run(cmd, cwd=self.args.pkgdir, env=env, stdout=out,
                                      stderr=subprocess.STDOUT, timeout=TEST_TIMEOUT_S + 60)
                rc = proc.returncode
            except subprocess.TimeoutExpired:
                rc = "timeout"
        output = log.read_text(errors="replace")
        broker_note = ""
        if own:
            if not broker.is_running():
                broker_note = "sluice exited during the test"
            try:
                broker.stop()
            except AssertionError as e:
                broker_note = broker_note or str(e)
            shutil.copy(broker.output_file, self.logs / f"{name}.broker.out")
        m = re.search(rf"(?m)^--- (PASS|FAIL|SKIP): {re.escape(name)} \(([\d.]+)s\)", output)
        secs = float(m.group(2)) if m else round(time.monotonic() - t0, 1)
        skipped_848 = re.search(rf"(?m)^\s+--- SKIP: {re.escape(name)}/\S*848", output)
        if m and m.group(1) == "PASS" and name in CHECK_848 and skipped_848:
            status, reason = "fail", "a KIP-848 sub-test was skipped: the broker did not offer KIP-848"
        elif m and m.group(1) == "PASS":
            status, reason = "pass", ""
        elif m and m.group(1) == "SKIP":
            skip = re.findall(r"^\s+\w+_test\.go:\d+: (.*)$", output.split(f"--- SKIP: {name}")[0], re.M)
            status, reason = "skip", (skip[-1] if skip else "skipped")
        else:
            status = "fail"
            reason = reason_from(output, name)
            if rc == "timeout":
                reason = f"killed after {TEST_TIMEOUT_S + 60} s; {reason}"
            elif not m:
                reason = reason or f"test binary exited with {rc} and no result line"
        if broker_note and status == "fail":
            reason = f"{broker_note}; {reason}"
        result = {"status": status, "seconds": secs, "reason": reason[:500]}
        with self.print_lock:
            msg = f": {reason}" if reason else ""
            print(f"{status.upper():4} {name} ({secs:.1f} s){msg}", flush=True)
        return name, result

    def close(self):
        if self.kafka is not None:
            try:
                self.kafka.stop()
            except AssertionError:
                self.kafka.kill9()
        if not self.args.keep:
            shutil.rmtree(self.work, ignore_errors=True)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--testbin", required=True)
    ap.add_argument("--pkgdir", required=True)
    ap.add_argument("--version", required=True)
    ap.add_argument("--sluice")
    ap.add_argument("--kafka", action="store_true")
    ap.add_argument("--all", action="store_true")
    ap.add_argument("--tests", help="comma-separated test names")
    ap.add_argument("-j", type=int, default=int(os.environ.get("FRANZ_GO_JOBS", "2")))
    ap.add_argument("--records", type=int, default=int(os.environ.get("KGO_TEST_RECORDS", "10000")))
    ap.add_argument("--keep", action="store_true", help="keep broker data dirs")
    args = ap.parse_args()
    args.broker = "kafka" if args.kafka else "sluice"
    mode = "tests" if args.tests else ("all" if args.all else "allow")

    listed = subprocess.run([args.testbin, "-test.list", "^Test"], capture_output=True, text=True,
                            cwd=args.pkgdir, check=True).stdout.split()
    kinds = classify(Path(args.pkgdir))
    allow = read_allow(HERE / "tests.allow")
    unknown = [n for n in allow if n not in listed]
    if unknown:
        print(f"run.py: tests.allow names tests the kgo test binary does not have: {unknown}",
              file=sys.stderr)
        return 2
    wanted = set(args.tests.split(",")) if args.tests else None

    results, selected = {}, []
    for name in listed:
        if not kinds.get(name, True):
            results[name] = {"status": "excluded", "seconds": 0.0,
                             "reason": "unit test: needs no broker"}
        elif mode == "allow" and name not in allow:
            results[name] = {"status": "not-run", "seconds": 0.0, "reason": "not in tests.allow"}
        elif wanted is not None and name not in wanted:
            results[name] = {"status": "not-run", "seconds": 0.0, "reason": "not selected"}
        else:
            selected.append(name)

    target = args.sluice if args.broker == "sluice" else "Apache Kafka (kafka/start-kafka.sh)"
    print(f"run.py: franz-go {args.version} pkg/kgo tests against {args.broker} ({target}); "
          f"{len(selected)} tests, mode {mode}, -j{args.j}, KGO_TEST_RECORDS={args.records}", flush=True)
    t0 = time.monotonic()
    run = Run(args)
    try:
        with concurrent.futures.ThreadPoolExecutor(max_workers=max(1, args.j)) as pool:
            for name, res in pool.map(run.run_test, selected):
                results[name] = res
        if mode == "allow":
            # A failed test gets a second (sequential) run; a real regression fails both.
            for name in selected:
                first = results[name]
                if first["status"] == "pass":
                    continue
                print(f"run.py: retrying {name} once", flush=True)
                _, res = run.run_test(name)
                if res["status"] == "pass":
                    res["reason"] = f"flaky: passed on retry; first run: {first['reason']}"[:500]
                    print(f"FLAKY {name}: {res['reason']}", flush=True)
                results[name] = res
    finally:
        run.close()
    seconds = round(time.monotonic() - t0)

    results = dict(sorted(results.items()))
    return finish(suite="franz-go", client=f"franz-go {args.version}", client_version=args.version,
                  broker=args.broker, broker_detail=target, mode=mode, seconds=seconds,
                  results=results, allow=allow, logs=run.logs, excluded_note="unit tests excluded",
                  extra={"records": args.records})


if __name__ == "__main__":
    sys.exit(main())
