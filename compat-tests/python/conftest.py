"""Fixtures: the broker under test.

`broker` is one broker per test module. `broker_factory(**overrides)` starts a fresh broker for
one test (for tests that restart it, kill it, or read its files); in KAFKA_BOOTSTRAP mode those
tests are skipped with the reason below. With no mode set the run fails at once.
"""
import os
from pathlib import Path

import pytest

from brokers import Broker

NEEDS_CONTROL_REASON = ("needs a broker process this harness starts itself (kill -9, restart, "
                        "reading its log files); KAFKA_BOOTSTRAP points at an external broker. "
                        "Use SLUICE_BIN=... or KAFKA_MANAGED=1 to run it")
_started = []  # every Broker started in this session, so none outlives it


def _mode():
    if os.environ.get("SLUICE_BIN"):
        return "sluice"
    if os.environ.get("KAFKA_MANAGED") == "1":
        return "kafka"
    if os.environ.get("KAFKA_BOOTSTRAP"):
        return "external"
    return None


def pytest_configure(config):
    mode = _mode()
    if mode is None:
        raise pytest.UsageError(
            "no broker to test: set SLUICE_BIN=/path/to/sluice, or KAFKA_MANAGED=1 (starts Apache "
            "Kafka from compat-tests/.cache), or KAFKA_BOOTSTRAP=127.0.0.1:9092")
    if mode == "sluice":
        path = Path(os.environ["SLUICE_BIN"])
        if not (path.is_file() and os.access(path, os.X_OK)):
            raise pytest.UsageError(f"SLUICE_BIN={path} is not an executable file")


def pytest_report_header(config):
    mode = _mode()
    target = {"sluice": os.environ.get("SLUICE_BIN"), "kafka": "Apache Kafka (kafka/start-kafka.sh)",
              "external": os.environ.get("KAFKA_BOOTSTRAP")}.get(mode)
    return f"broker under test: {mode}: {target}"


def _new_broker(root, overrides=None):
    mode = _mode()
    if mode == "external":
        return Broker("external", bootstrap=os.environ["KAFKA_BOOTSTRAP"])
    b = Broker(mode, root=root, overrides=overrides, sluice_bin=os.environ.get("SLUICE_BIN"))
    _started.append(b)
    return b.start()


@pytest.fixture(scope="module")
def broker(tmp_path_factory, request):
    """A test module may set BROKER_OVERRIDES = {key: value} for its shared broker."""
    b = _new_broker(tmp_path_factory.mktemp(request.module.__name__.replace(".", "_")),
                    getattr(request.module, "BROKER_OVERRIDES", None))
    yield b
    if b.controllable:
        alive = b.is_running()
        b.stop()
        assert alive, f"{b.describe()} died during the module:\n{b.output_tail()}"


class BrokerFactory:
    def __init__(self, tmp_path):
        self.tmp_path = tmp_path
        self.brokers = []

    def __call__(self, overrides=None):
        if _mode() == "external":
            pytest.skip(NEEDS_CONTROL_REASON)
        root = self.tmp_path / f"broker{len(self.brokers)}"
        b = _new_broker(root, overrides)
        self.brokers.append(b)
        return b


@pytest.fixture
def broker_factory(tmp_path):
    """broker_factory({"log.segment.bytes": 1048576}) -> a started Broker with those overrides."""
    factory = BrokerFactory(tmp_path)
    yield factory
    errors = []
    for b in factory.brokers:
        try:
            b.stop()
        except AssertionError as e:
            errors.append(str(e))
    assert not errors, errors


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_makereport(item, call):
    """On failure, attach each involved broker's history and the tail of its output."""
    outcome = yield
    report = outcome.get_result()
    if not report.failed:
        return
    brokers = []
    for value in getattr(item, "funcargs", {}).values():
        if isinstance(value, Broker):
            brokers.append(value)
        elif isinstance(value, BrokerFactory):
            brokers.extend(value.brokers)
    for b in brokers:
        text = "events: " + "; ".join(b.events) + "\n" + b.output_tail()
        report.sections.append((f"{b.describe()} (last output lines)", text))


def pytest_sessionfinish(session, exitstatus):
    for b in _started:
        if b.is_running():
            b.kill9()
