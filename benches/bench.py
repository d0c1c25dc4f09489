#!/usr/bin/env python3
"""Side-by-side benchmarks of sluice and Apache Kafka 4.4.0 (stdlib only; run by run.sh).

  bench.py run [--quick]   all scenarios; raw figures to benches/results.json
  bench.py profile         sluice under `perf record` during the produce scenario

Only one broker runs at a time. Each repetition starts a fresh broker, runs every scenario
once, and stops it; repetitions alternate Kafka/sluice (ABBA order). See benches/README.md.
"""

import argparse
import json
import os
import platform
import re
import shutil
import signal
import socket
import statistics
import subprocess
import sys
import tempfile
import threading
import time

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
COMPAT = os.path.join(ROOT, "compat-tests")
RUN_CLASS = os.path.join(COMPAT, "kafka", "run-class.sh")
START_KAFKA = os.path.join(COMPAT, "kafka", "start-kafka.sh")
STOP_KAFKA = os.path.join(COMPAT, "kafka", "stop-kafka.sh")
VENV_PY = os.path.join(COMPAT, ".venv", "bin", "python")
RDK = os.path.join(HERE, "rdkafka_load.py")
WORK = os.environ.get("BENCH_WORK", os.path.join(ROOT, "target", "bench"))
PIDS = os.path.join(WORK, "pids")
CLK_TCK = os.sysconf("SC_CLK_TCK")
RECORD = 1024

# What each mode does. Records are 1 KiB; counts are per generator run.
MODES = {
    "full": dict(reps=3, warm=50000, prod=150000, lat_rate=2000, lat_secs=10, e2e_msgs=2000,
                 cold=5, flush=20000, rec_bytes=1 << 30, limit_dd_mb=1024, iperf_secs=5),
    "quick": dict(reps=1, warm=30000, prod=50000, lat_rate=2000, lat_secs=5, e2e_msgs=1000,
                  cold=3, flush=10000, rec_bytes=256 << 20, limit_dd_mb=256, iperf_secs=3),
}
CONFIGS = [(1, "none"), (1, "lz4"), (8, "none"), (8, "lz4")]
# librdkafka reads each topic this many times per consume run: one pass takes well under a
# second, too short to be steady on a shared machine.
RDK_CONSUME_PASSES = 3
# librdkafka's own C benchmark client, examples/rdkafka_performance, which run.sh builds from the
# librdkafka source the compat suite fetches. On this machine it outruns both brokers, where the
# Java clients and the Python loop around confluent-kafka do not, so its cells measure the
# brokers rather than the clients. Its payload is a repeated sentence, which lz4 squeezes to
# almost nothing, so it runs the uncompressed configurations only.
RDK_PERF = os.environ.get("RDKAFKA_PERFORMANCE", "")
C_CONFIGS = [(p, c) for p, c in CONFIGS if c == "none"]
# The C producer sends this many times `prod` records: `prod` alone takes well under a second.
C_PRODUCE_FACTOR = 4
C_CONSUME_PASSES = 3
PERF_PRODUCED = re.compile(r"(\d+) messages produced \((\d+) bytes\), (\d+) delivered "
                           r"\(offset -?\d+, (\d+) failed\) in (\d+)ms")
PERF_CONSUMED = re.compile(r"(\d+) messages \((\d+) bytes\) consumed in (\d+)ms")

# Never let a caller's heap settings leak into the broker (start-kafka.sh's default is
# Kafka's own: -Xmx1g -Xms1g) or the tools.
for k in ("KAFKA_HEAP_OPTS", "KAFKA_JVM_OPTS", "KAFKA_LOG_LEVEL"):
    os.environ.pop(k, None)


def log(*a):
    print(time.strftime("%H:%M:%S"), *a, file=sys.stderr, flush=True)


def free_port():
    import random
    for _ in range(500):
        p = random.randrange(20000, 32000)
        s = socket.socket()
        try:
            s.bind(("127.0.0.1", p))
            return p
        except OSError:
            pass
        finally:
            s.close()
    raise RuntimeError("no free port")


def port_open(port):
    s = socket.socket()
    s.settimeout(0.2)
    try:
        s.connect(("127.0.0.1", port))
        return True
    except OSError:
        return False
    finally:
        s.close()


def run(cmd, timeout, env=None, check=True):
    """Runs a command with a hard timeout; returns (rc, stdout, stderr)."""
    p = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                         env=env, start_new_session=True)
    try:
        out, err = p.communicate(timeout=timeout)
    except subprocess.TimeoutExpired:
        os.killpg(p.pid, signal.SIGKILL)
        out, err = p.communicate()
        raise RuntimeError(f"timed out after {timeout}s: {' '.join(cmd[:4])}...\n{err[-2000:]}")
    if check and p.returncode != 0:
        raise RuntimeError(f"exit {p.returncode}: {' '.join(cmd[:6])}...\n"
                           f"{(out or '')[-1500:]}\n{(err or '')[-2500:]}")
    return p.returncode, out, err


# ---------------------------------------------------------------- /proc sampling

def proc_cpu_s(pid):
    with open(f"/proc/{pid}/stat") as f:
        rest = f.read().rsplit(")", 1)[1].split()
    return (int(rest[11]) + int(rest[12])) / CLK_TCK


def proc_mem_kib(pid):
    out = {}
    with open(f"/proc/{pid}/status") as f:
        for line in f:
            if line.startswith(("VmRSS:", "VmHWM:")):
                k, v = line.split(":", 1)
                out[k] = int(v.split()[0])
    return out


# ---------------------------------------------------------------- brokers

