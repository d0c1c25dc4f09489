package dev.sluice.compat;

import java.time.Duration;
import java.util.ArrayList;
import java.util.Collection;
import java.util.HashMap;
import java.util.List;
import java.util.Map;
import java.util.Properties;
import java.util.concurrent.TimeUnit;
import org.apache.kafka.clients.admin.Admin;
import org.apache.kafka.clients.admin.AdminClientConfig;
import org.apache.kafka.clients.admin.NewTopic;
import org.apache.kafka.clients.admin.OffsetSpec;
import org.apache.kafka.clients.admin.TopicDescription;
import org.apache.kafka.clients.consumer.ConsumerConfig;
import org.apache.kafka.clients.consumer.ConsumerRecord;
import org.apache.kafka.clients.consumer.KafkaConsumer;
import org.apache.kafka.clients.producer.KafkaProducer;
import org.apache.kafka.clients.producer.ProducerConfig;
import org.apache.kafka.common.TopicPartition;
import org.apache.kafka.common.serialization.ByteArrayDeserializer;
import org.apache.kafka.common.serialization.ByteArraySerializer;

/** Kafka's Java clients with their defaults, plus bounded helpers used by several tests. */
final class Clients {
    static final Duration TIMEOUT = Duration.ofSeconds(60);

    private Clients() {
    }

    /** A producer with every default (idempotent, acks=all) except the given settings. */
    static KafkaProducer<byte[], byte[]> producer(String bootstrap, Map<String, Object> extra) {
        Map<String, Object> c = new HashMap<>(extra);
        c.put(ProducerConfig.BOOTSTRAP_SERVERS_CONFIG, bootstrap);
        return new KafkaProducer<>(c, new ByteArraySerializer(), new ByteArraySerializer());
    }

    /** A consumer with defaults; without group.id it can only assign(). */
    static KafkaConsumer<byte[], byte[]> consumer(String bootstrap, Map<String, Object> extra) {
        Map<String, Object> c = new HashMap<>(extra);
        c.put(ConsumerConfig.BOOTSTRAP_SERVERS_CONFIG, bootstrap);
        return new KafkaConsumer<>(c, new ByteArrayDeserializer(), new ByteArrayDeserializer());
    }

    static Admin admin(String bootstrap) {
        Properties p = new Properties();
        p.put(AdminClientConfig.BOOTSTRAP_SERVERS_CONFIG, bootstrap);
        p.put(AdminClientConfig.DEFAULT_API_TIMEOUT_MS_CONFIG, 30_000);
        p.put(AdminClientConfig.REQUEST_TIMEOUT_MS_CONFIG, 15_000);
        return Admin.create(p);
    }

    static void createTopic(String bootstrap, String topic, int partitions) throws Exception {
        try (Admin admin = admin(bootstrap)) {
            admin.createTopics(List.of(new NewTopic(topic, partitions, (short) 1))).all().get(30, TimeUnit.SECONDS);
            awaitLeaders(admin, topic, partitions);
        }
    }

    /**
     * Waits until the broker leads every partition: its metadata shows a leader and ListOffsets
     * (served by the leader only) succeeds. Kafka acknowledges CreateTopics once the controller has
     * the topic, a moment before the broker leads it. An idempotent producer that writes in that
     * moment can get stuck retrying OUT_OF_ORDER_SEQUENCE_NUMBER until its delivery timeout (seen
     * with Kafka 4.1.2: the first batch fails NOT_LEADER_OR_FOLLOWER, later in-flight batches are
     * appended, the retried first one is then out of order), so tests wait before producing.
     */
    static void awaitLeaders(Admin admin, String topic, int partitions) throws InterruptedException {
        Map<TopicPartition, OffsetSpec> latest = new HashMap<>();
        partitions(topic, partitions).forEach(tp -> latest.put(tp, OffsetSpec.latest()));
        Wait.until(Duration.ofSeconds(30), "the broker to lead every partition of " + topic, () -> {
            try {
                TopicDescription d = admin.describeTopics(List.of(topic)).allTopicNames().get(10, TimeUnit.SECONDS).get(topic);
                if (d.partitions().size() != partitions || d.partitions().stream().anyMatch(p -> p.leader() == null)) {
                    return false;
                }
                admin.listOffsets(latest).all().get(10, TimeUnit.SECONDS);
                return true;
            } catch (Exception e) {
                return false;
            }
        });
    }

    /**
     * Reads every partition given from the beginning to its end offset at the time of the call,
     * with assign() + seekToBeginning(); returns the records per partition in the order received.
     */
    static Map<TopicPartition, List<ConsumerRecord<byte[], byte[]>>> readAll(String bootstrap,
            Collection<TopicPartition> partitions) throws InterruptedException {
        Map<TopicPartition, List<ConsumerRecord<byte[], byte[]>>> out = new HashMap<>();
        try (KafkaConsumer<byte[], byte[]> c = consumer(bootstrap, Map.of())) {
            c.assign(partitions);
            Map<TopicPartition, Long> end = c.endOffsets(partitions, TIMEOUT);
            c.seekToBeginning(partitions);
            partitions.forEach(tp -> out.put(tp, new ArrayList<>()));
            long deadline = System.nanoTime() + TIMEOUT.toNanos();
            while (!reachedEnd(c, end)) {
                if (System.nanoTime() > deadline) {
                    throw new AssertionError("reading " + partitions + " did not reach end offsets " + end
                            + " within " + TIMEOUT.toSeconds() + " s; got " + counts(out));
                }
                for (ConsumerRecord<byte[], byte[]> r : c.poll(Duration.ofMillis(200))) {
                    out.get(new TopicPartition(r.topic(), r.partition())).add(r);
                }
            }
        }
        return out;
    }

    private static boolean reachedEnd(KafkaConsumer<byte[], byte[]> c, Map<TopicPartition, Long> end) {
        for (Map.Entry<TopicPartition, Long> e : end.entrySet()) {
            if (c.position(e.getKey(), TIMEOUT) < e.getValue()) {
                return false;
            }
        }
        return true;
    }

    private static Map<TopicPartition, Integer> counts(Map<TopicPartition, List<ConsumerRecord<byte[], byte[]>>> m) {
        Map<TopicPartition, Integer> n = new HashMap<>();
        m.forEach((k, v) -> n.put(k, v.size()));
        return n;
    }

    static List<TopicPartition> partitions(String topic, int count) {
        List<TopicPartition> l = new ArrayList<>();
        for (int p = 0; p < count; p++) {
            l.add(new TopicPartition(topic, p));
        }
        return l;
    }
}
