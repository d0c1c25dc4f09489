package dev.sluice.compat;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertNotEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.nio.file.Files;
import java.nio.file.Path;
import java.time.Duration;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.List;
import java.util.Map;
import java.util.concurrent.TimeUnit;
import org.apache.kafka.clients.admin.Admin;
import org.apache.kafka.clients.admin.NewTopic;
import org.apache.kafka.clients.consumer.ConsumerRecord;
import org.apache.kafka.clients.producer.KafkaProducer;
import org.apache.kafka.clients.producer.ProducerRecord;
import org.apache.kafka.common.TopicPartition;
import org.apache.kafka.common.record.TimestampType;
import org.junit.jupiter.api.Tag;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.extension.RegisterExtension;

/**
 * Kafka's topic administration tools (issue 7): kafka-configs for topics and brokers
 * (per broker and --entity-default), kafka-delete-records, kafka-log-dirs, and kafka-dump-log on
 * a LogAppendTime topic's segment. Each tool runs as its main class in a child JVM. Tagged
 * "tools": the run on an older client (run.sh --client 3.9) has no tools on its class path.
 */
@Tag("tools")
class TopicAdminCliTest {
    @RegisterExtension
    static final BrokerExtension BROKER = new BrokerExtension();

    static final Duration TOOL_TIMEOUT = Duration.ofSeconds(90);
    static final String CONFIGS = "org.apache.kafka.tools.ConfigCommand";
    static final String DELETE_RECORDS = "org.apache.kafka.tools.DeleteRecordsCommand";
    static final String LOG_DIRS = "org.apache.kafka.tools.LogDirsCommand";
    static final String DUMP_LOG = "org.apache.kafka.tools.DumpLogSegments";

    static JavaProcess.Result tool(String mainClass, String... args) throws Exception {
        List<String> all = new ArrayList<>(List.of("--bootstrap-server", BROKER.bootstrap()));
        all.addAll(Arrays.asList(args));
        return JavaProcess.run(TOOL_TIMEOUT, null, mainClass, all.toArray(String[]::new));
    }

    static String ok(String mainClass, String... args) throws Exception {
        JavaProcess.Result r = tool(mainClass, args);
        assertEquals(0, r.exit(), "tool failed: " + r);
        return r.out();
    }

    static void createTopic(String topic, int partitions, Map<String, String> configs) throws Exception {
        try (Admin admin = Clients.admin(BROKER.bootstrap())) {
            admin.createTopics(List.of(new NewTopic(topic, partitions, (short) 1).configs(configs)))
                    .all().get(30, TimeUnit.SECONDS);
            Clients.awaitLeaders(admin, topic, partitions);
        }
    }

    static void produce(String topic, int count) throws Exception {
        try (KafkaProducer<byte[], byte[]> p = Clients.producer(BROKER.bootstrap(), Map.of("linger.ms", 5))) {
            for (int i = 0; i < count; i++) {
                p.send(new ProducerRecord<>(topic, 0, ("k" + i).getBytes(), ("v" + i).getBytes()));
            }
            p.flush();
        }
    }

    /** The value kafka-configs --describe --all prints for one config of a topic. */
    static String topicConfig(String topic, String name) throws Exception {
        String all = ok(CONFIGS, "--describe", "--entity-type", "topics", "--entity-name", topic, "--all");
        return all.lines().map(String::strip).filter(l -> l.startsWith(name + "="))
                .map(l -> l.substring(name.length() + 1, l.indexOf(' ')))
                .findFirst().orElseThrow(() -> new AssertionError(name + " missing in:\n" + all));
    }

