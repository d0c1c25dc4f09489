package dev.sluice.compat;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertNull;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.nio.charset.StandardCharsets;
import java.time.Duration;
import java.util.ArrayList;
import java.util.HashMap;
import java.util.HashSet;
import java.util.List;
import java.util.Map;
import java.util.Set;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicBoolean;
import java.util.stream.Collectors;
import org.apache.kafka.clients.admin.Admin;
import org.apache.kafka.clients.consumer.CooperativeStickyAssignor;
import org.apache.kafka.clients.consumer.OffsetAndMetadata;
import org.apache.kafka.clients.consumer.RangeAssignor;
import org.apache.kafka.clients.producer.KafkaProducer;
import org.apache.kafka.clients.producer.ProducerRecord;
import org.apache.kafka.common.TopicPartition;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.extension.RegisterExtension;

/**
 * Consumer groups under membership changes, with the classic protocol (range and cooperative-sticky
 * assignors) and with the KIP-848 consumer protocol (the broker's uniform and range assignors), while a producer keeps writing: three members
 * (one in a child JVM), the child is crashed with SIGKILL so its session must time out, a fourth
 * member joins, one member leaves cleanly. Every produced record must be processed with the value
 * produced at its offset, the committed offsets must reach the end, and after the last rebalance
 * each partition must be owned, and processed, by exactly one member.
 */
class ConsumerGroupTest {
    /**
     * Members of the consumer protocol get the classic members' session timeout and a 1 s
     * heartbeat interval from the broker (Kafka's defaults, 45 s and 5 s, would slow the test).
     */
    @RegisterExtension
    static final BrokerExtension BROKER = new BrokerExtension(Map.of(
            "group.consumer.min.session.timeout.ms", Integer.toString(GroupMember.SESSION_TIMEOUT_MS),
            "group.consumer.session.timeout.ms", Integer.toString(GroupMember.SESSION_TIMEOUT_MS),
            "group.consumer.min.heartbeat.interval.ms", "1000",
            "group.consumer.heartbeat.interval.ms", "1000"));

    static final int PARTITIONS = 6;
    static final Duration SETTLE = Duration.ofSeconds(60);

    @Test
    void membershipChangesWithRangeAssignor() throws Exception {
        membershipChanges("range", RangeAssignor.class.getName());
    }

    @Test
    void membershipChangesWithCooperativeStickyAssignor() throws Exception {
        membershipChanges("coop", CooperativeStickyAssignor.class.getName());
    }

    @Test
    void membershipChangesWithConsumerProtocolUniformAssignor() throws Exception {
        membershipChanges("uniform848", GroupMember.CONSUMER_PROTOCOL + "uniform");
    }

    @Test
    void membershipChangesWithConsumerProtocolRangeAssignor() throws Exception {
        membershipChanges("range848", GroupMember.CONSUMER_PROTOCOL + "range");
    }

