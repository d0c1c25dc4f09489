package dev.sluice.compat;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertNotNull;

import java.nio.charset.StandardCharsets;
import java.time.Duration;
import java.util.HashMap;
import java.util.List;
import java.util.Map;
import java.util.Set;
import java.util.concurrent.TimeUnit;
import org.apache.kafka.clients.admin.Admin;
import org.apache.kafka.clients.consumer.ConsumerRecord;
import org.apache.kafka.clients.consumer.KafkaConsumer;
import org.apache.kafka.clients.consumer.OffsetAndMetadata;
import org.apache.kafka.clients.consumer.RangeAssignor;
import org.apache.kafka.clients.producer.KafkaProducer;
import org.apache.kafka.clients.producer.ProducerRecord;
import org.apache.kafka.common.TopicPartition;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.extension.RegisterExtension;

/**
 * Committed offsets (OffsetCommit/OffsetFetch) with their metadata: a subscribed consumer commits
 * offsets 37 and 11 on two partitions; a new member of the same group must resume exactly there,
 * also after the broker was stopped gracefully or killed with SIGKILL and restarted on its data.
 */
class GroupOffsetsTest {
    @RegisterExtension
    static final BrokerExtension BROKER = new BrokerExtension();

    static final Map<Integer, Long> COMMIT = Map.of(0, 37L, 1, 11L);

    @Test
    void commitWithMetadataThenResume() throws Exception {
        commitThenResume("resume", () -> { });
    }

    @Test
    void committedOffsetsSurviveGracefulRestart() throws Exception {
        Broker b = BROKER.controllable();
        commitThenResume("graceful", () -> {
            b.stop();
            b.start();
        });
    }

    @Test
    void committedOffsetsSurviveKill9Restart() throws Exception {
        Broker b = BROKER.controllable();
        commitThenResume("kill9", () -> {
            b.kill();
            b.start();
        });
    }

    interface Step {
        void run() throws Exception;
    }

    void commitThenResume(String label, Step between) throws Exception {
        String topic = "offsets-" + label;
        String group = "g-offsets-" + label;
        Clients.createTopic(BROKER.bootstrap(), topic, 2);
        try (KafkaProducer<byte[], byte[]> p = Clients.producer(BROKER.bootstrap(), Map.of())) {
            for (int i = 0; i < 50; i++) {
                for (int part = 0; part < 2; part++) {
                    p.send(new ProducerRecord<>(topic, part, null, bytes("p" + part + "-" + i)));
                }
            }
            p.flush();
            p.send(new ProducerRecord<>(topic, 0, null, bytes("p0-50"))).get(30, TimeUnit.SECONDS);
        }
        Map<TopicPartition, OffsetAndMetadata> commit = new HashMap<>();
        COMMIT.forEach((part, off) -> commit.put(new TopicPartition(topic, part), new OffsetAndMetadata(off, "meta-" + label + "-" + part)));
        try (KafkaConsumer<byte[], byte[]> c = member(group)) {
            c.subscribe(List.of(topic));
            long deadline = System.nanoTime() + Clients.TIMEOUT.toNanos();
            while (c.assignment().size() < 2) {
                if (System.nanoTime() > deadline) {
                    throw new AssertionError("the only member of " + group + " got no full assignment: " + c.assignment());
                }
                c.poll(Duration.ofMillis(200));
            }
            c.commitSync(commit, Duration.ofSeconds(30));
        }

        between.run();

        try (Admin admin = Clients.admin(BROKER.bootstrap())) {
            Map<TopicPartition, OffsetAndMetadata> seen = admin.listConsumerGroupOffsets(group)
                    .partitionsToOffsetAndMetadata().get(40, TimeUnit.SECONDS);
            assertEquals(commit, seen, "listConsumerGroupOffsets after " + label);
        }
        try (KafkaConsumer<byte[], byte[]> c = member(group)) {
            assertEquals(commit, c.committed(commit.keySet(), Clients.TIMEOUT), "committed() after " + label);
            c.subscribe(List.of(topic));
            Map<Integer, ConsumerRecord<byte[], byte[]>> first = new HashMap<>();
            long deadline = System.nanoTime() + Clients.TIMEOUT.toNanos();
            while (first.size() < 2 && System.nanoTime() < deadline) {
                for (ConsumerRecord<byte[], byte[]> r : c.poll(Duration.ofMillis(200))) {
                    first.putIfAbsent(r.partition(), r);
                }
            }
            assertEquals(Set.of(0, 1), first.keySet(), "a resumed member should read both partitions");
            COMMIT.forEach((part, off) -> {
                ConsumerRecord<byte[], byte[]> r = first.get(part);
                assertNotNull(r);
                assertEquals(off, r.offset(), "resumed offset in partition " + part);
                assertEquals("p" + part + "-" + off, new String(r.value(), StandardCharsets.UTF_8));
            });
        }
    }

    static KafkaConsumer<byte[], byte[]> member(String group) {
        return Clients.consumer(BROKER.bootstrap(), GroupMember.config(group, RangeAssignor.class.getName()));
    }

    static byte[] bytes(String s) {
        return s.getBytes(StandardCharsets.UTF_8);
    }
}
