"""Run Apache Kafka's own tools (jars cached by setup.sh) and parse DumpLogSegments output."""
import re
import subprocess
from pathlib import Path

RUN_CLASS = Path(__file__).resolve().parent.parent / "kafka" / "run-class.sh"
DUMP_LOG_SEGMENTS = "org.apache.kafka.tools.DumpLogSegments"  # Java, in kafka-tools since 4.2
CONSUMER_GROUP_COMMAND = "org.apache.kafka.tools.consumer.group.ConsumerGroupCommand"

# Text DumpLogSegments prints when something is wrong (see its source: mismatches, gaps,
# timestamps out of order, trailing invalid bytes, sanity-check exceptions).
PROBLEM_WORDS = ["mismatch", "non-consecutive", "not found in the log", "out of order",
                 "invalid bytes", "exception", "corrupt", "isvalid: false", "error"]

BATCH_RE = re.compile(r"^baseOffset: (\d+) lastOffset: (\d+) count: (\d+) .* position: (\d+) "
                      r"CreateTime: (-?\d+) size: (\d+) magic: (\d+) compresscodec: (\w+) "
                      r"crc: (\d+) isvalid: (\w+)$")
RECORD_RE = re.compile(r"^\| offset: (\d+) CreateTime: (-?\d+) keySize: (-?\d+) valueSize: (-?\d+) "
                       r"sequence: (-?\d+) headerKeys: \[([^\]]*)\](?: key: (\S*))?(?: payload: (.*))?$")


def run_class(main_class, *args, timeout_s=180):
    return subprocess.run([str(RUN_CLASS), main_class, *map(str, args)], capture_output=True,
                          text=True, timeout=timeout_s)


NON_CONSECUTIVE_RE = re.compile(r"^Non-consecutive offsets in (\S+)\n((?:  -?\d+ is followed by -?\d+\n)*)",
                                re.M)
PAIR_RE = re.compile(r"^  (-?\d+) is followed by (-?\d+)$", re.M)


def without_first_record_pairs(text):
    """Kafka 4.4's DumpLogSegments (Java since 4.2) starts each file's offset check at -1 with no
    first-record guard, so it reports "-1 is followed by <first offset>" for every segment that
    does not start at offset 0 (Kafka's own segments too; 4.1's Scala tool skipped the first
    record). Drops those pairs, and a file's heading when no other pair is left; any other pair
    is a real gap and stays."""
    def keep(m):
        pairs = [f"  {a} is followed by {b}\n" for a, b in PAIR_RE.findall(m.group(2)) if a != "-1"]
        return f"Non-consecutive offsets in {m.group(1)}\n{''.join(pairs)}" if pairs else ""
    return NON_CONSECUTIVE_RE.sub(keep, text)


def dump_log_segments(files, *flags):
    """Run DumpLogSegments on files; assert exit 0 and no problem text; return stdout."""
    res = run_class(DUMP_LOG_SEGMENTS, *flags, "--files", ",".join(str(f) for f in files))
    text = res.stdout + without_first_record_pairs(res.stderr)
    assert res.returncode == 0, f"DumpLogSegments {flags} exited {res.returncode}:\n{text[-4000:]}"
    lowered = text.lower()
    found = [w for w in PROBLEM_WORDS if w in lowered]
    assert not found, f"DumpLogSegments {flags} reported {found}:\n" + "\n".join(
        line for line in text.splitlines()
        if any(w in line.lower() for w in found) or PAIR_RE.match(line))[:4000]
    return res.stdout


def parse_data_dump(stdout):
    """{file path: {"start": int, "batches": [dict], "records": [dict]}} from --print-data-log."""
    files, cur = {}, None
    for line in stdout.splitlines():
        if line.startswith("Dumping "):
            cur = files.setdefault(line[len("Dumping "):], {"start": None, "batches": [], "records": []})
        elif line.startswith("Log starting offset: "):
            cur["start"] = int(line.split(": ")[1])
        elif (m := BATCH_RE.match(line)):
            cur["batches"].append(dict(base=int(m[1]), last=int(m[2]), count=int(m[3]),
                                       position=int(m[4]), size=int(m[6]), magic=int(m[7]),
                                       codec=m[8], valid=m[10] == "true"))
        elif (m := RECORD_RE.match(line)):
            cur["records"].append(dict(offset=int(m[1]), timestamp=int(m[2]),
                                       header_keys=m[6].split(",") if m[6] else [],
                                       key=m[7], value=m[8]))
        elif line.strip():
            raise AssertionError(f"unexpected DumpLogSegments line: {line[:300]}")
    return files


def parse_index_dump(stdout):
    """{file path: [(a, b)]}: .index lines 'offset: O position: P' -> (O, P); .timeindex lines
    'timestamp: T offset: O' -> (T, O)."""
    files, cur = {}, None
    for line in stdout.splitlines():
        if line.startswith("Dumping "):
            cur = files.setdefault(line[len("Dumping "):], [])
        elif (m := re.match(r"^(?:offset|timestamp): (-?\d+) (?:position|offset): (-?\d+)$", line)):
            cur.append((int(m[1]), int(m[2])))
        elif line.endswith(" is empty."):
            continue
        elif line.strip():
            raise AssertionError(f"unexpected index dump line: {line[:300]}")
    return files


def consumer_groups(bootstrap, *args, stderr=False):
    """Run the tool; -> its stdout (and its stderr, where it prints notes, if asked)."""
    res = run_class(CONSUMER_GROUP_COMMAND, "--bootstrap-server", bootstrap, *args, timeout_s=120)
    text = res.stdout + res.stderr
    assert res.returncode == 0, f"kafka-consumer-groups {' '.join(args)} exited " \
        f"{res.returncode}:\n{text[-3000:]}"
    return (res.stdout, res.stderr) if stderr else res.stdout


def table(stdout, first_column="GROUP"):
    """Rows of the tool's whitespace-aligned table, as dicts keyed by the header words."""
    lines = [line for line in stdout.splitlines() if line.strip()]
    head = next(i for i, line in enumerate(lines) if line.split()[0] == first_column)
    names = lines[head].split()
    return [dict(zip(names, line.split())) for line in lines[head + 1:]]
