package dev.sluice.compat;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.time.Duration;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.List;
import java.util.Map;
import java.util.Set;
import java.util.regex.Matcher;
import java.util.regex.Pattern;
import java.util.stream.Collectors;
import java.util.stream.IntStream;
import org.apache.kafka.clients.consumer.ConsumerRecord;
import org.apache.kafka.clients.consumer.KafkaConsumer;
import org.apache.kafka.clients.consumer.RangeAssignor;
import org.junit.jupiter.api.Tag;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.extension.RegisterExtension;

/**
 * Kafka's own command-line tools, run as their main classes in child JVMs (as the .sh scripts do).
 * Tagged "tools": the run on an older client (run.sh --client 3.9) has no tools on its class path.
 */
@Tag("tools")
class CliToolsTest {
    @RegisterExtension
    static final BrokerExtension BROKER = new BrokerExtension();

    static final Duration TOOL_TIMEOUT = Duration.ofSeconds(90);
    static final String TOPICS = "org.apache.kafka.tools.TopicCommand";
    static final String CONSOLE_PRODUCER = "org.apache.kafka.tools.ConsoleProducer";
    static final String CONSOLE_CONSUMER = "org.apache.kafka.tools.consumer.ConsoleConsumer";
    static final String PERF = "org.apache.kafka.tools.ProducerPerformance";
    static final String GET_OFFSETS = "org.apache.kafka.tools.GetOffsetShell";
    static final String GROUPS = "org.apache.kafka.tools.consumer.group.ConsumerGroupCommand";
    static final String CONFIGS = "org.apache.kafka.tools.ConfigCommand";

    static JavaProcess.Result tool(String stdin, String mainClass, String... args) throws Exception {
        List<String> all = new ArrayList<>(List.of("--bootstrap-server", BROKER.bootstrap()));
        all.addAll(Arrays.asList(args));
        return JavaProcess.run(TOOL_TIMEOUT, stdin, mainClass, all.toArray(String[]::new));
    }

    /** Runs a tool that must exit 0, and returns its stdout. */
    static String ok(String mainClass, String... args) throws Exception {
        JavaProcess.Result r = tool(null, mainClass, args);
        assertEquals(0, r.exit(), "tool failed: " + r);
        return r.out();
    }

    static Set<String> lines(String out) {
        return out.lines().map(String::strip).filter(l -> !l.isEmpty()).collect(Collectors.toSet());
    }

    @Test
    void kafkaTopicsCreateListDescribeDelete() throws Exception {
        String out = ok(TOPICS, "--create", "--topic", "cli-topic", "--partitions", "3", "--replication-factor", "1",
                "--config", "retention.ms=7200000");
        assertTrue(out.contains("Created topic cli-topic."), out);
        try (var admin = Clients.admin(BROKER.bootstrap())) {
            Clients.awaitLeaders(admin, "cli-topic", 3); // Kafka's broker learns of it a moment later
        }
        assertTrue(lines(ok(TOPICS, "--list")).contains("cli-topic"));

        String d = ok(TOPICS, "--describe", "--topic", "cli-topic");
        assertTrue(d.matches("(?s).*Topic: cli-topic\\s+TopicId: \\S{22}\\s+PartitionCount: 3\\s+ReplicationFactor: 1.*"), d);
        for (int p = 0; p < 3; p++) {
            assertTrue(Pattern.compile("Topic: cli-topic\\s+Partition: " + p + "\\s+Leader: 1\\s+Replicas: 1\\s+Isr: 1").matcher(d).find(),
                    "partition " + p + " line in:\n" + d);
        }
        JavaProcess.Result dup = tool(null, TOPICS, "--create", "--topic", "cli-topic", "--partitions", "1");
        assertTrue(dup.exit() != 0 && (dup.out() + dup.err()).contains("already exists"), "duplicate create: " + dup);

        ok(TOPICS, "--delete", "--topic", "cli-topic");
        Wait.until(Duration.ofSeconds(30), "cli-topic to disappear from --list", () -> {
            try {
                return !lines(ok(TOPICS, "--list")).contains("cli-topic");
            } catch (Exception e) {
                throw new RuntimeException(e);
            }
        });
    }