def note_pid(name, pid):
    os.makedirs(PIDS, exist_ok=True)
    with open(os.path.join(PIDS, name), "w") as f:
        f.write(str(pid))


def forget_pid(name):
    try:
        os.unlink(os.path.join(PIDS, name))
    except FileNotFoundError:
        pass


class Sluice:
    name = "sluice"

    def __init__(self, binary, port):
        self.binary, self.port, self.proc, self.dir = binary, port, None, None

    @property
    def bootstrap(self):
        return f"127.0.0.1:{self.port}"

    def prepare(self, d):
        """A fresh, empty data dir."""
        shutil.rmtree(d, ignore_errors=True)
        os.makedirs(d)
        self.dir = d

    def spawn(self, overrides=()):
        """Starts the process and returns at once."""
        cmd = [self.binary, "--override", f"listeners=PLAINTEXT://127.0.0.1:{self.port}",
               "--override", f"log.dirs={self.dir}/data"]
        for kv in overrides:
            cmd += ["--override", kv]
        logf = open(os.path.join(self.dir, "sluice.out"), "ab")
        env = dict(os.environ, RUST_LOG=os.environ.get("RUST_LOG", "info"))
        self.proc = subprocess.Popen(cmd, stdout=logf, stderr=logf, stdin=subprocess.DEVNULL,
                                     env=env, start_new_session=True)
        logf.close()
        note_pid("sluice", self.proc.pid)

    def wait_started(self, timeout=120):
        deadline = time.monotonic() + timeout
        while not port_open(self.port):
            if self.proc.poll() is not None:
                raise RuntimeError(f"sluice exited with {self.proc.returncode}: "
                                   + tail(os.path.join(self.dir, "sluice.out")))
            if time.monotonic() > deadline:
                raise RuntimeError("sluice did not open its port")
            time.sleep(0.01)

    def start(self, overrides=()):
        self.spawn(overrides)
        self.wait_started()

    @property
    def pid(self):
        return self.proc.pid

    def stop(self):
        if self.proc is None:
            return
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(30)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait(10)
        self.proc = None
        forget_pid("sluice")

    def kill9(self):
        self.proc.kill()
        self.proc.wait(10)
        self.proc = None
        forget_pid("sluice")


class Kafka:
    name = "kafka"

    def __init__(self, port, work):
        self.port, self._pid, self.dir, self.starter = port, None, None, None
        self.pristine = os.path.join(work, "kafka-pristine")
        self.node = os.path.join(work, "kafka-node")

    @property
    def bootstrap(self):
        return f"127.0.0.1:{self.port}"

    def make_pristine(self):
        """Formats one KRaft node with start-kafka.sh (its only formatting path), stops it
        cleanly and keeps a copy; every later start restores that copy, so formatting stays
        out of every measurement and every repetition starts from the same empty broker."""
        shutil.rmtree(self.node, ignore_errors=True)
        shutil.rmtree(self.pristine, ignore_errors=True)
        self.dir = self.node
        self.start()
        self.stop()
        shutil.copytree(self.node, self.pristine, symlinks=True)

    def prepare(self, d=None):
        shutil.rmtree(self.node, ignore_errors=True)
        shutil.copytree(self.pristine, self.node, symlinks=True)
        for f in ("kafka.out", "kafka.pid"):
            try:
                os.unlink(os.path.join(self.node, f))
            except FileNotFoundError:
                pass
        self.dir = self.node

    def spawn(self, overrides=()):
        self.starter = subprocess.Popen(
            ["bash", START_KAFKA, str(self.port), self.dir, *overrides],
            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=dict(os.environ),
            start_new_session=True)

    def wait_started(self, timeout=150):
        try:
            out, err = self.starter.communicate(timeout=timeout)
        except subprocess.TimeoutExpired:
            os.killpg(self.starter.pid, signal.SIGKILL)
            self.starter.communicate()
            self._kill_from_pidfile()
            raise RuntimeError("start-kafka.sh timed out")
        if self.starter.returncode != 0:
            raise RuntimeError(f"start-kafka.sh failed: {err[-2000:]}")
        self._pid = int(out.strip().splitlines()[-1])
        note_pid("kafka", self._pid)

    def start(self, overrides=()):
        self.spawn(overrides)
        self.wait_started()

    @property
    def pid(self):
        return self._pid

    def _kill_from_pidfile(self):
        try:
            pid = int(open(os.path.join(self.dir, "kafka.pid")).read())
            os.kill(pid, signal.SIGKILL)
        except (OSError, ValueError):
            pass

    def stop(self):
        if self.starter is not None and self.starter.poll() is None:
            try:  # a start still under way: let start-kafka.sh finish, then stop what it started
                self.starter.communicate(timeout=150)
            except subprocess.TimeoutExpired:
                os.killpg(self.starter.pid, signal.SIGKILL)
                self.starter.communicate()
        self.starter = None
        if self.dir and os.path.exists(os.path.join(self.dir, "kafka.pid")):
            run(["bash", STOP_KAFKA, self.dir], timeout=90, check=False)
        self._pid = None
        forget_pid("kafka")

    def kill9(self):
        run(["bash", STOP_KAFKA, self.dir, "--kill9"], timeout=60)
        self._pid = None
        forget_pid("kafka")


def tail(path, n=20):
    try:
        with open(path, errors="replace") as f:
            return "".join(f.readlines()[-n:])
    except OSError:
        return ""


# ---------------------------------------------------------------- load generators

def rdk(args, timeout):
    _, out, _ = run([VENV_PY, RDK, *args], timeout=timeout)
    return json.loads(out.strip().splitlines()[-1])


