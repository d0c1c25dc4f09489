#!/usr/bin/env python3
"""Turns benches/results.json (written by bench.py) into RESULTS.md and a PNG plot.

  report.py results.json RESULTS.md results.png

The plot needs matplotlib (run.sh installs it into target/bench/venv); without it only the
Markdown is written.
"""

import json
import os
import statistics
import sys

CONFIG_ROWS = [(1, "none"), (1, "lz4"), (8, "none"), (8, "lz4")]
GEN = {"java": "Java", "rdk": "librdkafka", "c": "librdkafka's C rdkafka_performance"}


def rows():
    """(section, key, label, unit, better, limit) for every line of the table."""
    out = []
    for kind, what in (("produce", "produce"), ("consume", "consume")):
        for p, c in CONFIG_ROWS:
            for g in ("java", "rdk", "c") if c == "none" else ("java", "rdk"):
                out.append(("Throughput (MB/s of record values, 1 KiB records, acks=all)",
                            f"{kind}_{g}_p{p}_{c}_mb_s",
                            f"{what} {p} partition{'s' if p > 1 else ''}, {c}, {GEN[g]}",
                            "MB/s", "higher", "loopback_mb_s"))
    for g in ("java", "rdk"):
        out.append(("Throughput (MB/s of record values, 1 KiB records, acks=all)",
                    f"flush_{g}_p1_none_mb_s",
                    f"produce with log.flush.interval.messages=1, 1 partition, {GEN[g]}",
                    "MB/s", "higher", "dd_fdatasync_mb_s"))
    for k, label in ((100, "100 records"), (10000, "10,000 records")):
        out.append(("Throughput (MB/s of record values, 1 KiB records, acks=all)",
                    f"txn_rdk_per{k}_p1_mb_s",
                    f"transactional produce, commit every {label}, 1 partition, librdkafka",
                    "MB/s", "higher", "loopback_mb_s"))
    for g in ("rdk", "java"):
        out.append(("Throughput (MB/s of record values, 1 KiB records, acks=all)",
                    f"txn_consume_{g}_p1_mb_s",
                    f"read_committed consume of 100-record transactions, 1 partition, {GEN[g]}",
                    "MB/s", "higher", "loopback_mb_s"))
    for pre, label in (("lat_java_produce", "produce (send → ack), Java ProducerPerformance"),
                       ("lat_rdk_produce", "produce (send → ack), librdkafka"),
                       ("lat_rdk_e2e", "end to end (send → consumed), librdkafka")):
        for q in ("50", "99", "99.9"):
            out.append(("Latency (ms) at a fixed rate, 1 partition, acks=all",
                        f"{pre}_p{q}_ms", f"{label} p{q}", "ms", "lower", None))
    for pre, label in (("lat0_java_produce", "produce (send → ack), Java, linger.ms=0"),
                       ("lat0_rdk_produce", "produce (send → ack), librdkafka, linger.ms=0"),
                       ("lat0_rdk_e2e", "end to end (send → consumed), librdkafka, linger.ms=0")):
        for q in ("50", "99", "99.9"):
            out.append(("Latency (ms) at a fixed rate, 1 partition, acks=all",
                        f"{pre}_p{q}_ms", f"{label} p{q}", "ms", "lower", None))
    for q in ("avg", "50", "99", "99.9"):
        out.append(("Latency (ms) at a fixed rate, 1 partition, acks=all",
                    f"lat_java_e2e_{q}_ms",
                    f"end to end, Kafka EndToEndLatency (one at a time) "
                    f"{'average' if q == 'avg' else 'p' + q}", "ms", "lower", None))
    sec = "Start, recovery, resources"
    out += [
        (sec, "cold_start_port_s", "cold start: process start → port accepts", "s", "lower", None),
        (sec, "cold_start_first_ack_s", "cold start: process start → first acknowledged produce",
         "s", "lower", None),
        (sec, "recovery_port_s", "restart after kill -9: start → port accepts", "s", "lower", None),
        (sec, "recovery_first_ack_s", "restart after kill -9: start → first acknowledged produce",
         "s", "lower", None),
        (sec, "recovery_records_kept", "records readable after the kill -9 restart", "records",
         "higher", None),
        (sec, "rss_idle_mib", "broker resident memory, idle after start (VmRSS)", "MiB", "lower",
         None),
        (sec, "rss_peak_mib", "broker resident memory, peak over a repetition (VmHWM)", "MiB",
         "lower", None),
        (sec, "cpu_s_per_gb_produce", "broker CPU seconds per GB produced", "s/GB", "lower",
         None),
        (sec, "cpu_s_per_gb_consume", "broker CPU seconds per GB consumed", "s/GB", "lower",
         None),
    ]
    return out


