package dev.sluice.compat;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertInstanceOf;
import static org.junit.jupiter.api.Assertions.assertNotEquals;
import static org.junit.jupiter.api.Assertions.assertNotNull;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.nio.charset.StandardCharsets;
import java.time.Duration;
import java.util.Collection;
import java.util.List;
import java.util.Map;
import java.util.Optional;
import java.util.Set;
import java.util.concurrent.ExecutionException;
import java.util.concurrent.TimeUnit;
import org.apache.kafka.clients.admin.Admin;
import org.apache.kafka.clients.admin.Config;
import org.apache.kafka.clients.admin.ConfigEntry;
import org.apache.kafka.clients.admin.CreateTopicsOptions;
import org.apache.kafka.clients.admin.CreateTopicsResult;
import org.apache.kafka.clients.admin.DescribeClusterResult;
import org.apache.kafka.clients.admin.ListOffsetsResult.ListOffsetsResultInfo;
import org.apache.kafka.clients.admin.NewPartitions;
import org.apache.kafka.clients.admin.NewTopic;
import org.apache.kafka.clients.admin.OffsetSpec;
import org.apache.kafka.clients.admin.RecordsToDelete;
import org.apache.kafka.clients.admin.TopicDescription;
import org.apache.kafka.clients.producer.KafkaProducer;
import org.apache.kafka.clients.producer.ProducerRecord;
import org.apache.kafka.common.KafkaFuture;
import org.apache.kafka.common.Node;
import org.apache.kafka.common.TopicCollection;
import org.apache.kafka.common.TopicPartition;
import org.apache.kafka.common.TopicPartitionInfo;
import org.apache.kafka.common.Uuid;
import org.apache.kafka.common.config.ConfigResource;
import org.apache.kafka.common.errors.InvalidReplicationFactorException;
import org.apache.kafka.common.errors.TopicExistsException;
import org.apache.kafka.common.errors.UnknownTopicIdException;
import org.apache.kafka.common.errors.UnknownTopicOrPartitionException;
import org.junit.jupiter.api.AfterAll;
import org.junit.jupiter.api.BeforeAll;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.extension.RegisterExtension;

/** Kafka's AdminClient: topics, offsets and cluster description against a single node with id 1. */
class AdminClientTest {
    @RegisterExtension
    static final BrokerExtension BROKER = new BrokerExtension();

    static Admin admin;

    @BeforeAll
    static void open() {
        admin = Clients.admin(BROKER.bootstrap());
    }

    @AfterAll
    static void close() {
        if (admin != null) {
            admin.close(Duration.ofSeconds(10));
        }
    }

    static <T> T get(KafkaFuture<T> f) throws Exception {
        return f.get(40, TimeUnit.SECONDS);
    }

    /** The cause of the failed future, which must be of the given type. */
    static <E extends Throwable> E failure(Class<E> type, KafkaFuture<?> f) {
        ExecutionException e = assertThrows(ExecutionException.class, () -> f.get(40, TimeUnit.SECONDS));
        return assertInstanceOf(type, e.getCause(), "failure cause");
    }

    /**
     * Creates topics and waits until the broker leads all their partitions (Kafka acknowledges
     * CreateTopics before its broker knows the topic; sluice does both at once).
     */
    static CreateTopicsResult create(NewTopic... topics) throws Exception {
        CreateTopicsResult r = admin.createTopics(List.of(topics));
        get(r.all());
        for (NewTopic t : topics) {
            Clients.awaitLeaders(admin, t.name(), get(r.numPartitions(t.name())));
        }
        return r;
    }

    static Set<String> topicNames() throws Exception {
        return get(admin.listTopics().names());
    }

    @Test
    void createTopicThenDescribe() throws Exception {
        CreateTopicsResult created = create(new NewTopic("adm-described", 3, (short) 1));
        Uuid id = get(created.topicId("adm-described"));
        assertNotEquals(Uuid.ZERO_UUID, id, "CreateTopics should return the topic id");
        assertEquals(3, get(created.numPartitions("adm-described")));
        assertEquals(1, get(created.replicationFactor("adm-described")));

        TopicDescription d = get(admin.describeTopics(List.of("adm-described")).topicNameValues().get("adm-described"));
        assertEquals("adm-described", d.name());
        assertFalse(d.isInternal());
        assertEquals(id, d.topicId(), "describeTopics topic id vs createTopics topic id");
        assertEquals(3, d.partitions().size());
        for (int p = 0; p < 3; p++) {
            TopicPartitionInfo info = d.partitions().get(p);
            assertEquals(p, info.partition());
            assertNotNull(info.leader(), "leader of partition " + p);
            assertEquals(1, info.leader().id(), "leader of partition " + p);
            assertEquals(List.of(1), info.replicas().stream().map(Node::id).toList(), "replicas of partition " + p);
            assertEquals(List.of(1), info.isr().stream().map(Node::id).toList(), "ISR of partition " + p);
        }
    }

