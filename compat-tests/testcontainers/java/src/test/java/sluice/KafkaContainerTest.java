package sluice;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import java.util.Map;
import java.util.Properties;
import org.apache.kafka.clients.admin.AdminClient;
import org.apache.kafka.clients.admin.NewTopic;
import org.apache.kafka.clients.consumer.ConsumerConfig;
import org.apache.kafka.clients.consumer.ConsumerRecord;
import org.apache.kafka.clients.consumer.KafkaConsumer;
import org.apache.kafka.clients.producer.KafkaProducer;
import org.apache.kafka.clients.producer.ProducerConfig;
import org.apache.kafka.clients.producer.ProducerRecord;
import org.apache.kafka.common.serialization.StringDeserializer;
import org.apache.kafka.common.serialization.StringSerializer;
import org.junit.jupiter.api.Test;
import org.testcontainers.kafka.KafkaContainer;
import org.testcontainers.utility.DockerImageName;

/**
 * The README's Testcontainers example for Java: sluice's image, declared a compatible
 * substitute for apache/kafka, started by Testcontainers' own KafkaContainer, then a topic,
 * produced records, and a consumer group that reads them back and commits.
 */
class KafkaContainerTest {
    static final String IMAGE = System.getProperty("sluice.image", "localhost/sluice:latest");

    @Test
    void producesConsumesAndCommitsAsAGroup() throws Exception {
        DockerImageName image = DockerImageName.parse(IMAGE).asCompatibleSubstituteFor("apache/kafka");
        try (KafkaContainer kafka = new KafkaContainer(image)) {
            kafka.start();
            String bootstrap = kafka.getBootstrapServers();

            try (AdminClient admin = AdminClient.create(Map.of("bootstrap.servers", bootstrap))) {
                admin.createTopics(List.of(new NewTopic("orders", 3, (short) 1))).all().get();
            }
            Properties p = new Properties();
            p.put(ProducerConfig.BOOTSTRAP_SERVERS_CONFIG, bootstrap);
            p.put(ProducerConfig.KEY_SERIALIZER_CLASS_CONFIG, StringSerializer.class);
            p.put(ProducerConfig.VALUE_SERIALIZER_CLASS_CONFIG, StringSerializer.class);
            try (KafkaProducer<String, String> producer = new KafkaProducer<>(p)) {
                for (int i = 0; i < 30; i++) {
                    producer.send(new ProducerRecord<>("orders", "k" + i, "v" + i)).get();
                }
            }
            Properties c = new Properties();
            c.put(ConsumerConfig.BOOTSTRAP_SERVERS_CONFIG, bootstrap);
            c.put(ConsumerConfig.GROUP_ID_CONFIG, "billing");
            c.put(ConsumerConfig.AUTO_OFFSET_RESET_CONFIG, "earliest");
            c.put(ConsumerConfig.ENABLE_AUTO_COMMIT_CONFIG, "false");
            c.put(ConsumerConfig.KEY_DESERIALIZER_CLASS_CONFIG, StringDeserializer.class);
            c.put(ConsumerConfig.VALUE_DESERIALIZER_CLASS_CONFIG, StringDeserializer.class);
            List<String> values = new ArrayList<>();
            try (KafkaConsumer<String, String> consumer = new KafkaConsumer<>(c)) {
                consumer.subscribe(List.of("orders"));
                long deadline = System.currentTimeMillis() + 30_000;
                while (values.size() < 30 && System.currentTimeMillis() < deadline) {
                    for (ConsumerRecord<String, String> r : consumer.poll(Duration.ofMillis(500))) {
                        values.add(r.value());
                    }
                }
                consumer.commitSync();
                assertEquals(3, consumer.assignment().size(), "the one member owns every partition");
            }
            assertEquals(30, values.size(), "every record read back: " + values);
            for (int i = 0; i < 30; i++) {
                assertTrue(values.contains("v" + i), "v" + i);
            }
            try (AdminClient admin = AdminClient.create(Map.of("bootstrap.servers", bootstrap))) {
                long committed = admin.listConsumerGroupOffsets("billing").partitionsToOffsetAndMetadata().get()
                        .values().stream().mapToLong(o -> o.offset()).sum();
                assertEquals(30, committed, "the group committed the log end of every partition");
            }
        }
    }
}
