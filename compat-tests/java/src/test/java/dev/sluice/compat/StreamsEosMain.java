package dev.sluice.compat;

import java.nio.file.Path;
import java.time.Duration;
import java.util.Properties;
import java.util.concurrent.CountDownLatch;
import org.apache.kafka.clients.consumer.ConsumerConfig;
import org.apache.kafka.common.serialization.Serdes;
import org.apache.kafka.streams.KafkaStreams;
import org.apache.kafka.streams.StreamsBuilder;
import org.apache.kafka.streams.StreamsConfig;
import org.apache.kafka.streams.kstream.Consumed;
import org.apache.kafka.streams.kstream.Grouped;
import org.apache.kafka.streams.kstream.Materialized;
import org.apache.kafka.streams.kstream.Produced;
import org.apache.kafka.streams.state.Stores;

/**
 * One instance of the exactly-once Kafka Streams application of {@link StreamsExactlyOnceTest}, run
 * in its own JVM: {@code StreamsEosMain BOOTSTRAP APPLICATION_ID INPUT OUTPUT STATE_DIR GROUPS}.
 *
 * <p>Input records carry a number as their value. The application re-keys each by {@code number %
 * GROUPS} (a repartition topic), keeps per group the count and sum of the numbers seen in a state
 * store with a changelog, and emits every update as {@code "count,sum"} (record caches off, so
 * each input record yields exactly one output record). It prints {@code STATE RUNNING} whenever it
 * reaches that state, and runs until it is killed.
 */
public final class StreamsEosMain {
    private StreamsEosMain() {
    }

    public static void main(String[] args) throws Exception {
        String bootstrap = args[0];
        String applicationId = args[1];
        String input = args[2];
        String output = args[3];
        Path stateDir = Path.of(args[4]);
        long groups = Long.parseLong(args[5]);

        StreamsBuilder b = new StreamsBuilder();
        b.stream(input, Consumed.with(Serdes.String(), Serdes.String()))
                .selectKey((k, v) -> "g" + (Long.parseLong(v) % groups))
                .groupByKey(Grouped.with("regroup", Serdes.String(), Serdes.String()))
                .aggregate(() -> "0,0", (key, v, agg) -> {
                    String[] cs = agg.split(",");
                    return (Long.parseLong(cs[0]) + 1) + "," + (Long.parseLong(cs[1]) + Long.parseLong(v));
                }, Materialized.<String, String>as(Stores.inMemoryKeyValueStore("totals"))
                        .withKeySerde(Serdes.String()).withValueSerde(Serdes.String()))
                .toStream()
                .to(output, Produced.with(Serdes.String(), Serdes.String()));

        Properties p = new Properties();
        p.put(StreamsConfig.APPLICATION_ID_CONFIG, applicationId);
        p.put(StreamsConfig.BOOTSTRAP_SERVERS_CONFIG, bootstrap);
        p.put(StreamsConfig.PROCESSING_GUARANTEE_CONFIG, StreamsConfig.EXACTLY_ONCE_V2);
        p.put(StreamsConfig.STATE_DIR_CONFIG, stateDir.toString());
        p.put(StreamsConfig.NUM_STREAM_THREADS_CONFIG, 1);
        p.put(StreamsConfig.REPLICATION_FACTOR_CONFIG, 1);
        p.put(StreamsConfig.STATESTORE_CACHE_MAX_BYTES_CONFIG, 0);
        // A dead instance's partitions move after seconds, not the default 45 s.
        p.put(StreamsConfig.consumerPrefix(ConsumerConfig.SESSION_TIMEOUT_MS_CONFIG), 6000);
        p.put(StreamsConfig.consumerPrefix(ConsumerConfig.HEARTBEAT_INTERVAL_MS_CONFIG), 1000);
        p.put(StreamsConfig.consumerPrefix(ConsumerConfig.AUTO_OFFSET_RESET_CONFIG), "earliest");

        KafkaStreams streams = new KafkaStreams(b.build(), p);
        CountDownLatch dead = new CountDownLatch(1);
        streams.setStateListener((now, before) -> {
            System.out.println("STATE " + now);
            System.out.flush();
            if (now == KafkaStreams.State.ERROR || now == KafkaStreams.State.NOT_RUNNING) {
                dead.countDown();
            }
        });
        streams.setUncaughtExceptionHandler(e -> {
            System.out.println("UNCAUGHT " + e);
            e.printStackTrace(System.out);
            // Fatal for the test: a broken exactly-once run must not limp on with a new thread.
            return org.apache.kafka.streams.errors.StreamsUncaughtExceptionHandler.StreamThreadExceptionResponse.SHUTDOWN_CLIENT;
        });
        Runtime.getRuntime().addShutdownHook(new Thread(() -> streams.close(Duration.ofSeconds(10))));
        streams.start();
        dead.await();
        System.exit(1);
    }
}