    @Test
    void describeTopicById() throws Exception {
        Uuid id = get(create(new NewTopic("adm-by-id", 2, (short) 1)).topicId("adm-by-id"));
        TopicDescription d = get(admin.describeTopics(TopicCollection.ofTopicIds(List.of(id))).topicIdValues().get(id));
        assertEquals("adm-by-id", d.name());
        assertEquals(id, d.topicId());
        assertEquals(2, d.partitions().size());
        Uuid unknown = Uuid.randomUuid();
        failure(UnknownTopicIdException.class,
                admin.describeTopics(TopicCollection.ofTopicIds(List.of(unknown))).topicIdValues().get(unknown));
    }

    @Test
    void createTopicWithBrokerDefaults() throws Exception {
        CreateTopicsResult created = create(new NewTopic("adm-defaults", Optional.empty(), Optional.empty()));
        assertEquals(1, get(created.numPartitions("adm-defaults")), "num.partitions default");
        assertEquals(1, get(created.replicationFactor("adm-defaults")), "default.replication.factor default");
        TopicDescription d = get(admin.describeTopics(List.of("adm-defaults")).allTopicNames()).get("adm-defaults");
        assertEquals(1, d.partitions().size());
    }

    @Test
    void createTopicWithReplicationFactor3IsRejected() throws Exception {
        failure(InvalidReplicationFactorException.class,
                admin.createTopics(List.of(new NewTopic("adm-rf3", 1, (short) 3))).all());
        assertFalse(topicNames().contains("adm-rf3"), "a rejected topic must not exist");
    }

    @Test
    void createTopicValidateOnly() throws Exception {
        CreateTopicsOptions validateOnly = new CreateTopicsOptions().validateOnly(true);
        CreateTopicsResult r = admin.createTopics(List.of(new NewTopic("adm-validate", 5, (short) 1)), validateOnly);
        get(r.all());
        assertEquals(5, get(r.numPartitions("adm-validate")));
        failure(InvalidReplicationFactorException.class,
                admin.createTopics(List.of(new NewTopic("adm-validate-rf3", 1, (short) 3)), validateOnly).all());
        Set<String> names = topicNames();
        assertFalse(names.contains("adm-validate"), "validateOnly must not create the topic");
        assertFalse(names.contains("adm-validate-rf3"));
    }

    @Test
    void createExistingTopicIsRejected() throws Exception {
        get(admin.createTopics(List.of(new NewTopic("adm-twice", 2, (short) 1))).all());
        failure(TopicExistsException.class, admin.createTopics(List.of(new NewTopic("adm-twice", 2, (short) 1))).all());
    }

    @Test
    void listTopics() throws Exception {
        create(new NewTopic("adm-list-a", 1, (short) 1), new NewTopic("adm-list-b", 2, (short) 1));
        Set<String> names = topicNames();
        assertTrue(names.containsAll(Set.of("adm-list-a", "adm-list-b")), "listTopics: " + names);
        assertTrue(names.stream().noneMatch(n -> n.startsWith("__")), "internal topics must be hidden by default: " + names);
    }

    @Test
    void deleteTopicByName() throws Exception {
        create(new NewTopic("adm-deleted", 2, (short) 1));
        get(admin.deleteTopics(List.of("adm-deleted")).all());
        Wait.until(Duration.ofSeconds(30), "adm-deleted to disappear from listTopics",
                () -> !call(AdminClientTest::topicNames).contains("adm-deleted"));
        failure(UnknownTopicOrPartitionException.class,
                admin.describeTopics(List.of("adm-deleted")).topicNameValues().get("adm-deleted"));
        failure(UnknownTopicOrPartitionException.class, admin.deleteTopics(List.of("adm-never-existed")).all());
        // the name can be used again, and the new topic gets a new id
        get(admin.createTopics(List.of(new NewTopic("adm-deleted", 1, (short) 1))).all());
    }

    @Test
    void deleteTopicById() throws Exception {
        Uuid id = get(create(new NewTopic("adm-deleted-by-id", 1, (short) 1)).topicId("adm-deleted-by-id"));
        get(admin.deleteTopics(TopicCollection.ofTopicIds(List.of(id))).all());
        Wait.until(Duration.ofSeconds(30), "adm-deleted-by-id to disappear",
                () -> !call(AdminClientTest::topicNames).contains("adm-deleted-by-id"));
        failure(UnknownTopicIdException.class, admin.deleteTopics(TopicCollection.ofTopicIds(List.of(id))).all());
    }

