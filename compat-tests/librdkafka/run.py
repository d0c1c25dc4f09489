#!/usr/bin/env python3
"""Run librdkafka's test-runner against sluice or Apache Kafka and record one result per test.

Called by run.sh, which builds the test-runner first. Each test number (0001, 0045, ...) runs in
its own test-runner process, and against sluice also on its own fresh sluice (a free loopback
port and an empty data dir), so a crash or a timeout only fails that number. Against Kafka one
broker serves the whole run (its start takes seconds); topic names are randomised.

The tests come from the `tests[]` table in tests/test.c. Tests flagged TEST_F_LOCAL (they need no
broker, or use librdkafka's in-process mock cluster), TEST_F_MANUAL and TEST_F_KNOWN_ISSUE
(skipped by librdkafka's own runs) are recorded as excluded and never run. The tests of the
"noautocreate" scenario run on a broker with auto.create.topics.enable=false, as upstream does.
"""
import argparse
import concurrent.futures
import json
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
from brokers import Broker  # noqa: E402  (stdlib only; shared with the Python suite)
from suite_results import finish, read_allow  # noqa: E402
from tls_certs import make_certs, openssl  # noqa: E402

KAFKA_LIBS = COMPAT / ".cache" / "kafka" / "libs"
# What test.c's TEST_BRKVER checks compare with; the reference broker is Apache Kafka 4.4.0.
BROKER_VERSION = "4.4.0"
# As in librdkafka's trivup scenarios (tests/scenarios/default.json): 4 partitions per
# auto-created topic; and as librdkafka's trivup cluster runs its brokers, with an authorizer
# that allows everyone until a test adds ACLs (the ACL tests add them with kafka-acls.sh).
# Everything else keeps the broker's defaults.
BROKER_OVERRIDES = {
    "num.partitions": "4",
    "authorizer.class.name": "org.apache.kafka.metadata.authorizer.StandardAuthorizer",
    "allow.everyone.if.no.acl.found": "true",
}
SCENARIO_OVERRIDES = {
    "default": {},
    "noautocreate": {"auto.create.topics.enable": "false"},
    # SASL tests: the listener named PLAINTEXT speaks SASL_PLAINTEXT with PLAIN users, as the
    # runner's trivup SASL setups do; test.conf carries the client's sasl.* (SCENARIO_CONF).
    "sasl": {
        "listener.security.protocol.map": "PLAINTEXT:SASL_PLAINTEXT,CONTROLLER:PLAINTEXT",
        "sasl.enabled.mechanisms": "PLAIN",
        "sasl.mechanism.inter.broker.protocol": "PLAIN",
        "listener.name.plaintext.plain.sasl.jaas.config":
            'org.apache.kafka.common.security.plain.PlainLoginModule required username="admin" '
            'password="admin-secret" user_admin="admin-secret" user_testuser="testpass";',
    },
}
SCENARIO_CONF = {"sasl": "security.protocol=SASL_PLAINTEXT\nsasl.mechanism=PLAIN\n"
                         "sasl.username=testuser\nsasl.password=testpass\n"}
# The SSL scenario (`Run.ssl`): the listener named PLAINTEXT speaks SSL and requires client
# certificates, as trivup's SSL clusters do; its broker settings, test.conf lines and the
# runner's SSL_* environment are made with the certificates when the run starts.
SCENARIO_OVERRIDES["ssl"] = {}
# Scenarios of librdkafka's own (passed to test-runner with -s); the others are this harness's.
RUNNER_SCENARIOS = {"noautocreate"}
# Tests that run in a scenario of this harness instead of their own.
TEST_SCENARIO = {"0135_sasl_credentials": "sasl", "0097_ssl_verify": "ssl"}
SSL_PASSWORD = "use_strong_password_keystore_client"
# Tests that bundle many broker APIs run once per sub-test (test-runner's SUBTESTS filter, a
# substring of the sub-test's function name), so that one API's failure does not hide the others.
# Their results are named "<test>/<sub-test function>".
SPLIT = {
    "0081_admin": [
        "do_test_unclean_destroy", "do_test_CreateTopics", "do_test_DeleteTopics",
        "do_test_CreatePartitions", "do_test_CreateAcls", "do_test_DescribeAcls",
        "do_test_DeleteAcls", "do_test_AlterConfigs", "do_test_DescribeConfigs",
        "do_test_DeleteRecords", "do_test_ListConsumerGroups", "do_test_DescribeConsumerGroups",
        "do_test_DeleteGroups", "do_test_DeleteConsumerGroupOffsets",
        "do_test_AlterConsumerGroupOffsets", "do_test_ListConsumerGroupOffsets",
    ],
}
# Tests run without quick mode (-Q): all their sub-tests are non-quick, so quick mode runs
# nothing of them and they pass vacuously. 0061's sub-tests measure consumer lag without and
# with transactions (read_committed: the lag counts to the last stable offset, and its end
# offset skips the markers). 0055_producer_latency is the same (its last sub-test a
# transactional producer) but measures latencies, which librdkafka itself skips on CI.
FULL_MODE = {"0061_consumer_lag"}
UNIT_TIMEOUT_S = 600  # a safety net; test-runner enforces each test's own timeout
ANSI = re.compile(r"\x1b\[[0-9;]*m|\x1b\(B")


