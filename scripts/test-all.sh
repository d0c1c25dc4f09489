#!/usr/bin/env bash
# The README's test command: every check and test sluice has, on a fresh machine.
# It installs what the tests need itself (apt, pip, Maven, npm: see compat-tests/setup.sh).
set -euo pipefail
cd "$(dirname "$0")/.."

# Each step says how long the run has taken so far, so a CI log shows where the time goes.
started=$SECONDS
step() { printf '\n==> [%dm%02ds] %s\n' $(((SECONDS - started) / 60)) $(((SECONDS - started) % 60)) "$*"; }

step "cargo fmt --check"
cargo fmt --all -- --check
step "cargo clippy -D warnings"
cargo clippy --all-targets -- -D warnings
step "cargo test (unit and in-process socket tests)"
cargo test
step "cargo build --release"
cargo build --release
step "real clients and Kafka's tools against target/release/sluice"
bash compat-tests/run-core.sh "$PWD/target/release/sluice"
step "Java client 4.4 and Kafka's CLI tools against target/release/sluice"
bash compat-tests/java/run.sh "$PWD/target/release/sluice"
step "Java client 3.9 (the same tests.allow, CLI tools aside) against target/release/sluice"
bash compat-tests/java/run.sh "$PWD/target/release/sluice" --client 3.9
step "transactions (confluent-kafka, kill -9, DumpLogSegments, vs Apache Kafka; tests.allow) against target/release/sluice"
bash compat-tests/transactions/run.sh "$PWD/target/release/sluice"
step "kafka-topics --describe on target/release/sluice vs Apache Kafka"
bash compat-tests/kafka/compare-topics-describe.sh "$PWD/target/release/sluice"
step "ApiVersions of target/release/sluice within Apache Kafka's, its features equal to Kafka's"
bash compat-tests/kafka/compare-api-versions.sh "$PWD/target/release/sluice"
step "version emulation (sluice.emulate.kafka.version=3.6) under kafka-broker-api-versions and the Java client"
bash compat-tests/kafka/test-version-emulation.sh "$PWD/target/release/sluice"
step "librdkafka's own test suite (tests.allow) against target/release/sluice"
bash compat-tests/librdkafka/run.sh "$PWD/target/release/sluice"
step "franz-go's kgo integration tests (tests.allow) against target/release/sluice"
bash compat-tests/franz-go/run.sh "$PWD/target/release/sluice"
step "kafkajs scenarios (tests.allow) against target/release/sluice"
bash compat-tests/kafkajs/run.sh "$PWD/target/release/sluice"
step "the test broker: metrics, fault injection, the image under Testcontainers (Java, Python, Go)"
bash compat-tests/testcontainers/run.sh "$PWD/target/release/sluice"
step "compatibility report card"
python3 compat-tests/report.py
step "done"