    @Test
    void kafkaConfigsAlterDescribeTopicsAndBrokers() throws Exception {
        createTopic("cli-cfg", 1, Map.of());
        ok(CONFIGS, "--alter", "--entity-type", "topics", "--entity-name", "cli-cfg",
                "--add-config", "retention.ms=5000000,cleanup.policy=[delete,compact]");
        String d = ok(CONFIGS, "--describe", "--entity-type", "topics", "--entity-name", "cli-cfg");
        assertTrue(d.contains("retention.ms=5000000 sensitive=false synonyms={DYNAMIC_TOPIC_CONFIG:retention.ms=5000000"), d);
        assertTrue(d.contains("cleanup.policy=delete,compact"), d);
        ok(CONFIGS, "--alter", "--entity-type", "topics", "--entity-name", "cli-cfg", "--delete-config", "retention.ms");
        assertEquals("604800000", topicConfig("cli-cfg", "retention.ms"));

        // Bad input changes nothing: an unknown topic config, a value out of range.
        JavaProcess.Result unknown = tool(CONFIGS, "--alter", "--entity-type", "topics", "--entity-name", "cli-cfg",
                "--add-config", "no.such.config=1");
        assertNotEquals(0, unknown.exit(), unknown.toString());
        JavaProcess.Result range = tool(CONFIGS, "--alter", "--entity-type", "topics", "--entity-name", "cli-cfg",
                "--add-config", "segment.bytes=10");
        assertNotEquals(0, range.exit(), range.toString());
        assertTrue((range.out() + range.err()).contains("InvalidConfigurationException"), range.toString());

        try {
            // The cluster-wide default reaches topics without an override at once.
            String def = ok(CONFIGS, "--alter", "--entity-type", "brokers", "--entity-default",
                    "--add-config", "log.retention.ms=3600000");
            assertTrue(def.contains("Completed updating default config for brokers in the cluster."), def);
            Wait.until(Duration.ofSeconds(30), "retention.ms to follow the broker default",
                    () -> "3600000".equals(uncheckedTopicConfig("cli-cfg", "retention.ms")));
            String defaults = ok(CONFIGS, "--describe", "--entity-type", "brokers", "--entity-default");
            assertTrue(defaults.contains("log.retention.ms=3600000 sensitive=false synonyms={DYNAMIC_DEFAULT_BROKER_CONFIG:log.retention.ms=3600000}"),
                    defaults);

            // This broker's own value beats the default.
            String own = ok(CONFIGS, "--alter", "--entity-type", "brokers", "--entity-name", "1",
                    "--add-config", "log.retention.bytes=1000000");
            assertTrue(own.contains("Completed updating config for broker 1."), own);
            String broker = ok(CONFIGS, "--describe", "--entity-type", "brokers", "--entity-name", "1");
            assertTrue(broker.contains("log.retention.bytes=1000000 sensitive=false synonyms={DYNAMIC_BROKER_CONFIG:log.retention.bytes=1000000, DEFAULT_CONFIG:log.retention.bytes=-1}"),
                    broker);
            Wait.until(Duration.ofSeconds(30), "retention.bytes to follow the broker's value",
                    () -> "1000000".equals(uncheckedTopicConfig("cli-cfg", "retention.bytes")));
            String all = ok(CONFIGS, "--describe", "--entity-type", "brokers", "--entity-name", "1", "--all");
            assertTrue(all.contains("log.retention.ms=3600000 sensitive=false synonyms={DYNAMIC_DEFAULT_BROKER_CONFIG:log.retention.ms=3600000"), all);

            // A config Kafka reads only at start-up is refused.
            JavaProcess.Result stat = tool(CONFIGS, "--alter", "--entity-type", "brokers", "--entity-name", "1",
                    "--add-config", "num.partitions=3");
            assertNotEquals(0, stat.exit(), stat.toString());
            assertTrue((stat.out() + stat.err()).contains("InvalidRequestException: Cannot update these configs dynamically: [num.partitions]"),
                    stat.toString());
        } finally {
            tool(CONFIGS, "--alter", "--entity-type", "brokers", "--entity-default", "--delete-config", "log.retention.ms");
            tool(CONFIGS, "--alter", "--entity-type", "brokers", "--entity-name", "1", "--delete-config", "log.retention.bytes");
        }
        Wait.until(Duration.ofSeconds(30), "retention.ms back to Kafka's default",
                () -> "604800000".equals(uncheckedTopicConfig("cli-cfg", "retention.ms")));
    }

    static String uncheckedTopicConfig(String topic, String name) {
        try {
            return topicConfig(topic, name);
        } catch (Exception e) {
            throw new RuntimeException(e);
        }
    }

    @Test
    void kafkaDeleteRecordsWithOffsetJsonFile() throws Exception {
        createTopic("cli-delrec", 1, Map.of());
        produce("cli-delrec", 30);
        Path json = Files.createTempFile("delete-records", ".json");
        Files.writeString(json, "{\"partitions\":[{\"topic\":\"cli-delrec\",\"partition\":0,\"offset\":10}],\"version\":1}");
        String out = ok(DELETE_RECORDS, "--offset-json-file", json.toString());
        assertTrue(out.contains("partition: cli-delrec-0\tlow_watermark: 10"), out);
        try (var c = Clients.consumer(BROKER.bootstrap(), Map.of())) {
            TopicPartition tp = new TopicPartition("cli-delrec", 0);
            assertEquals(10L, c.beginningOffsets(List.of(tp), Clients.TIMEOUT).get(tp));
        }

        // Beyond the high watermark: Kafka's OFFSET_OUT_OF_RANGE, nothing changed.
        Files.writeString(json, "{\"partitions\":[{\"topic\":\"cli-delrec\",\"partition\":0,\"offset\":1000}],\"version\":1}");
        JavaProcess.Result beyond = tool(DELETE_RECORDS, "--offset-json-file", json.toString());
        assertTrue((beyond.out() + beyond.err()).contains("partition: cli-delrec-0\terror: org.apache.kafka.common.errors.OffsetOutOfRangeException"),
                beyond.toString());
        try (var c = Clients.consumer(BROKER.bootstrap(), Map.of())) {
            TopicPartition tp = new TopicPartition("cli-delrec", 0);
            assertEquals(10L, c.beginningOffsets(List.of(tp), Clients.TIMEOUT).get(tp));
        }
        Files.deleteIfExists(json);
    }

