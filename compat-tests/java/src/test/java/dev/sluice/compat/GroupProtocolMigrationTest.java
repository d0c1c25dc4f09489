package dev.sluice.compat;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertNull;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.time.Duration;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.HashMap;
import java.util.List;
import java.util.Map;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicBoolean;
import org.apache.kafka.clients.admin.Admin;
import org.apache.kafka.clients.admin.ConsumerGroupDescription;
import org.apache.kafka.clients.consumer.CooperativeStickyAssignor;
import org.apache.kafka.common.GroupType;
import org.junit.jupiter.api.Tag;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.extension.RegisterExtension;

/**
 * A live group moved between the two group protocols by restarting its Java members one at a
 * time with the other {@code group.protocol}, while a producer writes (Kafka's online migration,
 * {@code group.consumer.migration.policy=bidirectional}): two classic members (cooperative-sticky);
 * one comes back with the consumer protocol, which upgrades the group to a consumer group with a
 * classic member inside; the other follows. Then back: one member returns to the classic protocol,
 * and when the last consumer-protocol member leaves, the group is a classic group again. At each
 * stage AdminClient's describe reports the group's type and members, and for a classic group, a
 * consumer group and a consumer group with a classic member inside, {@code kafka-consumer-groups
 * --describe} (offsets, --state, --members --verbose) shows the group as it is. Every record is processed with its value and
 * the commits reach the end offsets. Tagged "tools": the 3.9 client runs no CLI tools.
 */
@Tag("tools")
class GroupProtocolMigrationTest {
    @RegisterExtension
    static final BrokerExtension BROKER = new BrokerExtension(Map.of(
            "group.consumer.min.session.timeout.ms", Integer.toString(GroupMember.SESSION_TIMEOUT_MS),
            "group.consumer.session.timeout.ms", Integer.toString(GroupMember.SESSION_TIMEOUT_MS),
            "group.consumer.min.heartbeat.interval.ms", "1000",
            "group.consumer.heartbeat.interval.ms", "1000",
            "group.initial.rebalance.delay.ms", "300"));

    static final String GROUPS = "org.apache.kafka.tools.consumer.group.ConsumerGroupCommand";
    static final String CLASSIC = CooperativeStickyAssignor.class.getName();
    static final String CONSUMER = GroupMember.CONSUMER_PROTOCOL + "uniform";

