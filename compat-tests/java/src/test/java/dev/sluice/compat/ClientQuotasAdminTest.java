package dev.sluice.compat;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.time.Duration;
import java.util.ArrayList;
import java.util.HashMap;
import java.util.List;
import java.util.Map;
import java.util.concurrent.Future;
import java.util.concurrent.TimeUnit;
import org.apache.kafka.clients.admin.Admin;
import org.apache.kafka.clients.producer.KafkaProducer;
import org.apache.kafka.clients.producer.ProducerConfig;
import org.apache.kafka.clients.producer.ProducerRecord;
import org.apache.kafka.clients.producer.RecordMetadata;
import org.apache.kafka.common.Metric;
import org.apache.kafka.common.MetricName;
import org.apache.kafka.common.TopicPartition;
import org.apache.kafka.common.quota.ClientQuotaAlteration;
import org.apache.kafka.common.quota.ClientQuotaEntity;
import org.apache.kafka.common.quota.ClientQuotaFilter;
import org.apache.kafka.common.quota.ClientQuotaFilterComponent;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.extension.RegisterExtension;

/**
 * Client quotas through the Java AdminClient: alterClientQuotas on a client id and on the default
 * user, describeClientQuotas, a Java producer with that client id throttled at once (no restart
 * needed), the quotas still described and still enforced after a broker restart, and no throttling
 * once the quota is removed.
 *
 * <p>Kafka measures a byte rate over 11 one-second samples and never over less than 10 s, so a
 * client's first 10 s of quota pass unthrottled. Each burst below is 12 s of quota sent at once:
 * over the quota by about 2 s of it, so the broker answers with a throttle time of about 2 s.
 */
class ClientQuotasAdminTest {
    @RegisterExtension
    static final BrokerExtension BROKER = new BrokerExtension();

    static final double RATE_BYTES_PER_S = 512 * 1024;
    static final int VALUE_BYTES = 16 * 1024;
    static final int BURST_RECORDS = (int) (12 * RATE_BYTES_PER_S / VALUE_BYTES);
    /** Far above what the producer reaches here: a quota that describes, never throttles. */
    static final double USER_DEFAULT_CONSUMER_BYTES_PER_S = 1e9;

    static ClientQuotaEntity clientId(String name) {
        return new ClientQuotaEntity(Map.of(ClientQuotaEntity.CLIENT_ID, name));
    }

    static ClientQuotaEntity defaultUser() {
        Map<String, String> m = new HashMap<>();
        m.put(ClientQuotaEntity.USER, null); // null is the default entity
        return new ClientQuotaEntity(m);
    }

    static void alter(Admin admin, ClientQuotaEntity entity, String key, Double value) throws Exception {
        admin.alterClientQuotas(List.of(new ClientQuotaAlteration(entity,
                List.of(new ClientQuotaAlteration.Op(key, value)))))
                .all().get(30, TimeUnit.SECONDS);
    }

    static Map<ClientQuotaEntity, Map<String, Double>> describe(Admin admin, ClientQuotaFilterComponent c)
            throws Exception {
        return admin.describeClientQuotas(ClientQuotaFilter.containsOnly(List.of(c)))
                .entities().get(30, TimeUnit.SECONDS);
    }

    /** Waits for describeClientQuotas to show exactly these values for the entity (none: absent). */
    static void awaitDescribed(Admin admin, ClientQuotaFilterComponent filter, ClientQuotaEntity entity,
            Map<String, Double> values) throws InterruptedException {
        Map<ClientQuotaEntity, Map<String, Double>> expected = values.isEmpty() ? Map.of() : Map.of(entity, values);
        List<Object> last = new ArrayList<>(List.of("nothing yet"));
        Wait.until(Duration.ofSeconds(30), () -> filter + " described as " + expected + ", last " + last, () -> {
            try {
                Map<ClientQuotaEntity, Map<String, Double>> got = describe(admin, filter);
                last.set(0, got);
                return expected.equals(got);
            } catch (Exception e) {
                throw new RuntimeException(e);
            }
        });
    }

