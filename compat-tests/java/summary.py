"""Summarise surefire's XML reports: one line per test, the [compat] lines the tests printed
(timings), how the results compare with tests.allow, and a closing 'N passed, N failed' line.
Usage: summary.py REPORT_DIR tests.allow MODE SECONDS"""
import glob
import os
import sys
import xml.etree.ElementTree as ET

reports, allow_file, mode, seconds = sys.argv[1], sys.argv[2], sys.argv[3], int(sys.argv[4])
allow = set()
with open(allow_file) as f:
    for line in f:
        line = line.split("#", 1)[0].strip()
        if line:
            allow.add(line)

results = {}  # "Class#method" -> (status, seconds, message)
details = {}  # "Class#method" -> the failure message's further lines (diagnoses)
for path in sorted(glob.glob(os.path.join(reports, "TEST-*.xml"))):
    for case in ET.parse(path).getroot().iter("testcase"):
        method = case.get("name").split("(")[0] or "(class setup)"
        name = case.get("classname").rsplit(".", 1)[-1] + "#" + method
        status, message = "PASS", ""
        for kind in ("failure", "error", "skipped"):
            node = case.find(kind)
            if node is not None:
                status = "SKIP" if kind == "skipped" else "FAIL"
                lines = (node.get("message") or node.text or node.get("type") or "").strip().splitlines()
                message = lines[0][:300] if lines else kind
                details[name] = lines[1:40]
                break
        results[name] = (status, float(case.get("time") or 0), message)

for name, (status, secs, message) in sorted(results.items()):
    print(f"{status} {name} ({secs:.1f} s){': ' + message if message else ''}")

for path in sorted(glob.glob(os.path.join(reports, "*-output.txt"))):
    with open(path, errors="replace") as f:
        for line in f:
            if line.startswith("[compat]") and ("took" in line or "ProducerPerformance" in line):
                print(line.rstrip())

passed = sorted(n for n, r in results.items() if r[0] == "PASS")
failed = sorted(n for n, r in results.items() if r[0] == "FAIL")
skipped = sorted(n for n, r in results.items() if r[0] == "SKIP")
if mode == "all":
    new = [n for n in passed if n not in allow]
    if new:
        print("passing but not in tests.allow (add them):\n  " + "\n  ".join(new))
    lost = [n for n in failed if n in allow]
    if lost:
        print("REGRESSION: allowlisted tests failing:\n  " + "\n  ".join(lost))
for name in failed:
    if details.get(name):
        print(f"--- {name}, the rest of its failure message:")
        print("\n".join(line[:400] for line in details[name]))
if failed:
    print(f"details of failures: {reports}/<class>.txt and <class>-output.txt")
print(f"run.sh: {len(results)} tests in {seconds} s")
print(f"{len(passed)} passed, {len(failed)} failed, {len(skipped)} skipped")
