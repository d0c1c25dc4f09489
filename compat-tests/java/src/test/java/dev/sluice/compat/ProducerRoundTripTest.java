package dev.sluice.compat;

import static org.junit.jupiter.api.Assertions.assertArrayEquals;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.nio.charset.StandardCharsets;
import java.util.ArrayList;
import java.util.Comparator;
import java.util.HashMap;
import java.util.List;
import java.util.Map;
import java.util.Random;
import java.util.concurrent.Future;
import java.util.concurrent.TimeUnit;
import org.apache.kafka.clients.consumer.ConsumerRecord;
import org.apache.kafka.clients.producer.KafkaProducer;
import org.apache.kafka.clients.producer.ProducerConfig;
import org.apache.kafka.clients.producer.ProducerRecord;
import org.apache.kafka.clients.producer.RecordMetadata;
import org.apache.kafka.common.TopicPartition;
import org.apache.kafka.common.header.Header;
import org.apache.kafka.common.header.internals.RecordHeader;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.extension.RegisterExtension;

/**
 * The Java producer with its default settings (idempotent, acks=all), one test per codec: 10,000
 * records with keys (some null), null and empty values and headers (repeated keys, null values)
 * to a 4-partition topic, read back with assign() + seekToBeginning(). Every record must come
 * back byte-identical, at the offset the producer was told, in send order per partition.
 */
class ProducerRoundTripTest {
    @RegisterExtension
    static final BrokerExtension BROKER = new BrokerExtension();

    static final int RECORDS = 10_000;
    static final int PARTITIONS = 4;

    @Test
    void defaultProducerNone() throws Exception {
        roundTrip("none");
    }

    @Test
    void defaultProducerGzip() throws Exception {
        roundTrip("gzip");
    }

    @Test
    void defaultProducerSnappy() throws Exception {
        roundTrip("snappy");
    }

    @Test
    void defaultProducerLz4() throws Exception {
        roundTrip("lz4");
    }

    @Test
    void defaultProducerZstd() throws Exception {
        roundTrip("zstd");
    }

    /** One record to send, and the metadata the broker acknowledged it with. */
    record Sent(int seq, ProducerRecord<byte[], byte[]> record, RecordMetadata meta) {
    }

    static ProducerRecord<byte[], byte[]> make(String topic, int i) {
        Random rnd = new Random(i);
        byte[] key = i % 97 == 0 ? null : ("key-" + (i % 251)).getBytes(StandardCharsets.UTF_8);
        byte[] value;
        if (i % 10 == 0) {
            value = null;
        } else if (i % 33 == 0) {
            value = new byte[0];
        } else {
            // half text (compressible), half random bytes including every byte value
            byte[] text = ("value-" + i + "-" + "abc".repeat(i % 40)).getBytes(StandardCharsets.UTF_8);
            byte[] noise = new byte[rnd.nextInt(64)];
            rnd.nextBytes(noise);
            value = new byte[text.length + noise.length];
            System.arraycopy(text, 0, value, 0, text.length);
            System.arraycopy(noise, 0, value, text.length, noise.length);
        }
        List<Header> headers = new ArrayList<>();
        if (i % 3 == 1) {
            headers.add(new RecordHeader("trace", ("t" + i).getBytes(StandardCharsets.UTF_8)));
        } else if (i % 3 == 2) {
            headers.add(new RecordHeader("dup", null));
            headers.add(new RecordHeader("dup", new byte[0]));
            headers.add(new RecordHeader("dup", new byte[] {(byte) i, 0, (byte) 0xff}));
        }
        return new ProducerRecord<>(topic, null, key, value, headers);
    }

    void roundTrip(String codec) throws Exception {
        String topic = "roundtrip-" + codec;
        Clients.createTopic(BROKER.bootstrap(), topic, PARTITIONS);

        List<ProducerRecord<byte[], byte[]>> records = new ArrayList<>();
        List<Future<RecordMetadata>> futures = new ArrayList<>();
        try (KafkaProducer<byte[], byte[]> producer = Clients.producer(BROKER.bootstrap(),
                Map.of(ProducerConfig.COMPRESSION_TYPE_CONFIG, codec))) {
            for (int i = 0; i < RECORDS; i++) {
                ProducerRecord<byte[], byte[]> r = make(topic, i);
                records.add(r);
                futures.add(producer.send(r));
            }
            producer.flush();
        }
        Map<Integer, List<Sent>> sentByPartition = new HashMap<>();
        for (int i = 0; i < RECORDS; i++) {
            RecordMetadata m = futures.get(i).get(30, TimeUnit.SECONDS);
            sentByPartition.computeIfAbsent(m.partition(), p -> new ArrayList<>()).add(new Sent(i, records.get(i), m));
        }
        assertEquals(PARTITIONS, sentByPartition.size(), "records should spread over every partition");

        Map<TopicPartition, List<ConsumerRecord<byte[], byte[]>>> got =
                Clients.readAll(BROKER.bootstrap(), Clients.partitions(topic, PARTITIONS));
        int total = 0;
        for (int p = 0; p < PARTITIONS; p++) {
            List<Sent> sent = sentByPartition.get(p);
            // acknowledged offsets: 0..n-1 in send order (idempotence keeps the order)
            for (int j = 0; j < sent.size(); j++) {
                assertEquals(j, sent.get(j).meta().offset(), "acknowledged offset of record " + sent.get(j).seq()
                        + " in partition " + p + " (" + codec + ")");
            }
            List<ConsumerRecord<byte[], byte[]>> read = got.get(new TopicPartition(topic, p));
            assertEquals(sent.size(), read.size(), "record count in partition " + p + " (" + codec + ")");
            for (int j = 0; j < sent.size(); j++) {
                assertSame(sent.get(j), read.get(j), codec);
            }
            total += read.size();
        }
        assertEquals(RECORDS, total);
        Log.info("ProducerRoundTripTest %s: %d records in %d partitions read back identical", codec, total, PARTITIONS);
    }

    static void assertSame(Sent sent, ConsumerRecord<byte[], byte[]> got, String codec) {
        String where = "record " + sent.seq() + " at " + got.topic() + "-" + got.partition() + "@" + got.offset() + " (" + codec + ")";
        assertEquals(sent.meta().offset(), got.offset(), "offset of " + where);
        assertArrayEquals(sent.record().key(), got.key(), "key of " + where);
        assertArrayEquals(sent.record().value(), got.value(), "value of " + where);
        assertEquals(sent.meta().timestamp(), got.timestamp(), "timestamp of " + where);
        Header[] want = sent.record().headers().toArray();
        Header[] have = got.headers().toArray();
        assertEquals(want.length, have.length, "header count of " + where);
        for (int h = 0; h < want.length; h++) {
            assertEquals(want[h].key(), have[h].key(), "header " + h + " key of " + where);
            assertArrayEquals(want[h].value(), have[h].value(), "header " + h + " value of " + where);
        }
        assertTrue(got.serializedValueSize() == (sent.record().value() == null ? -1 : sent.record().value().length),
                "serialized value size of " + where);
    }
}
