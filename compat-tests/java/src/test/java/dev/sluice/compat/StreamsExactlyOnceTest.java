package dev.sluice.compat;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.io.IOException;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.time.Duration;
import java.util.ArrayList;
import java.util.HashMap;
import java.util.List;
import java.util.Map;
import java.util.TreeMap;
import java.util.concurrent.TimeUnit;
import org.apache.kafka.clients.admin.Admin;
import org.apache.kafka.clients.admin.NewTopic;
import org.apache.kafka.clients.consumer.ConsumerConfig;
import org.apache.kafka.clients.consumer.ConsumerRecord;
import org.apache.kafka.clients.consumer.KafkaConsumer;
import org.apache.kafka.clients.producer.KafkaProducer;
import org.apache.kafka.clients.producer.ProducerRecord;
import org.apache.kafka.common.TopicPartition;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.extension.RegisterExtension;

/**
 * A Kafka Streams application with {@code processing.guarantee=exactly_once_v2} ({@link
 * StreamsEosMain}: a repartition topic and a state store with a changelog), two instances in
 * child JVMs. While input flows, one instance is killed with SIGKILL. Its tasks move to the other
 * instance, which restores the store from the changelog and goes on; the killed instance's open
 * transaction is aborted when it times out. Read with read_committed, the output must then hold,
 * for every group, exactly one update per input record: counts 1, 2, ..., n in order and the
 * final sum of its numbers. A duplicate or a loss anywhere (input, repartition, changelog, output,
 * committed offsets) breaks that sequence.
 *
 * <p>Bounded for CI: {@value #RECORDS} input records, each wait with a deadline. The broker
 * checks for timed-out transactions every second.
 */
class StreamsExactlyOnceTest {
    @RegisterExtension
    static final BrokerExtension BROKER = new BrokerExtension(Map.of(
            "transaction.abort.timed.out.transaction.cleanup.interval.ms", "1000"));

    static final int RECORDS = Integer.getInteger("compat.streams.records", 6000);
    static final int GROUPS = 12;
    static final String APP = "eos-app";
    static final String INPUT = "eos-in";
    static final String OUTPUT = "eos-out";

    @Test
    void exactlyOnceOutputAfterOneOfTwoInstancesIsKilled() throws Exception {
        try (Admin admin = Clients.admin(BROKER.bootstrap())) {
            admin.createTopics(List.of(new NewTopic(INPUT, 4, (short) 1), new NewTopic(OUTPUT, 2, (short) 1)))
                    .all().get(30, TimeUnit.SECONDS);
            Clients.awaitLeaders(admin, INPUT, 4);
            Clients.awaitLeaders(admin, OUTPUT, 2);
        }
        Path work = Files.createTempDirectory("streams-eos-");
        List<Process> instances = new ArrayList<>();
        try (KafkaProducer<byte[], byte[]> input = Clients.producer(BROKER.bootstrap(), Map.of())) {
            for (int i = 0; i < 2; i++) {
                instances.add(start(work, i));
            }
            for (int i = 0; i < 2; i++) {
                awaitRunning(work, i, instances.get(i));
            }
            int half = RECORDS / 2;
            produce(input, 0, half);
            // Kill one instance once the application is well into the stream.
            awaitOutput(half / 3, Duration.ofSeconds(90));
            instances.get(0).destroyForcibly().waitFor(10, TimeUnit.SECONDS);
            Log.info("streams: killed instance 0 (SIGKILL) with %d output records committed", committedOutput().size());
            produce(input, half, RECORDS);
            awaitOutput(RECORDS, Duration.ofSeconds(150));
            Thread.sleep(3000); // any duplicate would be committed by now (commit interval 100 ms)

            List<String[]> out = committedOutput();
            Map<String, List<String>> byGroup = new TreeMap<>();
            for (String[] kv : out) {
                byGroup.computeIfAbsent(kv[0], k -> new ArrayList<>()).add(kv[1]);
            }
            Map<String, List<String>> want = new TreeMap<>();
            Map<String, Long> sums = new HashMap<>();
            Map<String, Long> counts = new HashMap<>();
            for (int v = 0; v < RECORDS; v++) {
                String g = "g" + (v % GROUPS);
                counts.merge(g, 1L, Long::sum);
                sums.merge(g, (long) v, Long::sum);
            }
            for (String g : counts.keySet()) {
                List<String> got = byGroup.getOrDefault(g, List.of());
                List<String> gotCounts = new ArrayList<>();
                got.forEach(s -> gotCounts.add(s.split(",")[0]));
                List<String> wantCounts = new ArrayList<>();
                for (long c = 1; c <= counts.get(g); c++) {
                    wantCounts.add(Long.toString(c));
                }
                assertEquals(wantCounts, gotCounts, "group " + g + ": one update per input record, in order");
                assertEquals(counts.get(g) + "," + sums.get(g), got.get(got.size() - 1), "group " + g + ": final count,sum");
            }
            assertEquals(counts.keySet(), byGroup.keySet());
            assertEquals(RECORDS, out.size());
            assertTrue(instances.get(1).isAlive(), "the surviving instance died; see " + work.resolve("instance-1.out"));
        } finally {
            for (Process p : instances) {
                p.destroyForcibly().waitFor(10, TimeUnit.SECONDS);
            }
            for (int i = 0; i < 2; i++) {
                Path log = work.resolve("instance-" + i + ".out");
                if (Files.exists(log)) {
                    System.out.println("===== streams instance " + i + " output (last 80 lines)\n" + Broker.tail(log, 80));
                }
            }
            BrokerExtension.deleteTree(work);
        }
    }

