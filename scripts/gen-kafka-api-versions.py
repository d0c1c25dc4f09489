#!/usr/bin/env python3
"""Writes src/protocol/kafka_releases.rs: for each Kafka release sluice can emulate
(`sluice.emulate.kafka.version`), the version range of every API that a broker of that release
advertises in ApiVersions, and the features it supports.

    python3 scripts/gen-kafka-api-versions.py [--out src/protocol/kafka_releases.rs]

It fetches the kafka-clients jar of each release in RELEASES from Maven Central with `mvn
dependency:copy` (into a temporary directory; Maven's local repository caches them) and reads
the request schemas in it (`common/message/*Request.json`). A broker's ApiVersions answer is
not simply each schema's `validVersions`; the rules below are the ones Kafka's broker applies
(ApiVersionsResponse.filterApis and ApiKeys), and compat-tests/kafka/check-release-api-versions.sh
checks the result against real brokers of those releases:

1. Only the APIs whose schema lists the broker's listener type are advertised (`listeners`):
   the others are controller-only or, for a ZooKeeper broker, KRaft-only. The broker emulated
   is the one each release ran in production: a ZooKeeper broker (`zkBroker`) up to 3.2, a
   KRaft broker (`broker`) from 3.3 on, when KRaft became production-ready (KIP-833).
2. A schema with `"latestVersionUnstable": true` (3.5 on) has its last version left out, as a
   broker does without `unstable.api.versions.enable`; an API left with no version is not
   advertised at all.
3. `"validVersions": "none"` is an API removed from that release (4.0 removed the ZooKeeper
   inter-broker APIs). Versions that KIP-896 removed in 4.0 are already gone from
   `validVersions`; `deprecatedVersions` are still advertised.
4. GetTelemetrySubscriptions and PushTelemetry (3.7 on) are advertised only when a metrics
   reporter that receives client telemetry is configured, which a default broker has not.
5. Produce is advertised from v0 from 4.0 on although its schema starts at v3 (KAFKA-18659:
   librdkafka before 2.11.1 turned compression off when v0-2 were missing; requests at v0-2
   are still refused).

Features are not in the schemas; FEATURES below lists what each release's broker supports
(its `SupportedFeatures`), from Kafka's MetadataVersion and feature enums of that release, also
checked by check-release-api-versions.sh.
"""
import argparse
import json
import os
import re
import subprocess
import sys
import tempfile
import zipfile

# (release as the setting names it, the patch release whose jar is read: the latest of each).
RELEASES = [
    ("2.8", "2.8.2"),
    ("3.0", "3.0.2"),
    ("3.1", "3.1.2"),
    ("3.2", "3.2.3"),
    ("3.3", "3.3.2"),
    ("3.4", "3.4.1"),
    ("3.5", "3.5.2"),
    ("3.6", "3.6.2"),
    ("3.7", "3.7.2"),
    ("3.8", "3.8.1"),
    ("3.9", "3.9.2"),
    ("4.0", "4.0.2"),
    ("4.1", "4.1.2"),
    ("4.2", "4.2.2"),
    ("4.3", "4.3.2"),
    ("4.4", "4.4.0"),
]

TELEMETRY_APIS = {71, 72}  # GetTelemetrySubscriptions, PushTelemetry (rule 4)
PRODUCE = 0

# SupportedFeatures of each release's broker: name -> (min, max). ZooKeeper brokers up to 3.2
# list none. metadata.version goes from 3.0-IV1 (1) to the release's latest production level
# (3.3-3.6 had no unstable levels, so their latest); from 4.0 its minimum is 3.3-IV3 (7). The
# other features (3.9 on) go from 0 to their latest production level; one whose latest
# production level is 0 (streams.version in 4.1) is not listed.
_FEATURES_4 = {"kraft.version": (0, 1), "transaction.version": (0, 2), "group.version": (0, 1),
               "eligible.leader.replicas.version": (0, 1)}
FEATURES = {
    "2.8": {}, "3.0": {}, "3.1": {}, "3.2": {},
    "3.3": {"metadata.version": (1, 7)},
    "3.4": {"metadata.version": (1, 8)},
    "3.5": {"metadata.version": (1, 11)},
    "3.6": {"metadata.version": (1, 14)},
    "3.7": {"metadata.version": (1, 19)},
    "3.8": {"metadata.version": (1, 20)},
    "3.9": {"metadata.version": (1, 21), "kraft.version": (0, 1)},
    "4.0": {"metadata.version": (7, 25), **_FEATURES_4},
    "4.1": {"metadata.version": (7, 27), **_FEATURES_4, "share.version": (0, 1)},
    "4.2": {"metadata.version": (7, 29), **_FEATURES_4, "share.version": (0, 1),
            "streams.version": (0, 1)},
    "4.3": {"metadata.version": (7, 30), **_FEATURES_4, "share.version": (0, 1),
            "streams.version": (0, 1)},
    "4.4": {"metadata.version": (7, 33), **_FEATURES_4, "share.version": (0, 2),
            "streams.version": (0, 1)},
}


def listener_type(release):
    major, minor = (int(p) for p in release.split("."))
    return "zkBroker" if (major, minor) < (3, 3) else "broker"


def strip_comments(text):
    """The schemas are JSON with // comments (never inside a string's //)."""
    lines = []
    for line in text.splitlines():
        in_string, cut = False, len(line)
        for i, c in enumerate(line):
            if c == '"' and (i == 0 or line[i - 1] != "\\"):
                in_string = not in_string
            elif not in_string and line.startswith("//", i):
                cut = i
                break
        lines.append(line[:cut])
    return "\n".join(lines)


def parse_range(text):
    """"0-9" / "3" / "none" -> (min, max) or None."""
    if text == "none":
        return None
    lo, _, hi = text.partition("-")
    return int(lo), int(hi or lo)