def c_produce(b, topic, n, timeout=300, extra=(), tool=None):
    """rdkafka_performance -P: n records of RECORD bytes, acks=all, librdkafka's defaults
    otherwise (linger.ms 5, batches up to 1 MB), to random partitions; `extra` are more
    arguments (-X settings). -> {"mb_s", "bytes"}"""
    # A local queue large enough for the whole run: on a full queue rdkafka_performance sleeps
    # 10 ms, which would time the generator's back-off rather than the broker.
    _, out, err = run([tool or RDK_PERF, "-P", "-t", topic, "-b", b.bootstrap, "-s", str(RECORD),
                       "-c", str(n), "-a", "-1", "-X", "queue.buffering.max.messages=10000000",
                       "-X", "queue.buffering.max.kbytes=2097151", *extra], timeout)
    # It prints a line every second; the last is the summary.
    m = ([None] + list(PERF_PRODUCED.finditer(out + err)))[-1]
    if not m or int(m[3]) != n or int(m[4]) != 0:
        raise RuntimeError(f"rdkafka_performance -P: {n} not all delivered:\n{(out + err)[-1500:]}")
    nbytes, ms = int(m[2]), max(int(m[5]), 1)
    return {"mb_s": nbytes / 1e6 / (ms / 1000), "bytes": nbytes}


def c_consume(b, topic, partitions, n, timeout=300, extra=(), tool=None):
    """rdkafka_performance -C over every partition from the start, C_CONSUME_PASSES times, n
    records each; `extra` are more arguments (-X settings). -> {"mb_s", "bytes"} over all
    passes."""
    total_bytes, total_ms = 0, 0
    for _ in range(C_CONSUME_PASSES):
        args = [tool or RDK_PERF, "-C", "-t", topic, "-b", b.bootstrap, "-o", "beginning",
                "-c", str(n), *extra]
        for p in range(partitions):
            args += ["-p", str(p)]
        _, out, err = run(args, timeout)
        m = ([None] + list(PERF_CONSUMED.finditer(out + err)))[-1]
        if not m or int(m[1]) < n:
            raise RuntimeError(f"rdkafka_performance -C: fewer than {n}:\n{(out + err)[-1500:]}")
        total_bytes += int(m[2])
        total_ms += max(int(m[3]), 1)
    return {"mb_s": total_bytes / 1e6 / (total_ms / 1000), "bytes": total_bytes}


def create_topics(b, topics):
    for t, parts in topics:
        rdk(["create", "--bootstrap", b.bootstrap, "--topic", t, "--partitions", str(parts)], 90)


PP_RE = re.compile(
    r"(\d+) records sent, ([\d.]+) records/sec \(([\d.]+) MB/sec\), ([\d.]+) ms avg latency, "
    r"([\d.]+) ms max latency, (\d+) ms 50th, (\d+) ms 95th, (\d+) ms 99th, (\d+) ms 99.9th")


# Java producer settings of the throughput runs: the default 16 KiB batch.size leaves the
# client latency-bound on this loaded 2-core machine (about 5 MB/s against either broker), so it
# would measure the client's in-flight window, not the broker. The latency runs keep defaults.
JAVA_THROUGHPUT_PROPS = ["batch.size=262144"]


def java_produce(b, topic, n, codec, rate=-1, timeout=300, props=JAVA_THROUGHPUT_PROPS):
    _, out, err = run([RUN_CLASS, "org.apache.kafka.tools.ProducerPerformance",
                       "--bootstrap-server", b.bootstrap,
                       "--topic", topic, "--num-records", str(n), "--record-size", str(RECORD),
                       "--throughput", str(rate), "--command-property", "acks=all",
                       f"compression.type={codec}", *props], timeout=timeout)
    m = None
    for line in out.splitlines():
        m = PP_RE.search(line) or m
    if not m:
        raise RuntimeError("ProducerPerformance printed no summary:\n" + out[-1500:] + err[-1500:])
    recs, rps = int(m.group(1)), float(m.group(2))
    if recs != n:
        raise RuntimeError(f"ProducerPerformance sent {recs}/{n}")
    return {"records": recs, "rec_s": rps, "mb_s": rps * RECORD / 1e6,
            "lat_ms": {"avg": float(m.group(4)), "50": int(m.group(6)), "99": int(m.group(8)),
                       "99.9": int(m.group(9))}}


def java_consume(b, topic, n, timeout=300, consumer_config=None):
    extra = ["--consumer.config", consumer_config] if consumer_config else []
    _, out, err = run([RUN_CLASS, "org.apache.kafka.tools.ConsumerPerformance",
                       "--bootstrap-server", b.bootstrap, "--topic", topic,
                       "--num-records", str(n), "--timeout", "30000", *extra], timeout=timeout)
    if "Exiting before consuming" in out + err:
        raise RuntimeError("ConsumerPerformance timed out before consuming everything")
    rows = [l for l in out.splitlines() if re.match(r"^\d{4}-\d\d-\d\d ", l)]
    if not rows:
        raise RuntimeError("ConsumerPerformance printed no summary:\n" + out[-1500:] + err[-1500:])
    f = [x.strip() for x in rows[-1].split(",")]
    mib, nmsg, reb_ms, fetch_ms = float(f[2]), int(f[4]), float(f[6]), float(f[7])
    if nmsg < n:
        raise RuntimeError(f"ConsumerPerformance consumed {nmsg}/{n}")
    return {"records": nmsg, "rebalance_ms": reb_ms, "fetch_ms": fetch_ms,
            "mb_s": mib * 1048576 / 1e6 / (fetch_ms / 1000.0)}


