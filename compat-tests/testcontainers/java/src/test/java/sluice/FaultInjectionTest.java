package sluice;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertInstanceOf;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.io.IOException;
import java.nio.charset.StandardCharsets;
import java.time.Duration;
import java.util.List;
import java.util.Map;
import java.util.Properties;
import java.util.concurrent.ExecutionException;
import org.apache.kafka.clients.admin.AdminClient;
import org.apache.kafka.clients.admin.NewTopic;
import org.apache.kafka.clients.admin.OffsetSpec;
import org.apache.kafka.clients.consumer.ConsumerConfig;
import org.apache.kafka.clients.consumer.KafkaConsumer;
import org.apache.kafka.clients.producer.KafkaProducer;
import org.apache.kafka.clients.producer.ProducerConfig;
import org.apache.kafka.clients.producer.ProducerRecord;
import org.apache.kafka.clients.producer.RecordMetadata;
import org.apache.kafka.common.TopicPartition;
import org.apache.kafka.common.errors.TopicAuthorizationException;
import org.apache.kafka.common.serialization.StringDeserializer;
import org.apache.kafka.common.serialization.StringSerializer;
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.Test;

/**
 * The Java client against faults that a Python program (python/faults.py) arms over sluice's
 * HTTP control endpoint: NOT_LEADER_OR_FOLLOWER and a dropped connection are retried, a chosen
 * error reaches the producer, and a consumer group gets through COORDINATOR_NOT_AVAILABLE.
 * run.sh starts the broker and passes -Dsluice.bootstrap, -Dsluice.http, -Dsluice.faults
 * (the Python command).
 */
class FaultInjectionTest {
    static final String BOOTSTRAP = System.getProperty("sluice.bootstrap", "");
    static final String HTTP = System.getProperty("sluice.http", "");
    static final String FAULTS = System.getProperty("sluice.faults", "");

    /** Runs python/faults.py with these arguments and returns what it printed. */
    static String faults(String... args) throws IOException, InterruptedException {
        List<String> command = new java.util.ArrayList<>(List.of(FAULTS.split(" ")));
        command.add(HTTP);
        command.addAll(List.of(args));
        Process p = new ProcessBuilder(command).redirectErrorStream(true).start();
        String out = new String(p.getInputStream().readAllBytes(), StandardCharsets.UTF_8).trim();
        assertEquals(0, p.waitFor(), out);
        return out;
    }

    static void createTopic(String topic) throws Exception {
        try (AdminClient admin = AdminClient.create(Map.of("bootstrap.servers", BOOTSTRAP))) {
            admin.createTopics(List.of(new NewTopic(topic, 1, (short) 1))).all().get();
        }
    }

    static long endOffset(String topic) throws Exception {
        try (AdminClient admin = AdminClient.create(Map.of("bootstrap.servers", BOOTSTRAP))) {
            TopicPartition tp = new TopicPartition(topic, 0);
            return admin.listOffsets(Map.of(tp, OffsetSpec.latest())).all().get().get(tp).offset();
        }
    }

    static KafkaProducer<String, String> producer(String clientId) {
        Properties p = new Properties();
        p.put(ProducerConfig.BOOTSTRAP_SERVERS_CONFIG, BOOTSTRAP);
        p.put(ProducerConfig.CLIENT_ID_CONFIG, clientId);
        p.put(ProducerConfig.RETRY_BACKOFF_MS_CONFIG, 50);
        p.put(ProducerConfig.KEY_SERIALIZER_CLASS_CONFIG, StringSerializer.class);
        p.put(ProducerConfig.VALUE_SERIALIZER_CLASS_CONFIG, StringSerializer.class);
        return new KafkaProducer<>(p);
    }

    @AfterEach
    void reset() throws Exception {
        if (!HTTP.isEmpty()) {
            faults("reset");
        }
    }