    @Test
    void aLiveGroupIsUpgradedToTheConsumerProtocolAndDowngradedBack() throws Exception {
        String bootstrap = BROKER.bootstrap();
        String topic = "migrate";
        String group = "g-migrate";
        Clients.createTopic(bootstrap, topic, ConsumerGroupTest.PARTITIONS);
        Ledger ledger = new Ledger();
        List<GroupMember> all = new ArrayList<>();
        AtomicBoolean producing = new AtomicBoolean(true);
        Thread producer = new Thread(() -> ConsumerGroupTest.produce(bootstrap, topic, ledger, producing), "producer");
        try {
            GroupMember a = member("A", ledger, group, CLASSIC, all);
            GroupMember b = member("B", ledger, group, CLASSIC, all);
            producer.start();
            stage(List.of(a, b), group, topic, GroupType.CLASSIC, "cooperative-sticky", "two classic members", true);

            a.close();
            GroupMember a2 = member("A2", ledger, group, CONSUMER, all);
            stage(List.of(a2, b), group, topic, GroupType.CONSUMER, "uniform", "upgraded: A2 (consumer) and B (classic)", false);
            b.close();
            GroupMember b2 = member("B2", ledger, group, CONSUMER, all);
            stage(List.of(a2, b2), group, topic, GroupType.CONSUMER, "uniform", "two consumer-protocol members", true);

            a2.close();
            GroupMember a3 = member("A3", ledger, group, CLASSIC, all);
            stage(List.of(a3, b2), group, topic, GroupType.CONSUMER, "uniform", "A3 (classic) inside the consumer group", true);
            b2.close();
            GroupMember b3 = member("B3", ledger, group, CLASSIC, all);
            stage(List.of(a3, b3), group, topic, GroupType.CLASSIC, "cooperative-sticky", "downgraded: two classic members", false);

            producing.set(false);
            producer.join(60_000);
            assertTrue(!producer.isAlive() && !ledger.produced.isEmpty(), "producer did not finish");
            Wait.until(ConsumerGroupTest.SETTLE, () -> "every produced record to be processed; missing "
                    + ConsumerGroupTest.sample(ledger.missing()), () -> ledger.missing().isEmpty());
            assertEquals(List.of(), ledger.wrong(), "records processed with the wrong value");
            for (GroupMember m : all) {
                assertNull(m.error, m.name + " failed");
            }
            ConsumerGroupTest.assertCommittedAtEnd(bootstrap, topic, group);
            Log.info("migration: %d records produced, all processed (%d redelivered)", ledger.produced.size(), ledger.redelivered.get());
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

    static GroupMember member(String name, Ledger ledger, String group, String assignor, List<GroupMember> all) {
        GroupMember m = GroupMember.inProcess(name, ledger, BROKER.bootstrap(), "migrate", group, assignor);
        all.add(m);
        return m;
    }

    /**
     * Waits for the members to own every partition between them, then checks what the
     * AdminClient says about the group and, with {@code tools}, what kafka-consumer-groups says.
     */
    static void stage(List<GroupMember> members, String group, String topic, GroupType type, String strategy, String what,
                      boolean tools) throws Exception {
        long t = System.nanoTime();
        ConsumerGroupTest.settled(members, what);
        Log.info("migration: %s settled after %d ms: %s", what, ConsumerGroupTest.ms(t), members);
        try (Admin admin = Clients.admin(BROKER.bootstrap())) {
            ConsumerGroupDescription d = admin.describeConsumerGroups(List.of(group)).all()
                    .get(30, TimeUnit.SECONDS).get(group);
            assertEquals(type, d.type(), what + ": " + d);
            assertEquals(members.size(), d.members().size(), what + ": " + d);
        }
        if (!tools) {
            return;
        }
        // GROUP TOPIC PARTITION CURRENT-OFFSET LOG-END-OFFSET LAG CONSUMER-ID HOST CLIENT-ID
        List<Map<String, String>> offsets = table(tool("--describe", "--group", group));
        List<Map<String, String>> rows = offsets.stream().filter(r -> topic.equals(r.get("TOPIC"))).toList();
        assertEquals(ConsumerGroupTest.PARTITIONS, rows.size(), what + ": " + offsets);
        for (Map<String, String> r : rows) {
            assertEquals(group, r.get("GROUP"), r.toString());
            assertTrue(!r.get("CONSUMER-ID").equals("-") && !r.get("CLIENT-ID").equals("-"), what + ": unowned " + r);
        }
        // GROUP COORDINATOR (ID) ASSIGNMENT-STRATEGY STATE #MEMBERS
        String state = tool("--describe", "--group", group, "--state");
        List<String> words = Arrays.asList(state.strip().lines().reduce((x, y) -> y).orElse("").trim().split("\\s+"));
        assertEquals(List.of(strategy, "Stable", Integer.toString(members.size())),
                words.subList(Math.max(0, words.size() - 3), words.size()), what + ":\n" + state);
        List<Map<String, String>> described = table(tool("--describe", "--group", group, "--members", "--verbose"));
        assertEquals(members.size(), described.size(), what + ": " + described);
        int partitions = described.stream().mapToInt(r -> Integer.parseInt(r.get("#PARTITIONS"))).sum();
        assertEquals(ConsumerGroupTest.PARTITIONS, partitions, what + ": " + described);
    }

    static String tool(String... args) throws Exception {
        List<String> all = new ArrayList<>(List.of("--bootstrap-server", BROKER.bootstrap()));
        all.addAll(Arrays.asList(args));
        JavaProcess.Result r = JavaProcess.run(Duration.ofSeconds(90), null, GROUPS, all.toArray(String[]::new));
        assertEquals(0, r.exit(), "kafka-consumer-groups failed: " + r);
        return r.out();
    }

    /** The rows of the tool's whitespace-aligned table, by the header line's column names. */
    static List<Map<String, String>> table(String out) {
        List<Map<String, String>> rows = new ArrayList<>();
        List<String> header = null;
        for (String line : out.lines().toList()) {
            if (line.isBlank()) {
                continue;
            }
            String[] cells = line.trim().split("\\s+");
            if (cells[0].equals("GROUP")) {
                header = Arrays.asList(cells);
            } else if (header != null && cells.length == header.size()) {
                Map<String, String> row = new HashMap<>();
                for (int i = 0; i < cells.length; i++) {
                    row.put(header.get(i), cells[i]);
                }
                rows.add(row);
            }
        }
        return rows;
    }
}