def parse_tests(test_c: Path):
    """The tests[] table: name, flags, scenario, in test.c order."""
    text = test_c.read_text(errors="replace")
    start = text.index("struct test tests[] = {")
    end = text.index("{NULL}}", start)
    body = re.sub(r"/\*.*?\*/", "", text[start:end], flags=re.S)
    body = "\n".join(line for line in body.splitlines() if not line.lstrip().startswith("#"))
    tests, i = [], 0
    while (j := body.find("_TEST(", i)) >= 0:
        k = p = j + len("_TEST(")
        depth = 1
        while depth:
            depth += {"(": 1, ")": -1}.get(body[p], 0)
            p += 1
        inner = body[k:p - 1]
        name, rest = inner.split(",", 1)
        flags = set(re.findall(r"TEST_F_\w+", rest.split(",", 1)[0]))
        m = re.search(r'\.scenario\s*=\s*"([^"]*)"', inner)
        name = name.strip()
        scenario = m.group(1) if m else "default"
        for sub in SPLIT.get(name, [None]):
            tests.append({"name": f"{name}/{sub}" if sub else name, "runner_name": name,
                          "subtest": sub, "flags": flags, "scenario": scenario})
        i = p
    return tests


def exclusion(test):
    f = test["flags"]
    if "TEST_F_LOCAL" in f:
        return "local: needs no broker, or runs on librdkafka's in-process mock cluster"
    if "TEST_F_MANUAL" in f:
        return "manual test"
    if "TEST_F_KNOWN_ISSUE" in f:
        return "marked TEST_F_KNOWN_ISSUE upstream (librdkafka's own runs skip it)"
    scenarios = test["scenario"].split(",")
    if not any(s in SCENARIO_OVERRIDES for s in scenarios):
        return f"needs test scenario {test['scenario']}"
    return None


def scenario_of(test):
    if test["runner_name"] in TEST_SCENARIO:
        return TEST_SCENARIO[test["runner_name"]]
    return next(s for s in test["scenario"].split(",") if s in SCENARIO_OVERRIDES)



def parse_summary(stdout: str):
    """name -> (state, seconds, reason) from the last summary table test-runner printed."""
    rows = {}
    for raw in stdout.splitlines():
        line = ANSI.sub("", raw)
        m = re.match(r"^\|\s*(\S+)\s*\|\s*([A-Z_]+)\s*\|\s*([\d.]+)s\s*\|(.*)$", line)
        if m:
            reason = m.group(4).strip()
            rows[m.group(1)] = (m.group(2), float(m.group(3)), reason)
    return rows


def failure_reasons(stdout: str):
    """name -> 'file:line: message' from test.c's '### Test "NAME" failed at FILE:LINE:FUNC() at
    DATE: ###' blocks (the first failure of each test)."""
    lines = [ANSI.sub("", raw) for raw in stdout.splitlines()]
    reasons = {}
    for i, line in enumerate(lines):
        m = re.match(r'^### Test "([^" ]+)[^"]*" failed at (\S+) at .*###', line)
        if m and m.group(1) not in reasons:
            msg = next((l.strip() for l in lines[i + 1:i + 4] if l.strip()), "")
            reasons[m.group(1)] = f"{m.group(2).removesuffix('()')}: {msg}"
    return reasons


