package dev.sluice.compat;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertNotNull;
import static org.junit.jupiter.api.Assertions.assertNull;

import java.nio.charset.StandardCharsets;
import java.time.Duration;
import java.util.HashMap;
import java.util.List;
import java.util.Map;
import java.util.concurrent.TimeUnit;
import org.apache.kafka.clients.consumer.ConsumerRecord;
import org.apache.kafka.clients.consumer.KafkaConsumer;
import org.apache.kafka.clients.consumer.OffsetAndTimestamp;
import org.apache.kafka.clients.producer.KafkaProducer;
import org.apache.kafka.clients.producer.ProducerConfig;
import org.apache.kafka.clients.producer.ProducerRecord;
import org.apache.kafka.common.TopicPartition;
import org.junit.jupiter.api.BeforeAll;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.extension.RegisterExtension;

/**
 * Consumer offset lookups with assign(): beginningOffsets/endOffsets, offsetsForTimes (ListOffsets
 * by timestamp) and seek to the offset found. Partition 0 holds 200 records with create times
 * T0, T0+100, ... in several batches; partition 1 is empty; partition 2 holds records whose
 * timestamps go back and forth, all in one batch.
 */
class ConsumerOffsetsTest {
    @RegisterExtension
    static final BrokerExtension BROKER = new BrokerExtension();

    static final String TOPIC = "offsets";
    static final int N = 200;
    // Kafka rejects create times more than an hour ahead, and keeps older ones by default.
    static final long T0 = System.currentTimeMillis() - Duration.ofHours(2).toMillis();
    static final long[] BACK_AND_FORTH = {0, 500, 300, 700, 600, 1000};
    static final TopicPartition P0 = new TopicPartition(TOPIC, 0);
    static final TopicPartition P1 = new TopicPartition(TOPIC, 1);
    static final TopicPartition P2 = new TopicPartition(TOPIC, 2);

    @BeforeAll
    static void produce() throws Exception {
        Clients.createTopic(BROKER.bootstrap(), TOPIC, 3);
        try (KafkaProducer<byte[], byte[]> producer = Clients.producer(BROKER.bootstrap(),
                Map.of(ProducerConfig.LINGER_MS_CONFIG, 20, ProducerConfig.BATCH_SIZE_CONFIG, 2048))) {
            for (int i = 0; i < N; i++) {
                producer.send(new ProducerRecord<>(TOPIC, 0, T0 + 100L * i, null, bytes("v" + i)));
                if (i % 50 == 49) {
                    producer.flush(); // several batches, so lookups cross batch boundaries
                }
            }
            for (int i = 0; i < BACK_AND_FORTH.length; i++) {
                producer.send(new ProducerRecord<>(TOPIC, 2, T0 + BACK_AND_FORTH[i], null, bytes("w" + i)));
            }
            producer.flush();
            // the last send's acknowledgement proves everything before it was acknowledged too
            producer.send(new ProducerRecord<>(TOPIC, 2, T0 + 2000, null, bytes("last"))).get(30, TimeUnit.SECONDS);
        }
    }

    static byte[] bytes(String s) {
        return s.getBytes(StandardCharsets.UTF_8);
    }

    static KafkaConsumer<byte[], byte[]> consumer() {
        KafkaConsumer<byte[], byte[]> c = Clients.consumer(BROKER.bootstrap(), Map.of());
        c.assign(List.of(P0, P1, P2));
        return c;
    }

    @Test
    void beginningAndEndOffsets() {
        try (KafkaConsumer<byte[], byte[]> c = consumer()) {
            assertEquals(Map.of(P0, 0L, P1, 0L, P2, 0L), c.beginningOffsets(List.of(P0, P1, P2), Clients.TIMEOUT));
            assertEquals(Map.of(P0, (long) N, P1, 0L, P2, (long) BACK_AND_FORTH.length + 1),
                    c.endOffsets(List.of(P0, P1, P2), Clients.TIMEOUT));
        }
    }

    @Test
    void offsetsForTimesInOrderTimestamps() {
        try (KafkaConsumer<byte[], byte[]> c = consumer()) {
            expect(c, P0, T0 - 60_000, 0, T0);                     // before the first record
            expect(c, P0, T0, 0, T0);                              // exactly the first
            expect(c, P0, T0 + 3700, 37, T0 + 3700);               // exactly a record
            expect(c, P0, T0 + 3701, 38, T0 + 3800);               // between two records
            expect(c, P0, T0 + 100L * 50, 50, T0 + 100L * 50);     // first record of a later batch
            expect(c, P0, T0 + 100L * (N - 1), N - 1, T0 + 100L * (N - 1)); // the last
            expect(c, P0, T0 + 100L * (N - 1) + 1, -1, 0);         // after the last: none
            expect(c, P1, T0, -1, 0);                              // empty partition: none
        }
    }

    @Test
    void offsetsForTimesOutOfOrderTimestamps() {
        // the first offset whose timestamp is >= the target, not the closest timestamp
        try (KafkaConsumer<byte[], byte[]> c = consumer()) {
            expect(c, P2, T0 + 200, 1, T0 + 500);
            expect(c, P2, T0 + 550, 3, T0 + 700);
            expect(c, P2, T0 + 650, 3, T0 + 700);
            expect(c, P2, T0 + 800, 5, T0 + 1000);
            expect(c, P2, T0 + 1500, 6, T0 + 2000);
            expect(c, P2, T0 + 2001, -1, 0);
        }
    }

    @Test
    void seekToTimestampThenPoll() throws Exception {
        try (KafkaConsumer<byte[], byte[]> c = consumer()) {
            Map<TopicPartition, Long> query = new HashMap<>();
            query.put(P0, T0 + 100L * 120 + 1);
            OffsetAndTimestamp found = c.offsetsForTimes(query, Clients.TIMEOUT).get(P0);
            assertNotNull(found, "offsetsForTimes found nothing for " + query);
            c.seek(P0, found.offset());
            c.pause(List.of(P1, P2));
            List<ConsumerRecord<byte[], byte[]>> got = new java.util.ArrayList<>();
            long deadline = System.nanoTime() + Clients.TIMEOUT.toNanos();
            while (got.size() < 3 && System.nanoTime() < deadline) {
                c.poll(Duration.ofMillis(200)).forEach(got::add);
            }
            assertEquals(true, got.size() >= 3, "fewer than 3 records after seeking to " + found + ": " + got.size());
            for (int k = 0; k < 3; k++) {
                ConsumerRecord<byte[], byte[]> r = got.get(k);
                assertEquals(121 + k, r.offset());
                assertEquals(T0 + 100L * (121 + k), r.timestamp());
                assertEquals("v" + (121 + k), new String(r.value(), StandardCharsets.UTF_8));
            }
        }
    }

    static void expect(KafkaConsumer<byte[], byte[]> c, TopicPartition tp, long target, long offset, long timestamp) {
        Map<TopicPartition, Long> query = new HashMap<>();
        query.put(tp, target);
        OffsetAndTimestamp got = c.offsetsForTimes(query, Clients.TIMEOUT).get(tp);
        String what = "offsetsForTimes(" + tp + ", T0" + (target >= T0 ? "+" : "") + (target - T0) + ")";
        if (offset < 0) {
            assertNull(got, what + " should find no record");
        } else {
            assertNotNull(got, what + " found no record");
            assertEquals(offset, got.offset(), what + " offset");
            assertEquals(timestamp, got.timestamp(), what + " timestamp");
        }
    }
}