E2E_RE = re.compile(r"Percentiles: 50th = (\d+), 99th = (\d+), 99.9th = (\d+)")


def java_e2e(b, topic, n, timeout=300):
    _, out, err = run([RUN_CLASS, "org.apache.kafka.tools.EndToEndLatency",
                       "--bootstrap-server", b.bootstrap, "--topic", topic, "--num-records", str(n),
                       "--producer-acks", "all", "--record-size", str(RECORD)], timeout=timeout)
    m = E2E_RE.search(out)
    avg = re.search(r"Avg latency: ([\d.]+) ms", out)
    if not m or not avg:
        raise RuntimeError("EndToEndLatency printed no summary:\n" + out[-1500:] + err[-1500:])
    return {"avg": float(avg.group(1)), "50": int(m.group(1)), "99": int(m.group(2)),
            "99.9": int(m.group(3))}


# ---------------------------------------------------------------- results

class Results:
    def __init__(self, path, meta):
        self.path = path
        self.data = {"meta": meta, "kafka": {}, "sluice": {}, "errors": [], "limits": {}}

    def add(self, broker, key, value):
        self.data[broker].setdefault(key, []).append(value)
        self.save()

    def error(self, broker, what, e):
        msg = f"{broker}: {what}: {str(e).strip().splitlines()[0][:300] if str(e).strip() else e!r}"
        log("ERROR", msg)
        log(str(e)[-3000:])
        self.data["errors"].append(msg)
        self.save()

    def save(self):
        tmp = self.path + ".tmp"
        with open(tmp, "w") as f:
            json.dump(self.data, f, indent=1, sort_keys=True)
        os.replace(tmp, self.path)


def attempt(res, broker, what, fn):
    try:
        return fn()
    except Exception as e:  # one failed scenario must not sink the run
        res.error(broker, what, e)
        return None


# ---------------------------------------------------------------- scenarios