def med(v):
    v = [x for x in (v or []) if x is not None]
    return statistics.median(v) if v else None


def fmt(x, unit=""):
    if x is None:
        return "—"
    if unit == "records":
        return f"{x:,.0f}"
    a = abs(x)
    if a >= 1000:
        return f"{x:,.0f}"
    if a >= 100:
        return f"{x:.0f}"
    if a >= 10:
        return f"{x:.1f}"
    if a >= 1:
        return f"{x:.2f}"
    return f"{x:.3f}"


def cell(v, unit):
    v = [x for x in (v or []) if x is not None]
    if not v:
        return "—"
    m = fmt(statistics.median(v), unit)
    if len(v) > 1:
        return f"{m} <sub>{fmt(min(v), unit)}–{fmt(max(v), unit)}</sub>"
    return m


def fmt_ratio(r):
    if r is None:
        return "—"
    return f"{r:.2f}" if r >= 0.01 else f"{r:.4f}"


def verdict(ratio, better):
    if ratio is None:
        return ""
    if ratio == 0:
        return f"sluice {'lower' if better == 'lower' else 'zero'}"
    if 0.95 <= ratio <= 1.05:
        return "about equal"
    def x(f):
        return f"{f:.0f}×" if f >= 10 else f"{f:.1f}×"
    if better == "higher":
        return (f"sluice {x(ratio)} higher" if ratio > 1 else f"Kafka {x(1 / ratio)} higher")
    return (f"sluice {x(1 / ratio)} lower" if ratio < 1 else f"Kafka {x(ratio)} lower")


def machine_md(meta, limits):
    m = meta["machine"]
    lines = [
        f"- **Date**: {meta['date']}; **commit**: `{meta['commit']}` (HEAD when the run started); "
        f"**mode**: {meta['mode']} ({meta['cfg']['reps']} repetition"
        f"{'s' if meta['cfg']['reps'] > 1 else ''}); run took "
        f"{meta.get('duration_s', 0) / 60:.1f} min.",
        f"- **Machine**: {m.get('nproc')} CPUs ({m.get('cpu', '?')}), {m.get('mem_gib', '?')} GiB "
        f"RAM, Linux {m.get('kernel', '?')}; load average at start "
        f"{' / '.join(m.get('loadavg_at_start', ['?']))} (the machine is shared).",
        f"- **Disk** (where the brokers write): `{m.get('disk', '?')}`.",
        f"- **JVM** for Kafka and its tools: {m.get('java', '?')}; Kafka's default heap "
        f"(`-Xmx1g -Xms1g`).",
        f"- **Command**: `{meta['command']}`",
    ]
    lim = [
        ("sequential write, 1 MiB blocks, one fdatasync at the end (dd)",
         limits.get("dd_fdatasync_mb_s"), "MB/s"),
        ("4 KiB writes each synced (dd oflag=dsync)", limits.get("dsync_4k_writes_s"),
         "writes/s"),
        (f"loopback TCP, one stream ({limits.get('loopback_tool', '?')})",
         limits.get("loopback_mb_s"), "MB/s"),
    ]
    lines += ["", "Machine limits, measured in the same run:", "",
              "| limit | value |", "|---|---:|"]
    lines += [f"| {a} | {fmt(v)} {u} |" for a, v, u in lim]
    return "\n".join(lines)