    @Test
    void consoleProducerThenConsoleConsumerByPartition() throws Exception {
        Clients.createTopic(BROKER.bootstrap(), "cli-console", 1);
        String input = IntStream.range(0, 200).mapToObj(i -> "key" + i + ":value " + i + " ü").collect(Collectors.joining("\n")) + "\n";
        JavaProcess.Result produced = tool(input, CONSOLE_PRODUCER, "--topic", "cli-console",
                "--reader-property", "parse.key=true", "--reader-property", "key.separator=:");
        assertEquals(0, produced.exit(), "console producer: " + produced);

        String out = ok(CONSOLE_CONSUMER, "--topic", "cli-console", "--partition", "0", "--offset", "earliest",
                "--max-messages", "200", "--timeout-ms", "30000",
                "--formatter-property", "print.key=true", "--formatter-property", "key.separator=:", "--formatter-property", "print.offset=true");
        List<String> got = out.lines().filter(l -> !l.isBlank()).toList();
        List<String> want = IntStream.range(0, 200).mapToObj(i -> "Offset:" + i + ":key" + i + ":value " + i + " ü").toList();
        assertEquals(want, got);
    }

    @Test
    void consoleConsumerWithGroup() throws Exception {
        Clients.createTopic(BROKER.bootstrap(), "cli-console-group", 2);
        String input = IntStream.range(0, 50).mapToObj(i -> "line " + i).collect(Collectors.joining("\n")) + "\n";
        assertEquals(0, tool(input, CONSOLE_PRODUCER, "--topic", "cli-console-group").exit());
        String out = ok(CONSOLE_CONSUMER, "--topic", "cli-console-group", "--group", "cli-console-g",
                "--from-beginning", "--max-messages", "50", "--timeout-ms", "40000");
        assertEquals(IntStream.range(0, 50).mapToObj(i -> "line " + i).collect(Collectors.toSet()),
                lines(out), "lines read through the group");
    }

    @Test
    void producerPerfTest() throws Exception {
        Clients.createTopic(BROKER.bootstrap(), "cli-perf", 2);
        JavaProcess.Result r = JavaProcess.run(TOOL_TIMEOUT, null, PERF, "--bootstrap-server", BROKER.bootstrap(),
                "--topic", "cli-perf", "--num-records", "20000", "--record-size", "200", "--throughput", "-1",
                "--command-property", "acks=all", "compression.type=lz4");
        assertEquals(0, r.exit(), "perf test: " + r);
        Matcher m = Pattern.compile("(\\d+) records sent, [\\d.]+ records/sec \\(([\\d.]+) MB/sec\\)").matcher(r.out());
        String summary = null;
        while (m.find()) {
            summary = m.group();
            if (m.group(1).equals("20000")) {
                break;
            }
        }
        assertTrue(summary != null && summary.startsWith("20000 records sent"), "no final summary in:\n" + r.out());
        Log.info("ProducerPerformance: %s", summary);
        long total = 0;
        try (KafkaConsumer<byte[], byte[]> c = Clients.consumer(BROKER.bootstrap(), Map.of())) {
            for (long end : c.endOffsets(Clients.partitions("cli-perf", 2), Clients.TIMEOUT).values()) {
                total += end;
            }
        }
        assertEquals(20000, total, "records in the topic after the perf test");
    }

    @Test
    void getOffsetShell() throws Exception {
        Clients.createTopic(BROKER.bootstrap(), "cli-offsets", 2);
        String input = IntStream.range(0, 30).mapToObj(i -> i + ":v").collect(Collectors.joining("\n")) + "\n";
        assertEquals(0, tool(input, CONSOLE_PRODUCER, "--topic", "cli-offsets", "--reader-property", "parse.key=true",
                "--reader-property", "key.separator=:").exit());
        Set<String> latest = lines(ok(GET_OFFSETS, "--topic", "cli-offsets", "--time", "-1"));
        Set<String> earliest = lines(ok(GET_OFFSETS, "--topic", "cli-offsets", "--time", "-2"));
        assertEquals(Set.of("cli-offsets:0:0", "cli-offsets:1:0"), earliest);
        long sum = latest.stream().mapToLong(l -> Long.parseLong(l.substring(l.lastIndexOf(':') + 1))).sum();
        assertEquals(2, latest.size(), "latest: " + latest);
        assertEquals(30, sum, "latest offsets: " + latest);
    }