    @Test
    void listOffsets() throws Exception {
        String topic = "adm-offsets";
        create(new NewTopic(topic, 1, (short) 1));
        long t0 = System.currentTimeMillis() - Duration.ofHours(1).toMillis();
        long[] times = {0, 100, 5000, 200, 300};  // the maximum is at offset 2
        try (KafkaProducer<byte[], byte[]> p = Clients.producer(BROKER.bootstrap(), Map.of())) {
            for (long t : times) {
                p.send(new ProducerRecord<>(topic, 0, t0 + t, null, ("at" + t).getBytes(StandardCharsets.UTF_8)))
                        .get(30, TimeUnit.SECONDS);
            }
        }
        TopicPartition tp = new TopicPartition(topic, 0);
        assertOffset(tp, OffsetSpec.earliest(), 0, -1);
        assertOffset(tp, OffsetSpec.latest(), times.length, -1);
        assertOffset(tp, OffsetSpec.maxTimestamp(), 2, t0 + 5000);
        assertOffset(tp, OffsetSpec.forTimestamp(t0 + 150), 2, t0 + 5000);
        assertOffset(tp, OffsetSpec.forTimestamp(t0 + 100), 1, t0 + 100);
        assertOffset(tp, OffsetSpec.forTimestamp(t0 + 6000), -1, -1);
    }

    void assertOffset(TopicPartition tp, OffsetSpec spec, long offset, long timestamp) throws Exception {
        ListOffsetsResultInfo info = get(admin.listOffsets(Map.of(tp, spec)).partitionResult(tp));
        String what = "listOffsets " + spec.getClass().getSimpleName();
        assertEquals(offset, info.offset(), what + " offset");
        if (timestamp >= 0) {
            assertEquals(timestamp, info.timestamp(), what + " timestamp");
        }
    }

    @Test
    void describeCluster() throws Exception {
        DescribeClusterResult c = admin.describeCluster();
        Collection<Node> nodes = get(c.nodes());
        assertEquals(1, nodes.size(), "nodes: " + nodes);
        Node n = nodes.iterator().next();
        assertEquals(1, n.id());
        assertEquals("127.0.0.1", n.host());
        assertEquals(BROKER.broker().port(), n.port());
        assertEquals(1, get(c.controller()).id(), "controller");
        String clusterId = get(c.clusterId());
        assertNotNull(clusterId);
        assertFalse(clusterId.isBlank(), "cluster id");
    }

    @Test
    void createPartitions() throws Exception {
        create(new NewTopic("adm-grow", 2, (short) 1));
        get(admin.createPartitions(Map.of("adm-grow", NewPartitions.increaseTo(5))).all());
        Wait.until(Duration.ofSeconds(30), "adm-grow to have 5 partitions",
                () -> call(() -> get(admin.describeTopics(List.of("adm-grow")).allTopicNames()).get("adm-grow").partitions().size()) == 5);
    }

    @Test
    void describeTopicConfigs() throws Exception {
        create(new NewTopic("adm-configs", 1, (short) 1).configs(Map.of("retention.ms", "3600000")));
        ConfigResource r = new ConfigResource(ConfigResource.Type.TOPIC, "adm-configs");
        Config config = get(admin.describeConfigs(List.of(r)).values().get(r));
        ConfigEntry retention = config.get("retention.ms");
        assertNotNull(retention, "retention.ms missing");
        assertEquals("3600000", retention.value());
        assertEquals(ConfigEntry.ConfigSource.DYNAMIC_TOPIC_CONFIG, retention.source());
        ConfigEntry cleanup = config.get("cleanup.policy");
        assertNotNull(cleanup, "defaults must be listed too (cleanup.policy missing)");
        assertEquals("delete", cleanup.value());
        assertTrue(cleanup.isDefault() || cleanup.source() != ConfigEntry.ConfigSource.DYNAMIC_TOPIC_CONFIG);
    }

    @Test
    void deleteRecords() throws Exception {
        String topic = "adm-delete-records";
        create(new NewTopic(topic, 1, (short) 1));
        try (KafkaProducer<byte[], byte[]> p = Clients.producer(BROKER.bootstrap(), Map.of())) {
            for (int i = 0; i < 10; i++) {
                p.send(new ProducerRecord<>(topic, 0, null, new byte[] {(byte) i})).get(30, TimeUnit.SECONDS);
            }
        }
        TopicPartition tp = new TopicPartition(topic, 0);
        long low = get(admin.deleteRecords(Map.of(tp, RecordsToDelete.beforeOffset(4))).lowWatermarks().get(tp)).lowWatermark();
        assertEquals(4, low);
        assertOffset(tp, OffsetSpec.earliest(), 4, -1);
    }

    interface Call<T> {
        T run() throws Exception;
    }

    static <T> T call(Call<T> c) {
        try {
            return c.run();
        } catch (Exception e) {
            throw new RuntimeException(e);
        }
    }
}