    void membershipChanges(String label, String assignor) throws Exception {
        String bootstrap = BROKER.bootstrap();
        String topic = "group-" + label;
        String group = "g-" + label;
        Clients.createTopic(bootstrap, topic, PARTITIONS);
        Ledger ledger = new Ledger();
        List<GroupMember> all = new ArrayList<>();
        AtomicBoolean producing = new AtomicBoolean(true);
        Thread producer = new Thread(() -> produce(bootstrap, topic, ledger, producing), "producer");
        try {
            GroupMember a = GroupMember.inProcess("A", ledger, bootstrap, topic, group, assignor);
            GroupMember b = GroupMember.inProcess("B", ledger, bootstrap, topic, group, assignor);
            GroupMember.Child c = GroupMember.child("C", ledger, bootstrap, topic, group, assignor);
            all.addAll(List.of(a, b, c));
            producer.start();
            long t = System.nanoTime();
            settled(List.of(a, b, c), "three members");
            Log.info("%s: group of 3 stable after %d ms: %s", label, ms(t), all);

            Wait.until(SETTLE, "the child member to process a record",
                    () -> ledger.history.stream().anyMatch(p -> p.member().equals("C")));
            c.crash();
            long killed = System.nanoTime();
            Set<Integer> orphaned = Set.copyOf(c.owned);
            settled(List.of(a, b), "A and B to take over the crashed member's partitions " + orphaned);
            long rebalanceMs = ms(killed) - SETTLE_CHECK.toMillis();
            Log.info("%s: rebalance after the SIGKILLed member took %d ms (session.timeout.ms=%d): %s",
                    label, rebalanceMs, GroupMember.SESSION_TIMEOUT_MS, List.of(a, b));
            assertTrue(rebalanceMs >= GroupMember.SESSION_TIMEOUT_MS - 1500,
                    "the crashed member's partitions moved before its session could time out: " + rebalanceMs + " ms");

            t = System.nanoTime();
            GroupMember d = GroupMember.inProcess("D", ledger, bootstrap, topic, group, assignor);
            all.add(d);
            settled(List.of(a, b, d), "D to join");
            Log.info("%s: rebalance after D joined took %d ms: %s", label, ms(t) - SETTLE_CHECK.toMillis(), List.of(a, b, d));

            t = System.nanoTime();
            b.close();
            settled(List.of(a, d), "A and D after B left cleanly");
            long last = System.nanoTime() - SETTLE_CHECK.toNanos();
            Log.info("%s: rebalance after B left took %d ms: %s", label, ms(t) - SETTLE_CHECK.toMillis(), List.of(a, d));

            producing.set(false);
            producer.join(60_000);
            assertTrue(!producer.isAlive() && !ledger.produced.isEmpty(), "producer did not finish");
            try {
                Wait.until(SETTLE, () -> "every produced record to be processed; missing " + sample(ledger.missing()),
                        () -> ledger.missing().isEmpty());
            } catch (AssertionError e) {
                throw new AssertionError(e.getMessage() + "\n" + diagnose(bootstrap, topic, group, ledger), e);
            }
            assertEquals(List.of(), ledger.wrong(), "records processed with the wrong value");
            for (GroupMember m : all) {
                assertNull(m.error, m.name + " failed");
            }

            // after the last rebalance: A and D own disjoint sets covering everything, and only the
            // owner processed a partition's records
            Map<Integer, Set<String>> processors = ledger.processorsSince(last);
            for (int p = 0; p < PARTITIONS; p++) {
                String owner = a.owned.contains(p) ? "A" : "D";
                Set<String> who = processors.getOrDefault(p, Set.of());
                assertTrue(who.isEmpty() || who.equals(Set.of(owner)),
                        "partition " + p + " is owned by " + owner + " but was processed by " + who + " after the last rebalance");
            }
            assertCommittedAtEnd(bootstrap, topic, group);
            Log.info("%s: %d records produced, all processed (%d redelivered), committed offsets at the end",
                    label, ledger.produced.size(), ledger.redelivered.get());
        } finally {
            producing.set(false);
            for (GroupMember m : all) {
                try {
                    m.close();
                } catch (Exception e) {
                    Log.info("closing %s: %s", m.name, e);
                }
            }
        }
    }

    static final Duration SETTLE_CHECK = Duration.ofSeconds(2);

    /** Waits until the members own disjoint, non-empty sets covering every partition, for 2 s in a row. */
    static void settled(List<GroupMember> members, String what) throws InterruptedException {
        long[] since = {0};
        Wait.until(SETTLE, () -> what + "; ownership now " + members, () -> {
            for (GroupMember m : members) {
                if (m.error != null) {
                    throw new AssertionError(m.name + " failed while waiting for " + what, m.error);
                }
            }
            boolean ok = covers(members);
            if (!ok) {
                since[0] = 0;
                return false;
            }
            if (since[0] == 0) {
                since[0] = System.nanoTime();
            }
            return System.nanoTime() - since[0] >= SETTLE_CHECK.toNanos();
        });
    }

    static boolean covers(List<GroupMember> members) {
        Set<Integer> union = new HashSet<>();
        int total = 0;
        for (GroupMember m : members) {
            Set<Integer> owned = Set.copyOf(m.owned);
            if (owned.isEmpty()) {
                return false;
            }
            union.addAll(owned);
            total += owned.size();
        }
        return total == PARTITIONS && union.size() == PARTITIONS;
    }

    /** Keyed records "seq-N", about 200 a second, until told to stop; remembers where each landed. */
    static void produce(String bootstrap, String topic, Ledger ledger, AtomicBoolean producing) {
        try (KafkaProducer<byte[], byte[]> p = Clients.producer(bootstrap, Map.of())) {
            for (int i = 0; producing.get() && i < 100_000; i++) {
                String value = "seq-" + i;
                p.send(new ProducerRecord<>(topic, ("k" + i).getBytes(), value.getBytes()), (m, e) -> {
                    if (e == null) {
                        ledger.produced(m.partition(), m.offset(), value);
                    } else {
                        ledger.mismatches.add("send of " + value + " failed: " + e);
                    }
                });
                Thread.sleep(5);
            }
            p.flush();
        } catch (Exception e) {
            ledger.mismatches.add("producer failed: " + e);
        }
    }

