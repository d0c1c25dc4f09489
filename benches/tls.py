#!/usr/bin/env python3
"""TLS produce and consume, sluice side by side with Apache Kafka 4.4.0 configured the same way.

    python3 benches/tls.py [--quick] [--reps N] [--sluice BIN]

Both brokers get two listeners: PLAINTEXT, and one named SSL that speaks TLS with a PKCS12 key
store (a CA and a certificate for 127.0.0.1 made with openssl for the run; no client
certificates), each broker's defaults otherwise: TLS 1.2 and 1.3 enabled, the cipher suite the
two ends agree on (the run records it with `openssl s_client`). Each repetition starts a fresh
broker (one at a time, ABBA order, as benches/run.sh does), warms it up, then for each transport,
plaintext then TLS, and each topic (1 and 8 partitions, no compression, 1 KiB records, acks=all):

- produce: Kafka's ProducerPerformance (`batch.size=262144`), then librdkafka's C
  rdkafka_performance (`-P`, 4 times as many records);
- consume: ConsumerPerformance, then rdkafka_performance -C (every partition from the start).

The broker's CPU (utime + stime from /proc) is sampled around each phase, so "CPU s/GB" is the
broker's own CPU per GB of record values moved. The plaintext figures of the same broker in the
same session give the cost of TLS. Writes benches/tls-results.json and the TLS section of
benches/RESULTS.md (between its `tls` markers; report.py keeps that section when it rewrites the
rest). About 12 minutes with 3 repetitions, 4 with --quick, on a 2-core machine. Not run in CI.
"""
import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import time
from pathlib import Path
from types import SimpleNamespace

HERE = Path(__file__).resolve().parent
REPO = HERE.parent
sys.path.insert(0, str(REPO / "compat-tests" / "python"))
import bench  # noqa: E402
import report  # noqa: E402
from tls_certs import make_certs  # noqa: E402

PASSWORD = "bench-secret"
SIZES = {"full": dict(reps=3, warm=50000, java=100000, c=400000),
         "quick": dict(reps=1, warm=20000, java=30000, c=120000)}
PARTITIONS = (1, 8)
TRANSPORTS = ("plain", "tls")
BEGIN, END = "<!-- tls: written by benches/tls.py -->", "<!-- /tls -->"


def rdkafka_performance():
    """librdkafka's C benchmark client, built from the source package the compat suite uses."""
    if bench.RDK_PERF:
        return bench.RDK_PERF
    trees = sorted((REPO / "compat-tests" / ".cache" / "librdkafka").glob("librdkafka-*/"))
    if not trees:
        subprocess.run(["bash", str(REPO / "compat-tests" / "librdkafka" / "run.sh"),
                        "--build-only"], check=True, timeout=1800)
        trees = sorted((REPO / "compat-tests" / ".cache" / "librdkafka").glob("librdkafka-*/"))
    tool = trees[0] / "examples" / "rdkafka_performance"
    if not tool.exists():
        subprocess.run(["make", "-s", "-C", str(trees[0] / "examples"), "rdkafka_performance"],
                       check=True, timeout=600)
    return str(tool)


class Setup:
    """The certificates, the listeners both brokers get, and the clients' TLS settings."""

    def __init__(self, work):
        self.certs = Path(work) / "tls-certs"
        shutil.rmtree(self.certs, ignore_errors=True)
        self.certs.mkdir(parents=True)
        make_certs(self.certs, PASSWORD)
        self.ca = str(self.certs / "ca.pem")
        self.java_props = ["security.protocol=SSL", "ssl.truststore.type=PEM",
                           f"ssl.truststore.location={self.ca}"]
        self.consumer_config = str(self.certs / "client.properties")
        Path(self.consumer_config).write_text("\n".join(self.java_props) + "\n")
        self.c_args = ["-X", "security.protocol=ssl", "-X", f"ssl.ca.location={self.ca}"]

    def overrides(self, b, tls_port):
        return [f"listeners=PLAINTEXT://127.0.0.1:{b.port},SSL://127.0.0.1:{tls_port}",
                "listener.security.protocol.map=PLAINTEXT:PLAINTEXT,SSL:SSL,CONTROLLER:PLAINTEXT",
                "ssl.keystore.type=PKCS12", f"ssl.keystore.location={self.certs / 'broker.p12'}",
                f"ssl.keystore.password={PASSWORD}"]

    def cipher(self, address):
        """What `openssl s_client` negotiates with the TLS listener: (protocol, cipher suite)."""
        res = subprocess.run(["openssl", "s_client", "-connect", address, "-CAfile", self.ca,
                              "-brief"], input="", capture_output=True, text=True, timeout=30)
        out = res.stdout + res.stderr
        pick = {k: line.split(":", 1)[1].strip() for line in out.splitlines()
                for k in ("Protocol version", "Ciphersuite") if line.startswith(k)}
        return pick.get("Protocol version", "?"), pick.get("Ciphersuite", "?")