    private Process start(Path work, int i) throws IOException {
        Path state = Files.createDirectories(work.resolve("state-" + i));
        ProcessBuilder pb = JavaProcess.builder(StreamsEosMain.class.getName(),
                List.of(BROKER.bootstrap(), APP, INPUT, OUTPUT, state.toString(), Integer.toString(GROUPS)));
        pb.redirectErrorStream(true).redirectOutput(work.resolve("instance-" + i + ".out").toFile());
        return pb.start();
    }

    private void awaitRunning(Path work, int i, Process p) throws InterruptedException {
        Path log = work.resolve("instance-" + i + ".out");
        Wait.until(Duration.ofSeconds(90), () -> "streams instance " + i + " to reach RUNNING:\n" + Broker.tail(log, 30), () -> {
            if (!p.isAlive()) {
                throw new AssertionError("streams instance " + i + " exited with " + p.exitValue() + ":\n" + Broker.tail(log, 40));
            }
            try {
                return Files.readString(log, StandardCharsets.UTF_8).contains("STATE RUNNING");
            } catch (IOException e) {
                return false;
            }
        });
    }

    private void produce(KafkaProducer<byte[], byte[]> p, int from, int to) throws Exception {
        for (int v = from; v < to; v++) {
            p.send(new ProducerRecord<>(INPUT, ("k" + v).getBytes(StandardCharsets.UTF_8),
                    Integer.toString(v).getBytes(StandardCharsets.UTF_8)));
            if (v % 500 == 499) {
                p.flush();
                Thread.sleep(100); // a stream, not one burst
            }
        }
        p.flush();
    }

    private void awaitOutput(int n, Duration timeout) throws InterruptedException {
        int[] last = {0};
        Wait.until(timeout, () -> n + " committed output records; have " + last[0], () -> {
            try {
                last[0] = committedOutput().size();
                return last[0] >= n;
            } catch (InterruptedException e) {
                Thread.currentThread().interrupt();
                return false;
            }
        });
    }

    /** Every committed output record as {key, value}, partition by partition. */
    private List<String[]> committedOutput() throws InterruptedException {
        List<TopicPartition> tps = Clients.partitions(OUTPUT, 2);
        List<String[]> out = new ArrayList<>();
        try (KafkaConsumer<byte[], byte[]> c = Clients.consumer(BROKER.bootstrap(),
                Map.of(ConsumerConfig.ISOLATION_LEVEL_CONFIG, Txn.READ_COMMITTED))) {
            c.assign(tps);
            Map<TopicPartition, Long> end = c.endOffsets(tps, Clients.TIMEOUT);
            c.seekToBeginning(tps);
            long deadline = System.nanoTime() + Clients.TIMEOUT.toNanos();
            while (tps.stream().anyMatch(tp -> c.position(tp, Clients.TIMEOUT) < end.get(tp))) {
                if (System.nanoTime() > deadline) {
                    throw new AssertionError("reading " + OUTPUT + " did not reach " + end);
                }
                for (ConsumerRecord<byte[], byte[]> r : c.poll(Duration.ofMillis(200))) {
                    out.add(new String[] {Txn.str(r.key()), Txn.str(r.value())});
                }
            }
        }
        return out;
    }
}