    @Test
    void notLeaderOrFollowerIsRetriedAndTheRecordStoredOnce() throws Exception {
        assertTrue(!HTTP.isEmpty(), "run by compat-tests/testcontainers/run.sh, which passes -Dsluice.http");
        createTopic("moved");
        faults("add", "{\"action\":\"error\",\"api\":\"Produce\",\"error\":\"NOT_LEADER_OR_FOLLOWER\",\"topic\":\"moved\",\"count\":2}");
        try (KafkaProducer<String, String> producer = producer("mover")) {
            RecordMetadata stored = producer.send(new ProducerRecord<>("moved", "k", "v")).get();
            assertEquals(0, stored.offset());
        }
        assertEquals(1, endOffset("moved"));
        assertEquals("[]", faults("rules"), "both injected errors were answered");
    }

    @Test
    void aDroppedConnectionIsRetried() throws Exception {
        assertTrue(!HTTP.isEmpty(), "run by compat-tests/testcontainers/run.sh, which passes -Dsluice.http");
        createTopic("dropped");
        faults("add", "{\"action\":\"close\",\"api\":\"Produce\",\"client_id\":\"dropper\"}");
        try (KafkaProducer<String, String> producer = producer("dropper")) {
            producer.send(new ProducerRecord<>("dropped", "k", "v")).get();
        }
        assertEquals(1, endOffset("dropped"), "the idempotent retry stored the record once");
        assertEquals("[]", faults("rules"));
    }

    @Test
    void theProducerSeesTheChosenError() throws Exception {
        assertTrue(!HTTP.isEmpty(), "run by compat-tests/testcontainers/run.sh, which passes -Dsluice.http");
        createTopic("denied");
        faults("add", "{\"action\":\"error\",\"api\":\"Produce\",\"error\":\"TOPIC_AUTHORIZATION_FAILED\"}");
        try (KafkaProducer<String, String> producer = producer("denied")) {
            ExecutionException e = assertThrows(ExecutionException.class,
                    () -> producer.send(new ProducerRecord<>("denied", "k", "v")).get());
            assertInstanceOf(TopicAuthorizationException.class, e.getCause());
        }
        assertEquals(0, endOffset("denied"));
    }

    @Test
    void aConsumerGroupGetsThroughCoordinatorNotAvailable() throws Exception {
        assertTrue(!HTTP.isEmpty(), "run by compat-tests/testcontainers/run.sh, which passes -Dsluice.http");
        createTopic("grouped");
        try (KafkaProducer<String, String> producer = producer("feeder")) {
            producer.send(new ProducerRecord<>("grouped", "k", "v")).get();
        }
        faults("add", "{\"action\":\"error\",\"api\":\"FindCoordinator\",\"error\":\"COORDINATOR_NOT_AVAILABLE\",\"count\":3}");
        Properties c = new Properties();
        c.put(ConsumerConfig.BOOTSTRAP_SERVERS_CONFIG, BOOTSTRAP);
        c.put(ConsumerConfig.GROUP_ID_CONFIG, "patient");
        c.put(ConsumerConfig.AUTO_OFFSET_RESET_CONFIG, "earliest");
        c.put(ConsumerConfig.KEY_DESERIALIZER_CLASS_CONFIG, StringDeserializer.class);
        c.put(ConsumerConfig.VALUE_DESERIALIZER_CLASS_CONFIG, StringDeserializer.class);
        int read = 0;
        try (KafkaConsumer<String, String> consumer = new KafkaConsumer<>(c)) {
            consumer.subscribe(List.of("grouped"));
            long deadline = System.currentTimeMillis() + 30_000;
            while (read == 0 && System.currentTimeMillis() < deadline) {
                read += consumer.poll(Duration.ofMillis(500)).count();
            }
        }
        assertEquals(1, read);
        String served = faults("requests");
        int refused = served.split("COORDINATOR_NOT_AVAILABLE", -1).length - 1;
        assertEquals(3, refused, "the group's FindCoordinator was answered COORDINATOR_NOT_AVAILABLE 3 times: " + served);
    }
}