    @Test
    void kafkaConsumerGroupsListDescribeResetDelete() throws Exception {
        String topic = "cli-groups";
        String group = "cli-group";
        Clients.createTopic(BROKER.bootstrap(), topic, 2);
        String input = IntStream.range(0, 40).mapToObj(i -> i + ":x").collect(Collectors.joining("\n")) + "\n";
        assertEquals(0, tool(input, CONSOLE_PRODUCER, "--topic", topic, "--reader-property", "parse.key=true",
                "--reader-property", "key.separator=:").exit());
        // one member consumes everything and commits, then leaves
        try (KafkaConsumer<byte[], byte[]> c = Clients.consumer(BROKER.bootstrap(), GroupMember.config(group, RangeAssignor.class.getName()))) {
            c.subscribe(List.of(topic));
            int n = 0;
            long deadline = System.nanoTime() + Clients.TIMEOUT.toNanos();
            while (n < 40 && System.nanoTime() < deadline) {
                for (ConsumerRecord<byte[], byte[]> ignored : c.poll(Duration.ofMillis(200))) {
                    n++;
                }
            }
            assertEquals(40, n, "records consumed by the group");
            c.commitSync(Clients.TIMEOUT);
        }
        assertTrue(lines(ok(GROUPS, "--list")).contains(group));

        String d = ok(GROUPS, "--describe", "--group", group);
        long lagSum = 0;
        long offSum = 0;
        for (int p = 0; p < 2; p++) {
            Matcher m = Pattern.compile(group + "\\s+" + topic + "\\s+" + p + "\\s+(\\d+)\\s+(\\d+)\\s+(\\d+)").matcher(d);
            assertTrue(m.find(), "partition " + p + " row in:\n" + d);
            assertEquals(m.group(1), m.group(2), "CURRENT-OFFSET = LOG-END-OFFSET for partition " + p);
            offSum += Long.parseLong(m.group(1));
            lagSum += Long.parseLong(m.group(3));
        }
        assertEquals(40, offSum);
        assertEquals(0, lagSum);

        String reset = ok(GROUPS, "--reset-offsets", "--group", group, "--topic", topic, "--to-earliest", "--execute");
        for (int p = 0; p < 2; p++) {
            assertTrue(Pattern.compile(group + "\\s+" + topic + "\\s+" + p + "\\s+0").matcher(reset).find(), reset);
        }
        try (var admin = Clients.admin(BROKER.bootstrap())) {
            var offsets = admin.listConsumerGroupOffsets(group).partitionsToOffsetAndMetadata().get();
            assertEquals(2, offsets.size());
            offsets.values().forEach(o -> assertEquals(0, o.offset(), "offset after --reset-offsets --to-earliest"));
        }

        String deleted = ok(GROUPS, "--delete", "--group", group);
        assertTrue(deleted.contains("Deletion of requested consumer groups ('" + group + "') was successful."), deleted);
        assertFalse(lines(ok(GROUPS, "--list")).contains(group), "group still listed after --delete");
    }

    @Test
    void kafkaConfigsDescribe() throws Exception {
        Clients.createTopic(BROKER.bootstrap(), "cli-configs", 1);
        ok(CONFIGS, "--alter", "--entity-type", "topics", "--entity-name", "cli-configs", "--add-config", "retention.ms=5000000");
        String d = ok(CONFIGS, "--describe", "--entity-type", "topics", "--entity-name", "cli-configs");
        assertTrue(d.contains("retention.ms=5000000"), d);
        String all = ok(CONFIGS, "--describe", "--entity-type", "topics", "--entity-name", "cli-configs", "--all");
        assertTrue(all.contains("cleanup.policy=delete"), all);
        String broker = ok(CONFIGS, "--describe", "--entity-type", "brokers", "--entity-name", "1", "--all");
        assertTrue(broker.contains("log.dirs="), broker);
    }
}