    /**
     * Sends one burst with a fresh producer under this client id and returns the largest
     * throttle time its produce responses carried (producer metric produce-throttle-time-max).
     */
    static double burstThrottleMs(String topic, String client) throws Exception {
        byte[] value = new byte[VALUE_BYTES];
        try (KafkaProducer<byte[], byte[]> p = Clients.producer(BROKER.bootstrap(), Map.of(
                ProducerConfig.CLIENT_ID_CONFIG, client,
                ProducerConfig.BATCH_SIZE_CONFIG, 256 * 1024,
                ProducerConfig.LINGER_MS_CONFIG, 5))) {
            List<Future<RecordMetadata>> sent = new ArrayList<>();
            long start = System.nanoTime();
            for (int i = 0; i < BURST_RECORDS; i++) {
                sent.add(p.send(new ProducerRecord<>(topic, 0, null, value)));
            }
            for (Future<RecordMetadata> f : sent) {
                f.get(60, TimeUnit.SECONDS);
            }
            double throttleMax = metric(p, "produce-throttle-time-max");
            Log.info("%s: %d records of %d B in %.1f s, produce-throttle-time-max %.0f ms, avg %.0f ms",
                    client, BURST_RECORDS, VALUE_BYTES, (System.nanoTime() - start) / 1e9, throttleMax,
                    metric(p, "produce-throttle-time-avg"));
            return throttleMax;
        }
    }

    static double metric(KafkaProducer<byte[], byte[]> p, String name) {
        for (Map.Entry<MetricName, ? extends Metric> e : p.metrics().entrySet()) {
            if (e.getKey().name().equals(name) && e.getKey().group().equals("producer-metrics")) {
                return ((Number) e.getValue().metricValue()).doubleValue();
            }
        }
        throw new AssertionError("producer metric " + name + " missing");
    }

    @Test
    void quotasTakeEffectAtOnceSurviveRestartAndAreRemoved() throws Exception {
        Broker broker = BROKER.broker();
        String topic = "quota-admin";
        String client = "quota-admin-producer";
        Clients.createTopic(BROKER.bootstrap(), topic, 1);
        ClientQuotaFilterComponent byClient = ClientQuotaFilterComponent.ofEntity(ClientQuotaEntity.CLIENT_ID, client);
        ClientQuotaFilterComponent byDefaultUser = ClientQuotaFilterComponent.ofDefaultEntity(ClientQuotaEntity.USER);
        Map<String, Double> clientQuota = Map.of("producer_byte_rate", RATE_BYTES_PER_S);
        Map<String, Double> userQuota = Map.of("consumer_byte_rate", USER_DEFAULT_CONSUMER_BYTES_PER_S);

        double unthrottled = burstThrottleMs(topic, client);
        assertEquals(0.0, unthrottled, "throttled before any quota was set");

        try (Admin admin = Clients.admin(BROKER.bootstrap())) {
            alter(admin, clientId(client), "producer_byte_rate", RATE_BYTES_PER_S);
            alter(admin, defaultUser(), "consumer_byte_rate", USER_DEFAULT_CONSUMER_BYTES_PER_S);
            awaitDescribed(admin, byClient, clientId(client), clientQuota);
            awaitDescribed(admin, byDefaultUser, defaultUser(), userQuota);
        }
        double before = burstThrottleMs(topic, client);
        assertTrue(before > 0, "no throttle without a restart: produce-throttle-time-max " + before);

        if (broker.controllable()) {
            broker.stop();
            broker.start();
            try (Admin admin = Clients.admin(BROKER.bootstrap())) {
                awaitDescribed(admin, byClient, clientId(client), clientQuota);
                awaitDescribed(admin, byDefaultUser, defaultUser(), userQuota);
                Clients.awaitLeaders(admin, topic, 1);
            }
            double after = burstThrottleMs(topic, client);
            assertTrue(after > 0, "the quota is described but not enforced after a restart: "
                    + "produce-throttle-time-max " + after);
        } else {
            Log.info("SKIPPED the restart half: %s broker at %s cannot be restarted by this harness",
                    broker.kind(), broker.bootstrap());
        }

        try (Admin admin = Clients.admin(BROKER.bootstrap())) {
            alter(admin, clientId(client), "producer_byte_rate", null);
            alter(admin, defaultUser(), "consumer_byte_rate", null);
            awaitDescribed(admin, byClient, clientId(client), Map.of());
            awaitDescribed(admin, byDefaultUser, defaultUser(), Map.of());
        }
        double removed = burstThrottleMs(topic, client);
        assertEquals(0.0, removed, "still throttled after the quota was removed");

        long expected = 4L * BURST_RECORDS - (broker.controllable() ? 0 : BURST_RECORDS);
        TopicPartition tp = new TopicPartition(topic, 0);
        assertEquals(expected, Clients.readAll(BROKER.bootstrap(), List.of(tp)).get(tp).size(),
                "every acknowledged record is there");
    }
}
