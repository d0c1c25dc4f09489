package dev.sluice.compat;

import java.util.ArrayList;
import java.util.HashMap;
import java.util.HashSet;
import java.util.List;
import java.util.Map;
import java.util.Set;
import java.util.concurrent.ConcurrentHashMap;
import java.util.concurrent.ConcurrentLinkedQueue;
import java.util.concurrent.atomic.AtomicInteger;

/** What was produced and what the group members processed, keyed by "partition@offset". */
final class Ledger {
    record Processing(String member, int partition, long offset, long nanos) {
    }

    final Map<String, String> produced = new ConcurrentHashMap<>();
    final Map<String, String> processed = new ConcurrentHashMap<>();
    final ConcurrentLinkedQueue<Processing> history = new ConcurrentLinkedQueue<>();
    final ConcurrentLinkedQueue<String> mismatches = new ConcurrentLinkedQueue<>();
    final AtomicInteger redelivered = new AtomicInteger();
    /** "member {partition=position, ...} @ms" for every commitSync() that succeeded. */
    final ConcurrentLinkedQueue<String> commits = new ConcurrentLinkedQueue<>();
    /** "member+partitions@ms" and "member-partitions@ms", in the order the listeners reported them. */
    final ConcurrentLinkedQueue<String> ownership = new ConcurrentLinkedQueue<>();

    static String at(int partition, long offset) {
        return partition + "@" + offset;
    }

    void produced(int partition, long offset, String value) {
        produced.put(at(partition, offset), value);
    }

    void processed(String member, int partition, long offset, String value) {
        history.add(new Processing(member, partition, offset, System.nanoTime()));
        String before = processed.putIfAbsent(at(partition, offset), value);
        if (before != null) {
            redelivered.incrementAndGet();
            if (!before.equals(value)) {
                mismatches.add(at(partition, offset) + " read as " + before + " and later as " + value);
            }
        }
    }

    void committed(String member, Map<Integer, Long> positions) {
        commits.add(member + " " + positions.toString().replace(" ", "") + " @" + System.nanoTime() / 1_000_000);
    }

    /** Produced records that no member has processed yet. */
    Set<String> missing() {
        Set<String> m = new HashSet<>(produced.keySet());
        m.removeAll(processed.keySet());
        return m;
    }

    /** Records processed with a value other than the one produced there, or never produced. */
    List<String> wrong() {
        List<String> w = new ArrayList<>(mismatches);
        processed.forEach((k, v) -> {
            String want = produced.get(k);
            if (!v.equals(want)) {
                w.add(k + " read as " + v + " but produced " + want);
            }
        });
        return w;
    }

    /** For each partition, the members that processed its records after the given time. */
    Map<Integer, Set<String>> processorsSince(long nanos) {
        Map<Integer, Set<String>> m = new HashMap<>();
        for (Processing p : history) {
            if (p.nanos() > nanos) {
                m.computeIfAbsent(p.partition(), k -> new HashSet<>()).add(p.member());
            }
        }
        return m;
    }
}