def session(b, cfg, res, rep):
    """One repetition on one broker: fresh start, every steady-state scenario, stop."""
    name = b.name
    log(f"== {name} rep {rep}: start")
    b.prepare(os.path.join(WORK, f"{name}-session"))
    # Write back the previous session's dirty pages first. Otherwise a broker that runs second
    # in a pair produces while the kernel flushes the other broker's data, and cells bound by
    # the disk (the long C producer runs) favour whichever broker ran first more often.
    os.sync()
    b.start()
    try:
        time.sleep(3)  # let start-up settle before sampling idle memory
        res.add(name, "rss_idle_mib", proc_mem_kib(b.pid)["VmRSS"] / 1024)
        topics = [("warm", 8), ("lat", 1), ("e2e", 1)] + [
            (f"p{p}-{c}", p) for p, c in CONFIGS]
        create_topics(b, topics)
        # Warm-up (not measured): JIT for Kafka, page cache and allocator for both.
        attempt(res, name, "warm-up", lambda: (
            java_produce(b, "warm", cfg["warm"], "none"),
            rdk(["produce", "--bootstrap", b.bootstrap, "--topic", "warm",
                 "--count", str(cfg["warm"] // 2)], 300)))

        # Produce throughput: both generators into the same topic, so each topic ends up
        # with 2 x prod records for the consume runs.
        cpu, nbytes = 0.0, 0
        for p, codec in CONFIGS:
            topic = f"p{p}-{codec}"
            gens = ("java", "rdk", "c") if RDK_PERF and (p, codec) in C_CONFIGS else ("java", "rdk")
            for gen in gens:
                c0 = proc_cpu_s(b.pid)
                if gen == "java":
                    r = attempt(res, name, f"produce {topic} java",
                                lambda: java_produce(b, topic, cfg["prod"], codec))
                elif gen == "rdk":
                    r = attempt(res, name, f"produce {topic} rdkafka", lambda: rdk(
                        ["produce", "--bootstrap", b.bootstrap, "--topic", topic,
                         "--count", str(cfg["prod"]), "--compression", codec], 300))
                else:
                    r = attempt(res, name, f"produce {topic} rdkafka_performance",
                                lambda: c_produce(b, topic, C_PRODUCE_FACTOR * cfg["prod"]))
                if r:
                    cpu += proc_cpu_s(b.pid) - c0
                    nbytes += r["bytes"] if gen == "c" else cfg["prod"] * RECORD
                    res.add(name, f"produce_{gen}_p{p}_{codec}_mb_s", r["mb_s"])
                    log(f"   produce {topic} {gen}: {r['mb_s']:.1f} MB/s")
        if nbytes:
            res.add(name, "cpu_s_per_gb_produce", cpu / (nbytes / 1e9))

        # Consume throughput of the same data.
        cpu, nbytes = 0.0, 0
        for p, codec in CONFIGS:
            topic = f"p{p}-{codec}"
            n = 2 * cfg["prod"]
            with_c = RDK_PERF and (p, codec) in C_CONFIGS
            for gen in ("java", "rdk", "c") if with_c else ("java", "rdk"):
                c0 = proc_cpu_s(b.pid)
                if gen == "java":
                    r = attempt(res, name, f"consume {topic} java",
                                lambda: java_consume(b, topic, n))
                elif gen == "rdk":
                    r = attempt(res, name, f"consume {topic} rdkafka", lambda: rdk(
                        ["consume", "--bootstrap", b.bootstrap, "--topic", topic,
                         "--count", str(n), "--passes", str(RDK_CONSUME_PASSES)], 300))
                else:
                    # Everything the three producers wrote.
                    total = (2 + C_PRODUCE_FACTOR) * cfg["prod"]
                    r = attempt(res, name, f"consume {topic} rdkafka_performance",
                                lambda: c_consume(b, topic, p, total))
                if r:
                    cpu += proc_cpu_s(b.pid) - c0
                    nbytes += r["bytes"] if gen in ("rdk", "c") else n * RECORD
                    res.add(name, f"consume_{gen}_p{p}_{codec}_mb_s", r["mb_s"])
                    log(f"   consume {topic} {gen}: {r['mb_s']:.1f} MB/s")
        if nbytes:
            res.add(name, "cpu_s_per_gb_consume", cpu / (nbytes / 1e9))

        # Latency at a fixed rate below both brokers' maximum (1 partition, acks=all).
        n = int(cfg["lat_rate"] * cfg["lat_secs"])
        r = attempt(res, name, "latency java", lambda: java_produce(
            b, "lat", n, "none", rate=cfg["lat_rate"], props=[]))
        if r:
            res.add(name, "lat_java_rate_achieved", r["rec_s"])
            for q in ("50", "99", "99.9"):
                res.add(name, f"lat_java_produce_p{q}_ms", r["lat_ms"][q])
            log(f"   produce latency java: {r['lat_ms']}")
        r = attempt(res, name, "latency rdkafka", lambda: rdk(
            ["latency", "--bootstrap", b.bootstrap, "--topic", "lat", "--rate",
             str(cfg["lat_rate"]), "--seconds", str(cfg["lat_secs"])], 180))
        if r:
            for q in ("50", "99", "99.9"):
                res.add(name, f"lat_rdk_produce_p{q}_ms", r["produce_ms"][q])
                res.add(name, f"lat_rdk_e2e_p{q}_ms", r["e2e_ms"][q])
            res.add(name, "lat_rdk_rate_achieved", r["rate_achieved"])
            log(f"   latency rdkafka: produce {r['produce_ms']} e2e {r['e2e_ms']}")
        # The same with linger.ms=0: the clients send each record at once, so what is left of
        # send → ack is the network round trip plus the broker's own time.
        r = attempt(res, name, "latency java linger 0", lambda: java_produce(
            b, "lat", n, "none", rate=cfg["lat_rate"], props=["linger.ms=0"]))
        if r:
            for q in ("50", "99", "99.9"):
                res.add(name, f"lat0_java_produce_p{q}_ms", r["lat_ms"][q])
            log(f"   produce latency java linger 0: {r['lat_ms']}")
        r = attempt(res, name, "latency rdkafka linger 0", lambda: rdk(
            ["latency", "--bootstrap", b.bootstrap, "--topic", "lat", "--rate",
             str(cfg["lat_rate"]), "--seconds", str(cfg["lat_secs"]), "--linger-ms", "0"], 180))
        if r:
            for q in ("50", "99", "99.9"):
                res.add(name, f"lat0_rdk_produce_p{q}_ms", r["produce_ms"][q])
                res.add(name, f"lat0_rdk_e2e_p{q}_ms", r["e2e_ms"][q])
            log(f"   latency rdkafka linger 0: produce {r['produce_ms']} e2e {r['e2e_ms']}")
        r = attempt(res, name, "EndToEndLatency", lambda: java_e2e(b, "e2e", cfg["e2e_msgs"]))
        if r:
            for q in ("avg", "50", "99", "99.9"):
                res.add(name, f"lat_java_e2e_{q}_ms", r[q])
            log(f"   EndToEndLatency: {r}")
        res.add(name, "rss_peak_mib", proc_mem_kib(b.pid)["VmHWM"] / 1024)
    finally:
        b.stop()


def probe_start(b, topic, overrides=(), deadline=180):
    """Starts the first-ack probe, then the broker; returns (port_s, ack_s) after start."""
    probe = subprocess.Popen([VENV_PY, RDK, "firstack", "--bootstrap", b.bootstrap, "--topic",
                              topic, "--deadline", str(deadline)],
                             stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True,
                             start_new_session=True)
    try:
        import select
        ready = ""
        if select.select([probe.stdout], [], [], 60)[0]:
            ready = probe.stdout.readline()  # printed once confluent_kafka is imported
        if ready.strip() != "ready":
            raise RuntimeError("probe did not start")
        t0 = time.monotonic()
        b.spawn(overrides)
        out, _ = probe.communicate(timeout=deadline + 10)
        b.wait_started()
        if probe.returncode != 0:
            raise RuntimeError(f"probe failed (exit {probe.returncode})")
        r = json.loads(out.strip().splitlines()[-1])
        return r["t_port"] - t0, r["t_ack"] - t0
    finally:
        if probe.poll() is None:
            os.killpg(probe.pid, signal.SIGKILL)
            probe.wait()


def cold_start(b, res):
    b.prepare(os.path.join(WORK, f"{b.name}-cold"))
    try:
        port_s, ack_s = probe_start(b, "cold")
        res.add(b.name, "cold_start_port_s", port_s)
        res.add(b.name, "cold_start_first_ack_s", ack_s)
        log(f"   cold start {b.name}: port {port_s:.3f}s, first ack {ack_s:.3f}s")
    finally:
        b.stop()


def flush_session(b, cfg, res):
    b.prepare(os.path.join(WORK, f"{b.name}-flush"))
    b.start(["log.flush.interval.messages=1"])
    try:
        create_topics(b, [("flush", 1)])
        n = cfg["flush"]
        r = attempt(res, b.name, "flush java", lambda: java_produce(b, "flush", n, "none"))
        if r:
            res.add(b.name, "flush_java_p1_none_mb_s", r["mb_s"])
            log(f"   flush=1 {b.name} java: {r['mb_s']:.2f} MB/s")
        r = attempt(res, b.name, "flush rdkafka", lambda: rdk(
            ["produce", "--bootstrap", b.bootstrap, "--topic", "flush", "--count", str(n)], 300))
        if r:
            res.add(b.name, "flush_rdk_p1_none_mb_s", r["mb_s"])
            log(f"   flush=1 {b.name} rdkafka: {r['mb_s']:.2f} MB/s")
    finally:
        b.stop()


# Transactional produce: records per transaction of each cell.
TXN_SIZES = [100, 10000]


def txn_session(b, cfg, res):
    """Transactions (a fresh broker): librdkafka's transactional producer commits every 100
    and every 10,000 records into 1-partition topics, then the topic of 100-record transactions
    (a COMMIT marker after every 100 records) is read with isolation.level=read_committed by
    librdkafka and by Kafka's ConsumerPerformance."""
    b.prepare(os.path.join(WORK, f"{b.name}-txn"))
    b.start()
    try:
        create_topics(b, [(f"txn{k}", 1) for k in TXN_SIZES])
        n = cfg["prod"]
        produced = {}
        for k in TXN_SIZES:
            r = attempt(res, b.name, f"txn produce per {k}", lambda: rdk(
                ["txn-produce", "--bootstrap", b.bootstrap, "--topic", f"txn{k}",
                 "--count", str(n), "--per-txn", str(k)], 300))
            if r:
                produced[k] = r
                res.add(b.name, f"txn_rdk_per{k}_p1_mb_s", r["mb_s"])
                log(f"   txn produce per {k} {b.name}: {r['mb_s']:.1f} MB/s, "
                    f"{r['txn_s']:.0f} transactions/s")
        topic = f"txn{TXN_SIZES[0]}"
        if TXN_SIZES[0] not in produced:
            res.error(b.name, "read_committed consume", "skipped: nothing was produced to read")
            return
        r = attempt(res, b.name, "read_committed consume rdkafka", lambda: rdk(
            ["consume", "--bootstrap", b.bootstrap, "--topic", topic, "--count", str(n),
             "--passes", str(RDK_CONSUME_PASSES), "--isolation", "read_committed"], 300))
        if r:
            res.add(b.name, "txn_consume_rdk_p1_mb_s", r["mb_s"])
            log(f"   read_committed consume {b.name} rdkafka: {r['mb_s']:.1f} MB/s")
        props = os.path.join(WORK, "read-committed.properties")
        with open(props, "w") as f:
            f.write("isolation.level=read_committed\n")
        r = attempt(res, b.name, "read_committed consume java",
                    lambda: java_consume(b, topic, n, consumer_config=props))
        if r:
            res.add(b.name, "txn_consume_java_p1_mb_s", r["mb_s"])
            log(f"   read_committed consume {b.name} java: {r['mb_s']:.1f} MB/s")
    finally:
        b.stop()


def watermarks_total(b, topic):
    code = ("import sys,json\nfrom confluent_kafka import Consumer, TopicPartition\n"
            "c=Consumer({'bootstrap.servers':sys.argv[1],'group.id':'bench-wm'})\n"
            "t=c.list_topics(topic=sys.argv[2],timeout=30).topics[sys.argv[2]]\n"
            "print(json.dumps(sum(c.get_watermark_offsets(TopicPartition(sys.argv[2],p),"
            "timeout=30)[1] for p in t.partitions)))\n")
    _, out, _ = run([VENV_PY, "-c", code, b.bootstrap, topic], timeout=90)
    return int(out.strip())


def recovery(b, cfg, res):
    """Writes rec_bytes without a flush, kill -9, and times the restart."""
    b.prepare(os.path.join(WORK, f"{b.name}-recovery"))
    b.start()
    try:
        create_topics(b, [("rec", 8)])
        n = cfg["rec_bytes"] // RECORD
        w = rdk(["produce", "--bootstrap", b.bootstrap, "--topic", "rec", "--count", str(n)], 600)
        log(f"   recovery {b.name}: wrote {n} records at {w['mb_s']:.1f} MB/s")
        time.sleep(1)
        b.kill9()
        time.sleep(0.5)
        port_s, ack_s = probe_start(b, "rec", deadline=300)
        total = watermarks_total(b, "rec")
        res.add(b.name, "recovery_port_s", port_s)
        res.add(b.name, "recovery_first_ack_s", ack_s)
        res.add(b.name, "recovery_records_kept", total - 1)
        log(f"   recovery {b.name}: port {port_s:.2f}s, first ack {ack_s:.2f}s, "
            f"{total - 1}/{n} records kept")
    finally:
        b.stop()


def machine_limits(cfg, res):
    lim = res.data["limits"]
    f = os.path.join(WORK, "dd.bin")
    try:
        _, _, err = run(["dd", "if=/dev/zero", f"of={f}", "bs=1M", f"count={cfg['limit_dd_mb']}",
                         "conv=fdatasync"], timeout=300)
        m = re.search(r"copied, ([\d.]+) s", err)
        lim["dd_fdatasync_mb_s"] = cfg["limit_dd_mb"] * 1048576 / 1e6 / float(m.group(1))
        _, _, err = run(["dd", "if=/dev/zero", f"of={f}", "bs=4k", "count=400", "oflag=dsync"],
                        timeout=300)
        m = re.search(r"copied, ([\d.]+) s", err)
        lim["dsync_4k_writes_s"] = 400 / float(m.group(1))
    except Exception as e:
        res.error("machine", "dd", e)
    finally:
        try:
            os.unlink(f)
        except FileNotFoundError:
            pass
    port = free_port()
    try:
        if shutil.which("iperf3"):
            srv = subprocess.Popen(["iperf3", "-s", "-B", "127.0.0.1", "-p", str(port)],
                                   stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                                   start_new_session=True)
            try:
                time.sleep(1)  # (a connect probe would count as iperf3's test client)
                _, out, _ = run(["iperf3", "-c", "127.0.0.1", "-p", str(port), "-t",
                                 str(cfg["iperf_secs"]), "-J"], timeout=60)
                bps = json.loads(out)["end"]["sum_received"]["bits_per_second"]
                lim["loopback_mb_s"] = bps / 8e6
                lim["loopback_tool"] = "iperf3"
            finally:
                if srv.poll() is None:
                    srv.kill()
                srv.wait()
        else:
            lim["loopback_mb_s"] = python_loopback(port, cfg["iperf_secs"])
            lim["loopback_tool"] = "python sockets"
    except Exception as e:
        res.error("machine", "loopback", e)
    res.save()
    log(f"machine limits: {lim}")


def python_loopback(port, secs):
    srv = socket.socket()
    srv.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    srv.bind(("127.0.0.1", port))
    srv.listen(1)
    got = [0]

    def sink():
        c, _ = srv.accept()
        buf = bytearray(1 << 20)
        while True:
            n = c.recv_into(buf)
            if not n:
                break
            got[0] += n
        c.close()
    t = threading.Thread(target=sink)
    t.start()
    cl = socket.create_connection(("127.0.0.1", port))
    data = b"\0" * (1 << 20)
    t0 = time.perf_counter()
    while time.perf_counter() - t0 < secs:
        cl.sendall(data)
    cl.close()
    t.join(30)
    srv.close()
    return got[0] / (time.perf_counter() - t0) / 1e6


# ---------------------------------------------------------------- machine description

def machine_info():
    info = {"nproc": os.cpu_count()}
    try:
        with open("/proc/meminfo") as f:
            info["mem_gib"] = round(int(f.readline().split()[1]) / 1048576, 1)
        with open("/proc/cpuinfo") as f:
            for line in f:
                if line.startswith("model name"):
                    info["cpu"] = line.split(":", 1)[1].strip()
                    break
    except OSError:
        pass
    info["kernel"] = platform.release()
    try:
        _, out, _ = run(["df", "-hT", WORK], timeout=10)
        info["disk"] = out.strip().splitlines()[-1]
        dev = out.strip().splitlines()[-1].split()[0]
        base = os.path.basename(dev)
        rot = f"/sys/block/{base}/queue/rotational"
        if os.path.exists(rot):
            info["disk"] += f" (rotational flag {open(rot).read().strip()})"
    except Exception:
        pass
    try:
        with open("/proc/loadavg") as f:
            info["loadavg_at_start"] = f.read().split()[:3]
    except OSError:
        pass
    _, out, err = run(["java", "-version"], timeout=30, check=False)
    info["java"] = (err or out).splitlines()[0] if (err or out) else "?"
    return info


def git_head():
    """The commit checked out, read from .git without running git."""
    g = os.path.join(ROOT, ".git")
    try:
        if os.path.isfile(g):  # a worktree: ".git" names its git dir
            line = open(g).read().strip()
            if line.startswith("gitdir: "):
                g = os.path.join(ROOT, line[len("gitdir: "):])
        dirs = [g]
        common = os.path.join(g, "commondir")
        if os.path.exists(common):  # refs are shared with the main repository
            dirs.append(os.path.join(g, open(common).read().strip()))
        head = open(os.path.join(g, "HEAD")).read().strip()
        if not head.startswith("ref: "):
            return head
        ref = head[5:]
        for d in dirs:
            p = os.path.join(d, ref)
            if os.path.exists(p):
                return open(p).read().strip()
        for d in dirs:
            packed = os.path.join(d, "packed-refs")
            if os.path.exists(packed):
                with open(packed) as f:
                    for line in f:
                        if line.strip().endswith(" " + ref):
                            return line.split()[0]
    except OSError:
        pass
    return "unknown"


# ---------------------------------------------------------------- main

def cleanup_pids():
    """Kills the brokers this harness started (their pids are noted under target/bench)."""
    kp = os.path.join(WORK, "kafka-node", "kafka.pid")
    if os.path.exists(kp):
        note_pid("kafka-node", open(kp).read().strip())
    if not os.path.isdir(PIDS):
        return
    for n in os.listdir(PIDS):
        try:
            pid = int(open(os.path.join(PIDS, n)).read())
            with open(f"/proc/{pid}/cmdline", "rb") as f:
                cmdline = f.read().decode(errors="replace")
            if WORK in cmdline:  # only a process started on our work dir, never a reused pid
                os.kill(pid, signal.SIGKILL)
                log(f"cleanup: killed {n} ({pid})")
        except (OSError, ValueError):
            pass
        forget_pid(n)


def main_run(a):
    cfg = MODES["quick" if a.quick else "full"]
    os.makedirs(WORK, exist_ok=True)
    out = a.out
    meta = {"mode": "quick" if a.quick else "full", "cfg": cfg, "commit": git_head(),
            "date": time.strftime("%Y-%m-%d %H:%M:%S %Z"), "machine": machine_info(),
            "command": a.command, "record_bytes": RECORD}
    res = Results(out, meta)
    t_begin = time.monotonic()
    sluice = Sluice(a.sluice, free_port())
    kafka = Kafka(free_port(), WORK)
    log(f"sluice on {sluice.bootstrap}, Kafka on {kafka.bootstrap}; results -> {out}")
    only = set(filter(None, a.only.split(",")))

    def want(phase):
        return not only or phase in only
    try:
        if want("limits"):
            machine_limits(cfg, res)
        log("formatting the Kafka node once (start-kafka.sh)")
        kafka.make_pristine()

        def order(i):  # ABBA: Kafka first on even repetitions, sluice first on odd ones
            return (kafka, sluice) if i % 2 == 0 else (sluice, kafka)

        for i in range(cfg["reps"] if want("sessions") else 0):
            for b in order(i):
                try:
                    session(b, cfg, res, i + 1)
                except Exception as e:
                    res.error(b.name, f"session {i + 1}", e)
        log("== cold start")
        for i in range(cfg["cold"] if want("cold") else 0):
            for b in order(i):
                attempt(res, b.name, "cold start", lambda: cold_start(b, res))
        log("== flush on every message")
        for i in range(cfg["reps"] if want("flush") else 0):
            for b in order(i):
                attempt(res, b.name, "flush session", lambda: flush_session(b, cfg, res))
        log("== transactions")
        for i in range(cfg["reps"] if want("txn") else 0):
            for b in order(i):
                attempt(res, b.name, "txn session", lambda: txn_session(b, cfg, res))
        log("== recovery after kill -9")
        for i in range(cfg["reps"] if want("recovery") else 0):
            for b in order(i):
                attempt(res, b.name, "recovery", lambda: recovery(b, cfg, res))
    finally:
        sluice.stop()
        kafka.stop()
        for d in ("sluice-session", "sluice-cold", "sluice-flush", "sluice-recovery",
                  "sluice-txn", "kafka-node"):
            shutil.rmtree(os.path.join(WORK, d), ignore_errors=True)
        res.data["meta"]["duration_s"] = time.monotonic() - t_begin
        res.save()
    log(f"done in {time.monotonic() - t_begin:.0f}s; {len(res.data['errors'])} errors")
    return 0


def main_profile(a):
    """sluice under perf record during the produce-throughput scenario."""
    cfg = MODES["full"]
    os.makedirs(a.perf_dir, exist_ok=True)
    sluice = Sluice(a.sluice, free_port())
    sluice.prepare(os.path.join(WORK, "sluice-profile"))
    sluice.start()
    perf = None
    try:
        topics = [("warm", 8)] + [(f"p{p}-{c}", p) for p, c in CONFIGS]
        create_topics(sluice, topics)
        java_produce(sluice, "warm", cfg["warm"], "none")
        data = os.path.join(a.perf_dir, "perf.data")
        perf = subprocess.Popen(["perf", "record", "-F", "1999", "--call-graph", "dwarf,16384",
                                 "-p", str(sluice.pid), "-o", data],
                                stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                                start_new_session=True)
        time.sleep(1)
        c0 = proc_cpu_s(sluice.pid)
        t0 = time.monotonic()
        for p, codec in CONFIGS * 3:  # three passes, for enough samples
            topic = f"p{p}-{codec}"
            r1 = java_produce(sluice, topic, cfg["prod"], codec)
            r2 = rdk(["produce", "--bootstrap", sluice.bootstrap, "--topic", topic,
                      "--count", str(cfg["prod"]), "--compression", codec], 300)
            log(f"   {topic}: java {r1['mb_s']:.1f} MB/s, rdkafka {r2['mb_s']:.1f} MB/s")
        log(f"broker CPU {proc_cpu_s(sluice.pid) - c0:.1f}s over {time.monotonic() - t0:.1f}s")
        perf.send_signal(signal.SIGINT)
        perf.wait(120)
        # Then the consume scenario (ConsumerPerformance), into its own perf.data.
        perf = subprocess.Popen(["perf", "record", "-F", "1999", "--call-graph", "dwarf,16384",
                                 "-p", str(sluice.pid), "-o",
                                 os.path.join(a.perf_dir, "perf-consume.data")],
                                stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                                start_new_session=True)
        time.sleep(1)
        c0 = proc_cpu_s(sluice.pid)
        for p, codec in CONFIGS * 2:
            r = java_consume(sluice, f"p{p}-{codec}", 3 * cfg["prod"])
            log(f"   consume p{p}-{codec}: java {r['mb_s']:.1f} MB/s")
        log(f"broker CPU while consuming {proc_cpu_s(sluice.pid) - c0:.1f}s")
        perf.send_signal(signal.SIGINT)
        perf.wait(120)
    finally:
        if perf is not None and perf.poll() is None:
            perf.kill()
        sluice.stop()
        shutil.rmtree(os.path.join(WORK, "sluice-profile"), ignore_errors=True)
    return 0


def main():
    ap = argparse.ArgumentParser()
    sub = ap.add_subparsers(dest="cmd", required=True)
    r = sub.add_parser("run")
    r.add_argument("--quick", action="store_true")
    r.add_argument("--sluice", required=True)
    r.add_argument("--out", required=True)
    r.add_argument("--command", default="bash benches/run.sh")
    r.add_argument("--only", default="", help="run only these phases, comma-separated, of: "
                   "limits, sessions, cold, flush, txn, recovery (default: all; for trying "
                   "one phase out, with --out elsewhere than results.json)")
    p = sub.add_parser("profile")
    p.add_argument("--sluice", required=True)
    p.add_argument("--perf-dir", required=True)
    sub.add_parser("cleanup")
    a = ap.parse_args()

    def on_term(signum, _frame):
        raise SystemExit(f"signal {signum}")
    signal.signal(signal.SIGTERM, on_term)
    signal.signal(signal.SIGHUP, on_term)
    if a.cmd == "cleanup":
        cleanup_pids()
        return 0
    return main_run(a) if a.cmd == "run" else main_profile(a)


if __name__ == "__main__":
    sys.exit(main())