class Run:
    def __init__(self, args):
        self.args = args
        self.tree = Path(args.tree)
        self.runner = self.tree / "tests" / "test-runner"
        self.logs = COMPAT / ".cache" / "librdkafka" / "logs" / args.broker
        if self.logs.exists():
            shutil.rmtree(self.logs)
        self.logs.mkdir(parents=True)
        self.work = Path(tempfile.mkdtemp(prefix=f"rdk-{args.broker}-"))
        self.kafka_path = self.make_kafka_path()
        self.kafka = {}  # scenario -> Broker, shared by the whole run
        self.kafka_lock = threading.Lock()
        self.print_lock = threading.Lock()
        self.ssl_lock = threading.Lock()
        self.ssl_setup = None

    def ssl(self):
        """The SSL scenario's (broker overrides, test.conf lines, SSL_* environment), made once:
        a CA, the broker's PKCS12 key store, and the client's key and certificate in each form
        0097_ssl_verify loads them in (trivup's names: SSL_pkcs, SSL_pub_der, SSL_pub_pem,
        SSL_priv_der, SSL_priv_pem, SSL_ca_der, SSL_all_cas_pem, SSL_password)."""
        with self.ssl_lock:
            if self.ssl_setup:
                return self.ssl_setup
            d = self.work / "ssl"
            d.mkdir()
            make_certs(d, SSL_PASSWORD)
            pw = f"pass:{SSL_PASSWORD}"
            openssl("pkcs8", "-topk8", "-v2", "aes-256-cbc", "-in", "alice.key", "-out",
                    "client.key.pem", "-passout", pw, cwd=d)
            openssl("pkey", "-in", "alice.key", "-outform", "DER", "-out", "client.key.der", cwd=d)
            openssl("x509", "-in", "alice.pem", "-outform", "DER", "-out", "client.der", cwd=d)
            openssl("x509", "-in", "ca.pem", "-outform", "DER", "-out", "ca.der", cwd=d)
            # SSL_all_cas_pem holds several CAs: an unrelated one, then the one that signed.
            openssl("req", "-x509", "-newkey", "rsa:2048", "-nodes", "-keyout", "other-ca.key",
                    "-out", "other-ca.pem", "-days", "2", "-subj", "/CN=another CA", cwd=d)
            (d / "all-cas.pem").write_text((d / "other-ca.pem").read_text() + (d / "ca.pem").read_text())
            overrides = {
                "listener.security.protocol.map": "PLAINTEXT:SSL,CONTROLLER:PLAINTEXT",
                "ssl.keystore.type": "PKCS12",
                "ssl.keystore.location": str(d / "broker.p12"),
                "ssl.keystore.password": SSL_PASSWORD,
                "ssl.truststore.type": "PEM",
                "ssl.truststore.location": str(d / "ca.pem"),
                "ssl.client.auth": "required",
            }
            conf = (f"security.protocol=SSL\nssl.ca.location={d / 'ca.pem'}\n"
                    f"ssl.certificate.location={d / 'alice.pem'}\n"
                    f"ssl.key.location={d / 'client.key.pem'}\nssl.key.password={SSL_PASSWORD}\n")
            env = {"SSL_pkcs": d / "alice.p12", "SSL_pub_der": d / "client.der",
                   "SSL_pub_pem": d / "alice.pem", "SSL_priv_der": d / "client.key.der",
                   "SSL_priv_pem": d / "client.key.pem", "SSL_ca_der": d / "ca.der",
                   "SSL_all_cas_pem": d / "all-cas.pem", "SSL_password": SSL_PASSWORD}
            self.ssl_setup = (overrides, conf, {k: str(v) for k, v in env.items()})
            return self.ssl_setup

    def make_kafka_path(self):
        """A stand-in for the Kafka distribution some tests expect in KAFKA_PATH: bin/kafka-topics.sh,
        kafka-configs.sh, kafka-acls.sh and kafka-run-class.sh on the Kafka 4.4 jars that setup.sh
        cached (compat-tests/.cache/kafka/libs), and libs/ for the tests' own Java helpers."""
        root = self.work / "kafka-path"
        (root / "bin").mkdir(parents=True)
        (root / "libs").symlink_to(KAFKA_LIBS)
        run_class = root / "bin" / "kafka-run-class.sh"
        run_class.write_text(
            "#!/usr/bin/env bash\n"
            f'exec java -Xmx512m -Dlog4j2.configurationFile="{COMPAT / "kafka" / "log4j2.properties"}" '
            f'-cp "${{CLASSPATH:+$CLASSPATH:}}{KAFKA_LIBS}/*" "$@"\n')
        tools = {"kafka-topics.sh": "org.apache.kafka.tools.TopicCommand",
                 "kafka-configs.sh": "org.apache.kafka.tools.ConfigCommand",
                 "kafka-acls.sh": "org.apache.kafka.tools.AclCommand"}
        for script, cls in tools.items():
            (root / "bin" / script).write_text(
                f'#!/usr/bin/env bash\nexec "$(dirname "$0")/kafka-run-class.sh" {cls} "$@"\n')
        for f in (root / "bin").iterdir():
            f.chmod(0o755)
        return root

    def broker_for(self, scenario, tag):
        overrides = dict(BROKER_OVERRIDES, **SCENARIO_OVERRIDES[scenario])
        if scenario == "ssl":
            overrides.update(self.ssl()[0])
        if self.args.broker == "kafka":
            with self.kafka_lock:
                if scenario not in self.kafka:
                    b = Broker("kafka", root=self.work / f"kafka-{scenario}", overrides=overrides)
                    self.kafka[scenario] = b.start()
                return self.kafka[scenario], False
        b = Broker("sluice", root=self.work / tag, overrides=overrides, sluice_bin=self.args.sluice)
        return b.start(), True

    def run_unit(self, number, scenario, subtest, tests):
        """Run one test number in one scenario (and sub-test); returns {name: result}."""
        names = [t["name"] for t in tests]
        tag = f"{number}-{scenario}" + (f"-{subtest}" if subtest else "")
        t0 = time.monotonic()
        try:
            broker, own = self.broker_for(scenario, tag)
        except Exception as e:  # noqa: BLE001
            return {n: {"status": "fail", "seconds": 0.0, "reason": f"broker did not start: {e}"[:300]}
                    for n in names}
        conf = self.work / f"{tag}.conf"
        conf.write_text(f"bootstrap.servers={broker.bootstrap}\ntest.topic.random=true\n"
                        f"test.timeout.multiplier={self.args.timeout_multiplier}\n"
                        + SCENARIO_CONF.get(scenario, "")
                        + (self.ssl()[1] if scenario == "ssl" else ""))
        report = self.work / f"{tag}.json"
        env = {k: v for k, v in os.environ.items() if k not in ("CI", "TESTS", "SUBTESTS", "TESTS_SKIP")}
        if subtest:
            env["SUBTESTS"] = subtest
        env.update(RDKAFKA_TEST_CONF=str(conf), TEST_KAFKA_VERSION=BROKER_VERSION, TESTS=number,
                   TEST_REPORT=str(report), RDKAFKA_GITVER=self.args.version,
                   LD_LIBRARY_PATH=f"{self.tree / 'src'}:{self.tree / 'src-cpp'}",
                   KAFKA_PATH=str(self.kafka_path), BROKERS=broker.bootstrap)
        for k in [k for k in env if k.startswith("SSL_")]:
            del env[k]
        if scenario == "ssl":
            env.update(self.ssl()[2])
        # stdbuf: test-runner prints its summary table with printf, which a failing test's
        # abort() would otherwise lose from the pipe's buffer.
        # Quick mode (-Q) skips every sub-test not marked quick; the tests in FULL_MODE have
        # their broker checks only in such sub-tests, so they run in full.
        quick = [] if set(names) & FULL_MODE else ["-Q"]
        cmd = ["stdbuf", "-oL", str(self.runner), *quick, "-L", "-p1"]
        if scenario in RUNNER_SCENARIOS:
            cmd += ["-s", scenario]
        log = self.logs / f"{tag}.log"
        with open(log, "wb") as out:
            try:
                proc = subprocess.run(cmd, cwd=self.tree / "tests", env=env, stdout=out,
                                      stderr=subprocess.STDOUT, timeout=UNIT_TIMEOUT_S)
                rc = proc.returncode
            except subprocess.TimeoutExpired:
                rc = "timeout"
        stdout = log.read_text(errors="replace")
        rows = parse_summary(stdout)
        fails = failure_reasons(stdout)
        states = {}
        try:
            states = {k: v["state"] for k, v in json.loads(report.read_text())["tests"].items()}
        except (OSError, ValueError, KeyError):
            pass
        broker_note = ""
        if own:
            if not broker.is_running():
                broker_note = "sluice exited during the test"
            try:
                broker.stop()
            except AssertionError as e:
                broker_note = broker_note or str(e)
            shutil.copy(broker.output_file, self.logs / f"{tag}.broker.out")
        elapsed = time.monotonic() - t0
        results = {}
        for t in tests:
            n, rn = t["name"], t["runner_name"]
            state, secs, reason = rows.get(rn, (states.get(rn, "MISSING"), 0.0, ""))
            state = states.get(rn, state)
            if state == "PASSED":
                status, reason = "pass", ""
            elif state == "SKIPPED":
                status = "skip"
            else:
                status = "fail"
                if state in ("MISSING", "NOT_STARTED", "RUNNING"):
                    why = (f"test-runner timed out after {UNIT_TIMEOUT_S} s" if rc == "timeout"
                           else f"test-runner exited with {rc}, test state {state}")
                    reason = (reason + "; " if reason else "") + why
                reason = fails.get(rn) or reason
            if broker_note and status == "fail":
                reason = f"{broker_note}; {reason}"
            if subtest and status != "fail":
                secs = elapsed  # test-runner's time for the test includes the skipped sub-tests
            results[n] = {"status": status, "seconds": round(secs or elapsed, 3), "reason": reason[:500]}
        with self.print_lock:
            for n, r in results.items():
                msg = f": {r['reason']}" if r["reason"] else ""
                print(f"{r['status'].upper():4} {n} ({r['seconds']:.1f} s){msg}", flush=True)
        return results

    def close(self):
        for b in self.kafka.values():
            try:
                b.stop()
            except AssertionError:
                b.kill9()
        if not self.args.keep:
            shutil.rmtree(self.work, ignore_errors=True)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--tree", required=True)
    ap.add_argument("--version", required=True)
    ap.add_argument("--sluice")
    ap.add_argument("--kafka", action="store_true")
    ap.add_argument("--all", action="store_true")
    ap.add_argument("--tests", help="comma-separated test numbers or names")
    ap.add_argument("-j", type=int, default=int(os.environ.get("LIBRDKAFKA_JOBS", "3")))
    ap.add_argument("--keep", action="store_true", help="keep broker data dirs")
    ap.add_argument("--timeout-multiplier", default=os.environ.get("LIBRDKAFKA_TIMEOUT_MULTIPLIER", "2"))
    args = ap.parse_args()
    args.broker = "kafka" if args.kafka else "sluice"
    mode = "tests" if args.tests else ("all" if args.all else "allow")

    tests = parse_tests(Path(args.tree) / "tests" / "test.c")
    allow = read_allow(HERE / "tests.allow")
    known = {t["name"] for t in tests}
    unknown = [n for n in allow if n not in known]
    if unknown:
        print(f"run.py: tests.allow names tests test.c does not have: {unknown}", file=sys.stderr)
        return 2

    results = {}
    selected = []
    wanted = set(args.tests.split(",")) if args.tests else None
    for t in tests:
        why = exclusion(t)
        num = t["name"].split("_")[0]
        if why:
            results[t["name"]] = {"status": "excluded", "seconds": 0.0, "reason": why}
        elif mode == "allow" and t["name"] not in allow:
            results[t["name"]] = {"status": "not-run", "seconds": 0.0, "reason": "not in tests.allow"}
        elif (wanted is not None and num not in wanted and t["name"] not in wanted
              and t["runner_name"] not in wanted):
            results[t["name"]] = {"status": "not-run", "seconds": 0.0, "reason": "not selected"}
        else:
            selected.append(t)

    units = {}  # (number, scenario, sub-test) -> [tests]
    for t in selected:
        units.setdefault((t["name"].split("_")[0], scenario_of(t), t["subtest"]), []).append(t)

    target = args.sluice if args.broker == "sluice" else "Apache Kafka (kafka/start-kafka.sh)"
    print(f"run.py: librdkafka {args.version} test-runner against {args.broker} ({target}); "
          f"{len(selected)} tests in {len(units)} runs, mode {mode}, -j{args.j}", flush=True)
    t0 = time.monotonic()
    run = Run(args)
    try:
        with concurrent.futures.ThreadPoolExecutor(max_workers=max(1, args.j)) as pool:
            futs = [pool.submit(run.run_unit, num, sc, sub, ts) for (num, sc, sub), ts in units.items()]
            for f in futs:
                results.update(f.result())
        if mode == "allow":
            # A few tests are timing-sensitive on a loaded machine: give a failed one a second
            # (sequential) run; a real regression fails both, and the flake is reported.
            for key, ts in units.items():
                first = {t["name"]: results[t["name"]] for t in ts}
                if all(r["status"] == "pass" for r in first.values()):
                    continue
                print(f"run.py: retrying {key[0]} once", flush=True)
                for n, r in run.run_unit(*key, ts).items():
                    if r["status"] == "pass" and first[n]["status"] != "pass":
                        r["reason"] = f"flaky: passed on retry; first run: {first[n]['reason']}"[:500]
                        print(f"FLAKY {n}: {r['reason']}", flush=True)
                    results[n] = r
    finally:
        run.close()
    seconds = round(time.monotonic() - t0)

    order = {t["name"]: i for i, t in enumerate(tests)}
    results = dict(sorted(results.items(), key=lambda kv: order.get(kv[0], 1 << 30)))
    return finish(suite="librdkafka", client=f"librdkafka {args.version.split('-')[0]}",
                  client_version=args.version,
                  broker=args.broker, broker_detail=target, mode=mode, seconds=seconds,
                  results=results, allow=allow, logs=run.logs)


if __name__ == "__main__":
    sys.exit(main())
