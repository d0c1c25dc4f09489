package dev.sluice.compat;

import java.io.IOException;
import java.io.InputStream;
import java.nio.charset.StandardCharsets;
import java.time.Duration;
import java.util.ArrayList;
import java.util.Collection;
import java.util.HashMap;
import java.util.List;
import java.util.Map;
import java.util.Properties;
import java.util.TreeMap;
import java.util.concurrent.TimeUnit;
import org.apache.kafka.clients.admin.Admin;
import org.apache.kafka.clients.admin.FinalizedVersionRange;
import org.apache.kafka.clients.consumer.ConsumerConfig;
import org.apache.kafka.clients.consumer.ConsumerRecord;
import org.apache.kafka.clients.consumer.KafkaConsumer;
import org.apache.kafka.clients.producer.KafkaProducer;
import org.apache.kafka.clients.producer.ProducerConfig;
import org.apache.kafka.clients.producer.ProducerRecord;
import org.apache.kafka.clients.producer.RecordMetadata;
import org.apache.kafka.common.TopicPartition;

/**
 * Helpers for the transaction tests: transactional producers, reading a topic with one isolation
 * level up to the end offsets that level sees, and records as "partition/offset=value" strings so
 * that an assertion shows exactly which record is missing or extra.
 */
final class Txn {
    static final String READ_COMMITTED = "read_committed";
    static final String READ_UNCOMMITTED = "read_uncommitted";

    private Txn() {
    }

    /** A transactional producer (initTransactions done) with the client's other defaults. */
    static KafkaProducer<byte[], byte[]> producer(String bootstrap, String transactionalId, Map<String, Object> extra) {
        Map<String, Object> c = new HashMap<>(extra);
        c.put(ProducerConfig.TRANSACTIONAL_ID_CONFIG, transactionalId);
        c.putIfAbsent(ProducerConfig.MAX_BLOCK_MS_CONFIG, 60_000);
        KafkaProducer<byte[], byte[]> p = Clients.producer(bootstrap, c);
        try {
            p.initTransactions();
        } catch (RuntimeException e) {
            p.close(Duration.ZERO);
            throw e;
        }
        return p;
    }

    /**
     * The transaction protocol this client speaks to the broker: 2 (KIP-890 part 2) when the
     * client knows it (4.0 and later) and the broker finalizes transaction.version at 2 or more,
     * else 1.
     */
    static int transactionVersion(Admin admin) throws Exception {
        int clientMajor = Integer.parseInt(clientVersion().split("\\.")[0]);
        FinalizedVersionRange finalized = admin.describeFeatures().featureMetadata().get(30, TimeUnit.SECONDS)
                .finalizedFeatures().get("transaction.version");
        boolean v2 = clientMajor >= 4 && finalized != null && finalized.maxVersionLevel() >= 2;
        return v2 ? 2 : 1;
    }

    /** The Java client's version, as kafka-clients records it in its jar. */
    static String clientVersion() throws IOException {
        Properties p = new Properties();
        try (InputStream in = KafkaProducer.class.getResourceAsStream("/kafka/kafka-version.properties")) {
            p.load(in);
        }
        return p.getProperty("version");
    }

    static byte[] bytes(String s) {
        return s.getBytes(StandardCharsets.UTF_8);
    }

    static String str(byte[] b) {
        return b == null ? "null" : new String(b, StandardCharsets.UTF_8);
    }

    /** Sends value to topic/partition and waits for the acknowledgement; returns "p/offset=value". */
    static String sendSync(KafkaProducer<byte[], byte[]> p, String topic, int partition, String value) throws Exception {
        RecordMetadata m = p.send(new ProducerRecord<>(topic, partition, bytes("k-" + value), bytes(value)))
                .get(60, TimeUnit.SECONDS);
        return m.partition() + "/" + m.offset() + "=" + value;
    }