    @Test
    void kafkaLogDirsDescribe() throws Exception {
        createTopic("cli-logdirs", 2, Map.of());
        produce("cli-logdirs", 20);
        String out = ok(LOG_DIRS, "--describe", "--topic-list", "cli-logdirs");
        assertTrue(out.contains("Received log directory information from brokers 1"), out);
        String json = out.lines().filter(l -> l.startsWith("{")).findFirst().orElseThrow(() -> new AssertionError(out));
        assertTrue(json.contains("\"broker\":1"), json);
        assertTrue(json.matches(".*\"partition\":\"cli-logdirs-0\",\"size\":[1-9]\\d*,\"offsetLag\":0,\"isFuture\":false.*"), json);
        assertTrue(json.contains("\"partition\":\"cli-logdirs-1\""), json);
        assertTrue(json.contains("\"error\":null"), json);
    }

    @Test
    void kafkaDumpLogVerifiesALogAppendTimeSegment() throws Exception {
        Broker broker = BROKER.controllable();
        createTopic("cli-lat", 1, Map.of("message.timestamp.type", "LogAppendTime"));
        long before = System.currentTimeMillis();
        try (KafkaProducer<byte[], byte[]> p = Clients.producer(BROKER.bootstrap(), Map.of("compression.type", "lz4"))) {
            for (int i = 0; i < 20; i++) {
                // A producer timestamp a day in the past: the broker's append time replaces it.
                p.send(new ProducerRecord<>("cli-lat", 0, before - 86_400_000L, ("k" + i).getBytes(), ("v" + i).getBytes()));
            }
            p.flush();
        }
        long after = System.currentTimeMillis();
        var records = Clients.readAll(BROKER.bootstrap(), List.of(new TopicPartition("cli-lat", 0)))
                .get(new TopicPartition("cli-lat", 0));
        assertEquals(20, records.size());
        for (ConsumerRecord<byte[], byte[]> r : records) {
            assertEquals(TimestampType.LOG_APPEND_TIME, r.timestampType());
            assertTrue(r.timestamp() >= before && r.timestamp() <= after, "timestamp " + r.timestamp());
        }

        Path segment = broker.root().resolve("data").resolve("cli-lat-0").resolve("00000000000000000000.log");
        assertTrue(Files.exists(segment), segment + " exists");
        JavaProcess.Result dump = JavaProcess.run(TOOL_TIMEOUT, null, DUMP_LOG, "--files", segment.toString(),
                "--deep-iteration", "--print-data-log");
        assertEquals(0, dump.exit(), dump.toString());
        String out = dump.out();
        assertTrue(out.contains("isvalid: true"), out);
        assertFalse(out.contains("isvalid: false"), out);
        assertTrue(out.contains("compresscodec: lz4"), out);
        long appendLines = out.lines().filter(l -> l.startsWith("| offset:") && l.contains("LogAppendTime: ")).count();
        assertEquals(20, appendLines, "records stamped LogAppendTime in:\n" + out);
        assertTrue(out.contains("payload: v19"), out);
    }

    /**
     * compression.type naming a codec: a batch the producer compressed otherwise is stored in the
     * topic's codec (DumpLogSegments shows it) and the Java consumer reads every record back.
     */
    @Test
    void topicCompressionTypeRecompressesProducedBatches() throws Exception {
        Broker broker = BROKER.controllable();
        String[][] cases = {{"gzip", "lz4"}, {"snappy", "zstd"}, {"lz4", "gzip"}, {"zstd", "snappy"}, {"uncompressed", "gzip"}};
        for (String[] c : cases) {
            String topic = "cli-codec-" + c[0];
            createTopic(topic, 1, Map.of("compression.type", c[0]));
            try (KafkaProducer<byte[], byte[]> p = Clients.producer(BROKER.bootstrap(), Map.of("compression.type", c[1], "linger.ms", 20))) {
                for (int i = 0; i < 500; i++) {
                    p.send(new ProducerRecord<>(topic, 0, ("k" + i).getBytes(), ("value " + i).repeat(10).getBytes()));
                }
                p.flush();
            }
            TopicPartition tp = new TopicPartition(topic, 0);
            var records = Clients.readAll(BROKER.bootstrap(), List.of(tp)).get(tp);
            assertEquals(500, records.size(), topic);
            for (int i = 0; i < 500; i++) {
                assertEquals(i, records.get(i).offset());
                assertEquals(("value " + i).repeat(10), new String(records.get(i).value()), topic + " record " + i);
            }
            Path segment = broker.root().resolve("data").resolve(topic + "-0").resolve("00000000000000000000.log");
            JavaProcess.Result dump = JavaProcess.run(TOOL_TIMEOUT, null, DUMP_LOG, "--files", segment.toString(), "--deep-iteration");
            assertEquals(0, dump.exit(), dump.toString());
            String codec = c[0].equals("uncompressed") ? "none" : c[0];
            long batches = dump.out().lines().filter(l -> l.startsWith("baseOffset:")).count();
            long inCodec = dump.out().lines().filter(l -> l.startsWith("baseOffset:") && l.contains("compresscodec: " + codec)).count();
            assertTrue(batches > 0 && batches == inCodec, topic + ": every batch in " + codec + ":\n" + dump.out());
            assertFalse(dump.out().contains("isvalid: false"), dump.out());
        }
    }
}
