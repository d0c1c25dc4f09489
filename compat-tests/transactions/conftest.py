"""Fixtures of the transactions suite: the core suite's (../python/conftest.py), shared as they
are. The broker under test is chosen by the same environment variables (SLUICE_BIN,
KAFKA_MANAGED=1, KAFKA_BOOTSTRAP; see ../README.md), and the suite imports the core suite's
helpers (brokers.py, helpers.py, kafka_tools.py) from ../python.
"""
import importlib.util
import sys
from pathlib import Path

CORE = Path(__file__).resolve().parent.parent / "python"
sys.path.insert(0, str(CORE))

_spec = importlib.util.spec_from_file_location("core_conftest", CORE / "conftest.py")
core = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(core)

# pytest finds fixtures and hooks by name in this module.
broker = core.broker
broker_factory = core.broker_factory
pytest_configure = core.pytest_configure
pytest_report_header = core.pytest_report_header
pytest_runtest_makereport = core.pytest_runtest_makereport
pytest_sessionfinish = core.pytest_sessionfinish