    /**
     * Reads the partitions from the beginning to the end offsets the given isolation level sees
     * (the last stable offset for read_committed, the high watermark otherwise); returns
     * "p/offset=value" for every record delivered, per partition in offset order. For
     * read_committed it first waits until no transaction is open (last stable offset = high
     * watermark): commitTransaction() returns before the broker has written the markers.
     */
    static Map<Integer, List<String>> read(String bootstrap, Collection<TopicPartition> partitions, String isolation)
            throws InterruptedException {
        if (isolation.equals(READ_COMMITTED)) {
            String[] seen = {""};
            Wait.until(Duration.ofSeconds(30), () -> "no open transaction (last stable offsets = high watermarks): "
                    + seen[0], () -> {
                        Map<Integer, Long> lso = endOffsets(bootstrap, partitions, READ_COMMITTED);
                        Map<Integer, Long> hw = endOffsets(bootstrap, partitions, READ_UNCOMMITTED);
                        seen[0] = lso + " vs " + hw;
                        return lso.equals(hw);
                    });
        }
        return readNow(bootstrap, partitions, isolation);
    }

    /** As {@link #read}, up to the end offsets at the time of the call, open transactions or not. */
    static Map<Integer, List<String>> readNow(String bootstrap, Collection<TopicPartition> partitions, String isolation)
            throws InterruptedException {
        Map<Integer, List<String>> out = new TreeMap<>();
        partitions.forEach(tp -> out.put(tp.partition(), new ArrayList<>()));
        try (KafkaConsumer<byte[], byte[]> c = Clients.consumer(bootstrap,
                Map.of(ConsumerConfig.ISOLATION_LEVEL_CONFIG, isolation))) {
            c.assign(partitions);
            Map<TopicPartition, Long> end = c.endOffsets(partitions, Clients.TIMEOUT);
            c.seekToBeginning(partitions);
            long deadline = System.nanoTime() + Clients.TIMEOUT.toNanos();
            while (!reached(c, end)) {
                if (System.nanoTime() > deadline) {
                    throw new AssertionError(isolation + " read of " + partitions + " did not reach " + end
                            + " in " + Clients.TIMEOUT.toSeconds() + " s; got " + out);
                }
                for (ConsumerRecord<byte[], byte[]> r : c.poll(Duration.ofMillis(200))) {
                    out.get(r.partition()).add(r.partition() + "/" + r.offset() + "=" + str(r.value()));
                }
            }
            // Nothing beyond the end offsets may arrive: poll once more.
            for (ConsumerRecord<byte[], byte[]> r : c.poll(Duration.ofMillis(300))) {
                out.get(r.partition()).add(r.partition() + "/" + r.offset() + "=" + str(r.value()) + " (past the end offset)");
            }
        }
        return out;
    }

    /** The end offsets as the given isolation level sees them (ListOffsets with isolation level). */
    static Map<Integer, Long> endOffsets(String bootstrap, Collection<TopicPartition> partitions, String isolation) {
        try (KafkaConsumer<byte[], byte[]> c = Clients.consumer(bootstrap,
                Map.of(ConsumerConfig.ISOLATION_LEVEL_CONFIG, isolation))) {
            Map<Integer, Long> out = new TreeMap<>();
            c.endOffsets(partitions, Clients.TIMEOUT).forEach((tp, o) -> out.put(tp.partition(), o));
            return out;
        }
    }

    private static boolean reached(KafkaConsumer<byte[], byte[]> c, Map<TopicPartition, Long> end) {
        for (Map.Entry<TopicPartition, Long> e : end.entrySet()) {
            if (c.position(e.getKey(), Clients.TIMEOUT) < e.getValue()) {
                return false;
            }
        }
        return true;
    }

    /** Groups "p/offset=value" strings by partition, keeping their order. */
    static Map<Integer, List<String>> byPartition(Collection<String> records, int partitions) {
        Map<Integer, List<String>> out = new TreeMap<>();
        for (int p = 0; p < partitions; p++) {
            out.put(p, new ArrayList<>());
        }
        for (String r : records) {
            out.get(Integer.parseInt(r.substring(0, r.indexOf('/')))).add(r);
        }
        out.values().forEach(l -> l.sort((a, b) -> Long.compare(offset(a), offset(b))));
        return out;
    }

    static long offset(String record) {
        return Long.parseLong(record.substring(record.indexOf('/') + 1, record.indexOf('=')));
    }

    /** The cause chain of t as class names, e.g. "KafkaException <- ProducerFencedException". */
    static String causes(Throwable t) {
        StringBuilder b = new StringBuilder();
        for (Throwable c = t; c != null; c = c.getCause()) {
            if (b.length() > 0) {
                b.append(" <- ");
            }
            b.append(c.getClass().getSimpleName());
        }
        return b.toString();
    }
}