def session(b, setup, size, res, rep, c_tool):
    name = b.name
    tls_port = bench.free_port()
    endpoints = {"plain": b, "tls": SimpleNamespace(bootstrap=f"127.0.0.1:{tls_port}")}
    bench.log(f"== {name} rep {rep}: start (TLS on {tls_port})")
    b.prepare(os.path.join(bench.WORK, f"{name}-tls-session"))
    os.sync()
    b.start(setup.overrides(b, tls_port))
    try:
        deadline = time.monotonic() + 60
        while not bench.port_open(tls_port) and time.monotonic() < deadline:
            time.sleep(0.1)
        res["cipher"][name] = setup.cipher(endpoints["tls"].bootstrap)
        topics = [("warm", 8)] + [(f"{t}-p{p}", p) for t in TRANSPORTS for p in PARTITIONS]
        bench.create_topics(b, topics)
        for t in TRANSPORTS:  # untimed: the JIT, TLS code paths, page cache and allocators
            props = bench.JAVA_THROUGHPUT_PROPS + (setup.java_props if t == "tls" else [])
            bench.java_produce(endpoints[t], "warm", size["warm"] // 2, "none", props=props)
        for t in TRANSPORTS:
            ep, tls = endpoints[t], t == "tls"
            props = bench.JAVA_THROUGHPUT_PROPS + (setup.java_props if tls else [])
            c_extra = setup.c_args if tls else []
            for phase in ("produce", "consume"):
                cpu, nbytes = 0.0, 0
                for p in PARTITIONS:
                    topic = f"{t}-p{p}"
                    total = size["java"] + size["c"]
                    for gen in ("java", "c"):
                        c0 = bench.proc_cpu_s(b.pid)
                        what = f"{phase} {topic} {gen}"
                        try:
                            if phase == "produce" and gen == "java":
                                r = bench.java_produce(ep, topic, size["java"], "none", props=props)
                                r["bytes"] = size["java"] * bench.RECORD
                            elif phase == "produce":
                                r = bench.c_produce(ep, topic, size["c"], extra=c_extra, tool=c_tool)
                            elif gen == "java":
                                r = bench.java_consume(ep, topic, total, consumer_config=(
                                    setup.consumer_config if tls else None))
                                r["bytes"] = total * bench.RECORD
                            else:
                                r = bench.c_consume(ep, topic, p, total, extra=c_extra, tool=c_tool)
                        except Exception as e:  # one failed cell must not sink the run
                            res["errors"].append(f"{name} rep {rep}: {what}: {str(e)[:300]}")
                            bench.log("ERROR", what, str(e)[-2000:])
                            continue
                        cpu += bench.proc_cpu_s(b.pid) - c0
                        nbytes += r["bytes"]
                        res[name].setdefault(f"{phase}_{t}_{gen}_p{p}_mb_s", []).append(r["mb_s"])
                        bench.log(f"   {what}: {r['mb_s']:.1f} MB/s")
                if nbytes:
                    res[name].setdefault(f"cpu_{phase}_{t}", []).append(cpu / (nbytes / 1e9))
    finally:
        b.stop()


def median(v):
    return statistics.median(v) if v else None


def section(res):
    """The TLS section of RESULTS.md."""
    meta, k, s = res["meta"], res["kafka"], res["sluice"]
    gen = {"java": "Java", "c": "librdkafka's C rdkafka_performance"}
    lines = [BEGIN, "", "## TLS: produce and consume over an SSL listener", "",
             f"Written by `python3 benches/tls.py{' --quick' if meta['mode'] == 'quick' else ''}` "
             f"(see the script's docstring): {meta['date']}, commit `{meta['commit'][:12]}`, "
             f"{meta['reps']} repetition(s), ABBA order, load average at start "
             f"{' / '.join(meta['loadavg'])}. Both brokers: a PLAINTEXT and an SSL listener, a "
             "PKCS12 key store, no client certificates, their defaults otherwise; negotiated: "
             + "; ".join(f"{n} {p} {c}" for n, (p, c) in sorted(res["cipher"].items())) + ". "
             f"Per repetition and transport, {meta['java']:,} records from ProducerPerformance and "
             f"{meta['c']:,} from rdkafka_performance per topic, then each topic read whole. sluice "
             "serves fetched segment bytes over TLS by reading them in 64 KiB preads and "
             "encrypting in user space (no kernel TLS here), as Kafka does; over plaintext both use "
             "sendfile.", "",
             "| scenario | Kafka | sluice | sluice / Kafka | | Kafka TLS / plaintext | "
             "sluice TLS / plaintext |", "|---|---:|---:|---:|---|---:|---:|"]

    def row(label, key, plain_key, unit, better):
        km, sm = median(k.get(key)), median(s.get(key))
        ratio = sm / km if km and sm is not None else None
        cost = [median(d.get(key)) / median(d.get(plain_key))
                if plain_key and median(d.get(key)) and median(d.get(plain_key)) else None
                for d in (k, s)]
        lines.append(f"| {label} | {report.cell(k.get(key), unit)} | {report.cell(s.get(key), unit)} | "
                     f"{report.fmt_ratio(ratio)} | {report.verdict(ratio, better)} | "
                     f"{report.fmt_ratio(cost[0])} | {report.fmt_ratio(cost[1])} |")
    for phase in ("produce", "consume"):
        for p in PARTITIONS:
            for g in ("java", "c"):
                row(f"{phase} over TLS, {p} partition{'s' if p > 1 else ''}, {gen[g]} (MB/s)",
                    f"{phase}_tls_{g}_p{p}_mb_s", f"{phase}_plain_{g}_p{p}_mb_s", "MB/s", "higher")
    for phase in ("produce", "consume"):
        row(f"broker CPU per GB, {phase} over TLS (CPU s/GB)", f"cpu_{phase}_tls",
            f"cpu_{phase}_plain", "", "lower")
        row(f"broker CPU per GB, {phase} over plaintext, same sessions (CPU s/GB)",
            f"cpu_{phase}_plain", None, "", "lower")
    if res["errors"]:
        lines += ["", "Errors during the run:", ""] + [f"- {e}" for e in res["errors"]]
    return "\n".join(lines + ["", END, ""])


def write_section(md_path, text):
    md = md_path.read_text() if md_path.exists() else ""
    if BEGIN in md and END in md:
        head, rest = md.split(BEGIN, 1)
        md = head + text.rstrip("\n") + rest.split(END, 1)[1]
    else:
        md = md.rstrip("\n") + "\n\n" + text
    md_path.write_text(md)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--quick", action="store_true")
    ap.add_argument("--reps", type=int)
    ap.add_argument("--sluice", default=str(REPO / "target" / "release" / "sluice"))
    a = ap.parse_args()
    mode = "quick" if a.quick else "full"
    size = dict(SIZES[mode])
    if a.reps:
        size["reps"] = a.reps
    os.makedirs(bench.WORK, exist_ok=True)
    binary = os.path.join(bench.WORK, "sluice-tls")
    shutil.copy(a.sluice, binary)  # a concurrent rebuild cannot change it mid-run
    c_tool = rdkafka_performance()
    setup = Setup(bench.WORK)
    res = {"meta": {"mode": mode, "reps": size["reps"], "java": size["java"], "c": size["c"],
                    "date": time.strftime("%Y-%m-%d %H:%M:%S %Z"), "commit": bench.git_head(),
                    "loadavg": open("/proc/loadavg").read().split()[:3]},
           "kafka": {}, "sluice": {}, "cipher": {}, "errors": []}
    sluice, kafka = bench.Sluice(binary, bench.free_port()), bench.Kafka(bench.free_port(), bench.WORK)
    t0 = time.monotonic()
    try:
        kafka.make_pristine()
        for i in range(size["reps"]):
            for b in ((kafka, sluice) if i % 2 == 0 else (sluice, kafka)):
                try:
                    session(b, setup, size, res, i + 1, c_tool)
                except Exception as e:
                    res["errors"].append(f"{b.name} rep {i + 1}: {str(e)[:300]}")
                    bench.log("ERROR", str(e)[-2000:])
    finally:
        sluice.stop()
        kafka.stop()
        for d in ("sluice-tls-session", "kafka-node", "tls-certs"):
            shutil.rmtree(os.path.join(bench.WORK, d), ignore_errors=True)
    res["meta"]["duration_s"] = round(time.monotonic() - t0)
    (HERE / "tls-results.json").write_text(json.dumps(res, indent=1, sort_keys=True) + "\n")
    write_section(HERE / "RESULTS.md", section(res))
    bench.log(f"done in {res['meta']['duration_s']} s; {len(res['errors'])} errors; "
              "wrote benches/tls-results.json and the TLS section of benches/RESULTS.md")
    return 1 if res["errors"] else 0


if __name__ == "__main__":
    sys.exit(main())