    static void assertCommittedAtEnd(String bootstrap, String topic, String group) throws Exception {
        try (Admin admin = Clients.admin(bootstrap)) {
            Map<TopicPartition, Long> end = new HashMap<>();
            try (var c = Clients.consumer(bootstrap, Map.of())) {
                end.putAll(c.endOffsets(Clients.partitions(topic, PARTITIONS), Clients.TIMEOUT));
            }
            Map<TopicPartition, Long> committed = new HashMap<>();
            Wait.until(Duration.ofSeconds(30), () -> "committed offsets " + committed + " to reach the end offsets " + end, () -> {
                committed.clear();
                try {
                    Map<TopicPartition, OffsetAndMetadata> o = admin.listConsumerGroupOffsets(group)
                            .partitionsToOffsetAndMetadata().get(20, TimeUnit.SECONDS);
                    o.forEach((tp, om) -> committed.put(tp, om == null ? -1 : om.offset()));
                } catch (Exception e) {
                    throw new RuntimeException(e);
                }
                return committed.equals(end);
            });
        }
    }

    /**
     * For a failure report: whether the log still holds each missing record (read back with a
     * fresh assigned consumer), who processed its neighbours and when, and the committed offsets.
     */
    static String diagnose(String bootstrap, String topic, String group, Ledger ledger) {
        StringBuilder out = new StringBuilder();
        try {
            List<String> missing = ledger.missing().stream().sorted().limit(5).toList();
            Set<Integer> parts = missing.stream().map(m -> Integer.valueOf(m.split("@")[0])).collect(Collectors.toSet());
            var log = Clients.readAll(bootstrap, parts.stream().map(p -> new TopicPartition(topic, p)).toList());
            for (String m : missing) {
                int p = Integer.parseInt(m.split("@")[0]);
                long o = Long.parseLong(m.split("@")[1]);
                out.append(m).append(" produced as ").append(ledger.produced.get(m)).append("; the log holds: ");
                log.get(new TopicPartition(topic, p)).stream().filter(r -> Math.abs(r.offset() - o) <= 2)
                        .forEach(r -> out.append(r.offset()).append('=').append(new String(r.value(), StandardCharsets.UTF_8)).append(' '));
                out.append("; processed nearby: ");
                ledger.history.stream().filter(h -> h.partition() == p && Math.abs(h.offset() - o) <= 3)
                        .forEach(h -> out.append(h.member()).append(':').append(h.offset()).append('@').append(h.nanos() / 1_000_000).append(' '));
                out.append('\n');
            }
            out.append("ownership changes: ").append(ledger.ownership).append('\n');
            for (String m : missing) {
                String p = m.split("@")[0];
                long o = Long.parseLong(m.split("@")[1]);
                java.util.regex.Pattern at = java.util.regex.Pattern.compile("[{,]" + p + "=(\\d+)[,}]");
                String before = "none";
                String after = "none";
                for (String c : ledger.commits) {
                    var hit = at.matcher(c);
                    if (hit.find()) {
                        if (Long.parseLong(hit.group(1)) <= o) {
                            before = c;
                        } else if (after.equals("none")) {
                            after = c;
                        }
                    }
                }
                out.append("partition ").append(p).append(": last commit at or below ").append(o).append(": ").append(before)
                        .append("; first commit above it: ").append(after).append('\n');
            }
            try (Admin admin = Clients.admin(bootstrap)) {
                out.append("committed: ").append(admin.listConsumerGroupOffsets(group)
                        .partitionsToOffsetAndMetadata().get(20, TimeUnit.SECONDS));
            }
        } catch (Exception e) {
            out.append("(diagnosis failed: ").append(e).append(')');
        }
        return out.toString();
    }

    static long ms(long sinceNanos) {
        return (System.nanoTime() - sinceNanos) / 1_000_000;
    }

    static String sample(Set<String> s) {
        return s.size() + " " + s.stream().sorted().limit(10).collect(Collectors.toList());
    }
}