def fetch_jar(version, directory):
    done = subprocess.run(
        ["mvn", "-q", "-B", "-Dstyle.color=never", "dependency:copy",
         f"-Dartifact=org.apache.kafka:kafka-clients:{version}", f"-DoutputDirectory={directory}"],
        stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    if done.returncode != 0:
        sys.exit(f"gen-kafka-api-versions.py: mvn could not fetch kafka-clients {version}:\n"
                 + done.stdout)
    return os.path.join(directory, f"kafka-clients-{version}.jar")


def request_schemas(jar):
    with zipfile.ZipFile(jar) as archive:
        for name in sorted(archive.namelist()):
            if re.fullmatch(r"common/message/\w+Request\.json", name):
                text = strip_comments(archive.read(name).decode()).strip()
                # raw_decode: Kafka's own reader ignores what follows the object, and 2.8's
                # DescribeProducersRequest.json has a stray "]}" there.
                schema, _ = json.JSONDecoder().raw_decode(text)
                yield schema


def advertised(release, schemas):
    """{api key: (name, min, max)} as a broker of `release` advertises them (rules 1-5)."""
    listener = listener_type(release)
    major = int(release.split(".")[0])
    apis = {}
    for schema in schemas:
        key, name = schema["apiKey"], schema["name"].removesuffix("Request")
        versions = parse_range(schema["validVersions"])
        if versions is None or listener not in schema.get("listeners", []):
            continue
        if key in TELEMETRY_APIS:
            continue
        lo, hi = versions
        if schema.get("latestVersionUnstable"):
            hi -= 1
        if lo > hi:
            continue
        if key == PRODUCE and major >= 4:
            lo = 0
        apis[key] = (name, lo, hi)
    return apis


def render(tables):
    releases = [r for r, _ in RELEASES]
    names = {}
    for apis in tables.values():
        for key, (name, _, _) in apis.items():
            names[key] = name
    out = [
        "//! Generated by `python3 scripts/gen-kafka-api-versions.py`; do not edit. The API",
        "//! version ranges and supported features that a broker of each Kafka release advertises in",
        "//! ApiVersions, read from the request schemas in that release's kafka-clients jar (the patch",
        "//! release in `PATCHES`) by the rules in the script's docstring, and checked against real",
        "//! brokers by `compat-tests/kafka/check-release-api-versions.sh`.",
        "//! `sluice.emulate.kafka.version` narrows sluice's own table to one of these columns",
        "//! (`protocol::versions::VersionTable::emulating`). Left unformatted (`#[rustfmt::skip]` on",
        "//! the module) so that each API stays one row of the table.",
        "",
        "/// An advertised range, min to max.",
        "pub type Range = Option<(i16, i16)>;",
        "",
        "const NO: Range = None;",
        "",
        "const fn r(min: i16, max: i16) -> Range {",
        "    Some((min, max))",
        "}",
        "",
        "/// One API: its key, its name in Kafka's schemas, and its range in each release (column).",
        "pub struct ApiRow {",
        "    pub key: i16,",
        "    pub name: &'static str,",
        f"    pub ranges: [Range; {len(releases)}],",
        "}",
        "",
        "/// One feature and the range of levels each release's broker supports.",
        "pub struct FeatureRow {",
        "    pub name: &'static str,",
        f"    pub ranges: [Range; {len(releases)}],",
        "}",
        "",
        f"const fn api(key: i16, name: &'static str, ranges: [Range; {len(releases)}]) -> ApiRow {{",
        "    ApiRow { key, name, ranges }",
        "}",
        "",
        f"const fn feature(name: &'static str, ranges: [Range; {len(releases)}]) -> FeatureRow {{",
        "    FeatureRow { name, ranges }",
        "}",
        "",
        "/// The releases, in column order, as `sluice.emulate.kafka.version` names them.",
        f"pub const RELEASES: [&str; {len(releases)}] = [{', '.join(json.dumps(r) for r in releases)}];",
        "",
        "/// The patch release whose schemas each column was read from.",
        f"pub const PATCHES: [&str; {len(releases)}] = [{', '.join(json.dumps(p) for _, p in RELEASES)}];",
        "",
        "pub const API_ROWS: &[ApiRow] = &[",
    ]
    for key in sorted(names):
        cells = []
        for release in releases:
            entry = tables[release].get(key)
            cells.append("NO" if entry is None else f"r({entry[1]}, {entry[2]})")
        out.append(f"    api({key}, {json.dumps(names[key])}, [{', '.join(cells)}]),")
    out += ["];", "", "pub const FEATURE_ROWS: &[FeatureRow] = &["]
    feature_names = sorted({n for f in FEATURES.values() for n in f})
    for name in feature_names:
        cells = []
        for release in releases:
            lo_hi = FEATURES[release].get(name)
            cells.append("NO" if lo_hi is None else f"r({lo_hi[0]}, {lo_hi[1]})")
        out.append(f"    feature({json.dumps(name)}, [{', '.join(cells)}]),")
    out += ["];", ""]
    return "\n".join(out)


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    parser.add_argument("--out", default=os.path.join(root, "src/protocol/kafka_releases.rs"))
    args = parser.parse_args()
    assert set(FEATURES) == {r for r, _ in RELEASES}
    tables = {}
    with tempfile.TemporaryDirectory() as directory:
        for release, patch in RELEASES:
            print(f"gen-kafka-api-versions.py: kafka-clients {patch}", file=sys.stderr)
            tables[release] = advertised(release, list(request_schemas(fetch_jar(patch, directory))))
    with open(args.out, "w") as f:
        f.write(render(tables))
    print(f"gen-kafka-api-versions.py: wrote {args.out}", file=sys.stderr)


if __name__ == "__main__":
    main()