def table_md(data):
    limits = data["limits"]
    k, s = data["kafka"], data["sluice"]
    out = []
    section = None
    for sec, key, label, unit, better, limit in rows():
        if key not in k and key not in s:
            continue
        if sec != section:
            section = sec
            has_limit = sec.startswith("Throughput")
            out += ["", f"### {sec}", ""]
            if has_limit:
                out += ["| scenario | Kafka | sluice | sluice / Kafka | | Kafka % of limit | "
                        "sluice % of limit |", "|---|---:|---:|---:|---|---:|---:|"]
            else:
                out += ["| scenario | Kafka | sluice | sluice / Kafka | |",
                        "|---|---:|---:|---:|---|"]
        mk, ms = med(k.get(key)), med(s.get(key))
        ratio = ms / mk if mk not in (None, 0) and ms is not None else None
        row = [label, cell(k.get(key), unit), cell(s.get(key), unit),
               fmt_ratio(ratio), verdict(ratio, better)]
        if sec.startswith("Throughput"):
            lv = limits.get(limit)
            row += [f"{100 * mk / lv:.1f} %" if lv and mk is not None else "—",
                    f"{100 * ms / lv:.1f} %" if lv and ms is not None else "—"]
        out.append("| " + " | ".join(row) + " |")
    return "\n".join(out)


def rates_note(data):
    """The fixed rate each latency generator actually reached (it must be the target)."""
    target = data["meta"]["cfg"]["lat_rate"]
    parts = []
    for b in ("kafka", "sluice"):
        j = med(data[b].get("lat_java_rate_achieved"))
        r = med(data[b].get("lat_rdk_rate_achieved"))
        parts.append(f"{'Kafka' if b == 'kafka' else 'sluice'}: Java {fmt(j)}, librdkafka "
                     f"{fmt(r)}")
    return (f"Rates reached in the latency runs (target {target:,} records/s; a shortfall "
            f"means the generator or broker was saturated): " + "; ".join(parts) + ".")


def plot(data, path):
    try:
        import matplotlib
        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        return False
    k, s = data["kafka"], data["sluice"]
    thr = [(key, label) for sec, key, label, *_ in rows() if sec.startswith("Throughput")
           and (key in k or key in s)]
    lat = [(key, label) for sec, key, label, *_ in rows() if sec.startswith("Latency")
           and (key in k or key in s) and "_avg_" not in key]
    fig, (a1, a2) = plt.subplots(1, 2, figsize=(16, 9), gridspec_kw={"width_ratios": [1, 1]})

    def bars(ax, items, xlabel, title):
        import numpy as np
        y = np.arange(len(items))
        h = 0.38
        for off, (name, d, color) in enumerate((("Kafka 4.4.0", k, "#4c72b0"),
                                                ("sluice", s, "#dd8452"))):
            vals = [med(d.get(key)) or 0 for key, _ in items]
            lo = [v - min(d.get(key) or [v]) for (key, _), v in zip(items, vals)]
            hi = [max(d.get(key) or [v]) - v for (key, _), v in zip(items, vals)]
            ax.barh(y + (off - 0.5) * h, vals, h, xerr=[lo, hi], label=name, color=color,
                    error_kw={"elinewidth": 0.8, "capsize": 2})
        ax.set_yticks(y)
        ax.set_yticklabels([lbl.replace(", Java ProducerPerformance", " (Java)")
                            .replace("log.flush.interval.messages=1", "flush=1")
                            for _, lbl in items], fontsize=8)
        ax.invert_yaxis()
        ax.set_xscale("log")
        ax.set_xlabel(xlabel)
        ax.set_title(title)
        ax.grid(axis="x", which="both", alpha=0.3)
        ax.legend(loc="upper right", fontsize=8, framealpha=0.9)

    bars(a1, thr, "MB/s (log scale; bars: median, whiskers: min–max)", "Throughput")
    bars(a2, lat, "ms (log scale; bars: median, whiskers: min–max)",
         "Latency percentiles at a fixed rate")
    meta = data["meta"]
    fig.suptitle(f"sluice vs Apache Kafka 4.4.0 — {meta['mode']} run, {meta['date']}, "
                 f"commit {meta['commit'][:10]}", fontsize=11)
    fig.tight_layout()
    fig.savefig(path, dpi=90)
    return True


def main():
    src, md_path, png_path = sys.argv[1:4]
    with open(src) as f:
        data = json.load(f)
    meta = data["meta"]
    cfg = meta["cfg"]
    has_plot = plot(data, png_path)
    errors = data.get("errors", [])
    parts = [
        "# Benchmark results: sluice vs Apache Kafka 4.4.0",
        "",
        "Generated by `benches/run.sh` (see [README.md](README.md) for the scenarios and how to "
        "read this). Each figure is the **median** over the repetitions, with min–max below it; "
        "**sluice / Kafka** is the ratio of the two medians. The brokers ran one at a time, "
        "alternating Kafka/sluice (ABBA order) on the same machine in the same run, so compare "
        "the ratios, not the absolute figures: the machine is shared and its load varies.",
        "",
        machine_md(meta, data["limits"]),
        "",
        f"Sizes in this run: {cfg['prod']:,} records per generator per throughput run "
        f"(so each topic holds {2 * cfg['prod']:,} records for the consume runs), "
        f"latency at {cfg['lat_rate']:,} records/s for {cfg['lat_secs']} s, EndToEndLatency "
        f"with {cfg['e2e_msgs']:,} records, {cfg['cold']} cold starts per broker, "
        f"{cfg['flush']:,} records per flush-on-every-message run, and "
        f"{cfg['rec_bytes'] >> 20} MiB written before each kill -9.",
        "",
        "## Results",
        table_md(data),
        "",
        rates_note(data),
        "",
    ]
    if has_plot:
        parts += [f"![throughput and latency]({os.path.basename(png_path)})", ""]
    if errors:
        parts += ["## Errors during the run", ""] + [f"- {e}" for e in errors] + [""]
    parts += [rebalance_section(), tls_section(md_path)]
    with open(md_path, "w") as f:
        f.write("\n".join(parts))


def rebalance_section():
    """Rebalance times from benches/rebalance-results.json (written by rebalance.py)."""
    path = os.path.join(os.path.dirname(os.path.abspath(__file__)), "rebalance-results.json")
    try:
        with open(path) as f:
            doc = json.load(f)
    except (OSError, ValueError):
        return ""
    rows = doc["results"] if isinstance(doc, dict) else doc
    meta = doc.get("meta", {}) if isinstance(doc, dict) else {}
    out = ["## Rebalance time (s), one member leaving or joining a group", ""]
    if meta:
        out += [
            f"Written by `compat-tests/.venv/bin/python benches/rebalance.py` (see its docstring): "
            f"{meta['date']}, commit `{meta['commit'][:12]}`, {meta['reps']} repetitions, "
            f"{meta['members']} members on {meta['partitions']} partitions, brokers one at a time "
            f"in alternating order, load average at the end {meta['load_at_end']:.1f}. The time runs "
            "from the action to the moment every member owns partitions and every partition has "
            "one owner. Classic: librdkafka's `range` assignor and defaults; consumer: KIP-848, "
            "the broker's `uniform` assignor, heartbeat interval 5 s (both brokers' default).",
            "",
        ]
    out += ["| protocol, event | Kafka | sluice | sluice / Kafka |", "|---|---:|---:|---:|"]
    for protocol in ("classic", "consumer"):
        for what, label in (("leave_s", "a member leaves"), ("join_s", "a member joins")):
            med = {}
            for broker in ("kafka", "sluice"):
                vals = [r[what] for r in rows if r["broker"] == broker and r["protocol"] == protocol]
                med[broker] = statistics.median(vals) if vals else None
            if med["kafka"] is None or med["sluice"] is None:
                continue
            out.append(f"| {protocol}, {label} | {med['kafka']:.2f} | {med['sluice']:.2f} | "
                       f"{med['sluice'] / med['kafka']:.2f} |")
    return "\n".join(out) + "\n"


def tls_section(md_path):
    """The TLS section benches/tls.py wrote into RESULTS.md, kept as it is."""
    try:
        with open(md_path) as f:
            md = f.read()
    except OSError:
        return ""
    begin, end = "<!-- tls: written by benches/tls.py -->", "<!-- /tls -->"
    if begin not in md or end not in md:
        return ""
    return begin + md.split(begin, 1)[1].split(end, 1)[0] + end + "\n"


if __name__ == "__main__":
    main()
