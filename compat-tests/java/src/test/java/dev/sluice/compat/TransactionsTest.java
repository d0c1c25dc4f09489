package dev.sluice.compat;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.time.Duration;
import java.util.ArrayList;
import java.util.HashMap;
import java.util.List;
import java.util.Map;
import java.util.TreeMap;
import java.util.concurrent.ExecutionException;
import java.util.concurrent.TimeUnit;
import org.apache.kafka.clients.admin.Admin;
import org.apache.kafka.clients.admin.TransactionDescription;
import org.apache.kafka.clients.admin.TransactionState;
import org.apache.kafka.clients.consumer.ConsumerConfig;
import org.apache.kafka.clients.consumer.ConsumerRecord;
import org.apache.kafka.clients.consumer.ConsumerRecords;
import org.apache.kafka.clients.consumer.KafkaConsumer;
import org.apache.kafka.clients.consumer.OffsetAndMetadata;
import org.apache.kafka.clients.producer.KafkaProducer;
import org.apache.kafka.clients.producer.ProducerConfig;
import org.apache.kafka.clients.producer.ProducerRecord;
import org.apache.kafka.common.TopicPartition;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.extension.RegisterExtension;

/**
 * The Java client's transactional producer, with the transaction protocol the broker advertises:
 * commits and aborts as read_committed and read_uncommitted consumers see them, record for record
 * and offset for offset; a consume-transform-produce loop with sendOffsetsToTransaction; a zombie
 * producer fenced by a newer one with the same transactional.id; a transaction the broker aborts
 * after transaction.timeout.ms. The broker checks for timed-out transactions every second.
 */
class TransactionsTest {
    @RegisterExtension
    static final BrokerExtension BROKER = new BrokerExtension(Map.of(
            "transaction.abort.timed.out.transaction.cleanup.interval.ms", "1000"));

    static final int PARTITIONS = 3;

    @Test
    void commitAndAbortAsEachIsolationLevelSeesThem() throws Exception {
        String topic = "txn-visibility";
        Clients.createTopic(BROKER.bootstrap(), topic, PARTITIONS);
        List<TopicPartition> tps = Clients.partitions(topic, PARTITIONS);
        List<String> committed = new ArrayList<>();
        List<String> all = new ArrayList<>();
        List<String> open = new ArrayList<>();
        try (KafkaProducer<byte[], byte[]> txn = Txn.producer(BROKER.bootstrap(), "visibility", Map.of());
             KafkaProducer<byte[], byte[]> plain = Clients.producer(BROKER.bootstrap(), Map.of())) {
            // committed, aborted, plain records in between, committed again
            String[] outcome = {"commit", "abort", "commit", "abort", "commit"};
            for (int t = 0; t < outcome.length; t++) {
                txn.beginTransaction();
                List<String> sent = new ArrayList<>();
                for (int i = 0; i < 12 + t; i++) {
                    sent.add(Txn.sendSync(txn, topic, (i + t) % PARTITIONS, "t" + t + "-" + outcome[t] + "-" + i));
                }
                if (outcome[t].equals("commit")) {
                    txn.commitTransaction();
                    committed.addAll(sent);
                } else {
                    txn.abortTransaction();
                }
                all.addAll(sent);
                for (int p = 0; p < PARTITIONS; p++) {
                    String r = Txn.sendSync(plain, topic, p, "plain-" + t + "-" + p);
                    committed.add(r);
                    all.add(r);
                }
            }
            // An open transaction: read_committed stops at its first record in each partition.
            txn.beginTransaction();
            for (int i = 0; i < 6; i++) {
                open.add(Txn.sendSync(txn, topic, i % PARTITIONS, "open-" + i));
            }
            Map<Integer, Long> lso = Txn.endOffsets(BROKER.bootstrap(), tps, Txn.READ_COMMITTED);
            Map<Integer, Long> hw = Txn.endOffsets(BROKER.bootstrap(), tps, Txn.READ_UNCOMMITTED);
            Map<Integer, List<String>> openBy = Txn.byPartition(open, PARTITIONS);
            for (int p = 0; p < PARTITIONS; p++) {
                assertEquals(Txn.offset(openBy.get(p).get(0)), lso.get(p), "last stable offset of partition " + p);
                assertEquals(Txn.offset(openBy.get(p).get(1)) + 1, hw.get(p), "high watermark of partition " + p);
            }
            assertEquals(Txn.byPartition(committed, PARTITIONS), Txn.readNow(BROKER.bootstrap(), tps, Txn.READ_COMMITTED),
                    "read_committed while a transaction is open");
            List<String> allSoFar = new ArrayList<>(all);
            allSoFar.addAll(open);
            assertEquals(Txn.byPartition(allSoFar, PARTITIONS), Txn.readNow(BROKER.bootstrap(), tps, Txn.READ_UNCOMMITTED),
                    "read_uncommitted sees aborted and open records too");
            txn.commitTransaction();
        }
        committed.addAll(open);
        all.addAll(open);
        Map<Integer, List<String>> wantCommitted = Txn.byPartition(committed, PARTITIONS);
        assertEquals(wantCommitted, Txn.read(BROKER.bootstrap(), tps, Txn.READ_COMMITTED), "read_committed");
        assertEquals(Txn.byPartition(all, PARTITIONS), Txn.read(BROKER.bootstrap(), tps, Txn.READ_UNCOMMITTED),
                "read_uncommitted");
        // Every transaction ends with a control record (marker) one offset past its last record in
        // each partition, so after the last commit both end offsets are the last marker + 1.
        Map<Integer, Long> lso = Txn.endOffsets(BROKER.bootstrap(), tps, Txn.READ_COMMITTED);
        Map<Integer, Long> hw = Txn.endOffsets(BROKER.bootstrap(), tps, Txn.READ_UNCOMMITTED);
        for (int p = 0; p < PARTITIONS; p++) {
            List<String> l = wantCommitted.get(p);
            assertEquals(Txn.offset(l.get(l.size() - 1)) + 2, hw.get(p), "high watermark after the last marker, partition " + p);
        }
        assertEquals(hw, lso, "no open transaction: last stable offset = high watermark");
    }

    @Test
    void consumeTransformProduceWithOffsetsInTheTransaction() throws Exception {
        String in = "ctp-in";
        String out = "ctp-out";
        String group = "ctp-group";
        int n = 600;
        Clients.createTopic(BROKER.bootstrap(), in, 2);
        Clients.createTopic(BROKER.bootstrap(), out, 2);
        try (KafkaProducer<byte[], byte[]> p = Clients.producer(BROKER.bootstrap(), Map.of())) {
            for (int i = 0; i < n; i++) {
                p.send(new ProducerRecord<>(in, i % 2, null, Txn.bytes("in-" + i)));
            }
            p.flush();
        }
        List<TopicPartition> inTps = Clients.partitions(in, 2);
        Map<String, Object> cc = Map.of(ConsumerConfig.GROUP_ID_CONFIG, group,
                ConsumerConfig.ENABLE_AUTO_COMMIT_CONFIG, false,
                ConsumerConfig.AUTO_OFFSET_RESET_CONFIG, "earliest",
                ConsumerConfig.ISOLATION_LEVEL_CONFIG, Txn.READ_COMMITTED,
                ConsumerConfig.MAX_POLL_RECORDS_CONFIG, 50);
        int transactions = 0;
        int aborted = 0;
        try (KafkaProducer<byte[], byte[]> txn = Txn.producer(BROKER.bootstrap(), "ctp", Map.of());
             KafkaConsumer<byte[], byte[]> c = Clients.consumer(BROKER.bootstrap(), cc);
             Admin admin = Clients.admin(BROKER.bootstrap())) {
            c.subscribe(List.of(in));
            long deadline = System.nanoTime() + TimeUnit.SECONDS.toNanos(120);
            while (!caughtUp(admin, group, inTps, n)) {
                assertTrue(System.nanoTime() < deadline, "the loop did not commit all " + n + " input offsets in 120 s");
                ConsumerRecords<byte[], byte[]> batch = c.poll(Duration.ofMillis(200));
                if (batch.isEmpty()) {
                    continue;
                }
                Map<TopicPartition, OffsetAndMetadata> next = new HashMap<>();
                txn.beginTransaction();
                for (ConsumerRecord<byte[], byte[]> r : batch) {
                    txn.send(new ProducerRecord<>(out, r.partition(), null, Txn.bytes("out-" + Txn.str(r.value()))));
                    next.put(new TopicPartition(r.topic(), r.partition()), new OffsetAndMetadata(r.offset() + 1));
                }
                txn.flush(); // the output is in the log, also that of the transactions aborted below
                txn.sendOffsetsToTransaction(next, c.groupMetadata());
                if (transactions++ % 4 == 1) {
                    // Abort every fourth: its output must vanish and its offsets must not be committed.
                    Map<TopicPartition, OffsetAndMetadata> before = committed(admin, group);
                    txn.abortTransaction();
                    aborted++;
                    assertEquals(before, committed(admin, group), "offsets after an aborted transaction");
                    for (TopicPartition tp : next.keySet()) {
                        OffsetAndMetadata o = before.get(tp);
                        c.seek(tp, o == null ? 0 : o.offset());
                    }
                } else {
                    txn.commitTransaction();
                    // The offsets become visible once the commit marker reaches __consumer_offsets.
                    Map<TopicPartition, Long> want = new HashMap<>();
                    next.forEach((tp, o) -> want.put(tp, o.offset()));
                    Wait.until(Duration.ofSeconds(15), () -> "offsets " + want + " committed with the transaction", () -> {
                        try {
                            Map<TopicPartition, OffsetAndMetadata> now = committed(admin, group);
                            return want.entrySet().stream().allMatch(e -> now.get(e.getKey()) != null
                                    && now.get(e.getKey()).offset() == e.getValue());
                        } catch (Exception e) {
                            return false;
                        }
                    });
                }
            }
        }
        assertTrue(aborted > 0, "no transaction was aborted");
        List<TopicPartition> outTps = Clients.partitions(out, 2);
        Map<Integer, List<String>> got = Txn.read(BROKER.bootstrap(), outTps, Txn.READ_COMMITTED);
        for (int p = 0; p < 2; p++) {
            List<String> want = new ArrayList<>();
            List<String> values = new ArrayList<>();
            for (int i = p; i < n; i += 2) {
                want.add("out-in-" + i);
            }
            got.get(p).forEach(r -> values.add(r.substring(r.indexOf('=') + 1)));
            assertEquals(want, values, "output partition " + p + ": each input exactly once, in order");
        }
        Map<Integer, List<String>> raw = Txn.read(BROKER.bootstrap(), outTps, Txn.READ_UNCOMMITTED);
        assertTrue(raw.get(0).size() + raw.get(1).size() > n, "read_uncommitted must also see the aborted output");
    }

    private static Map<TopicPartition, OffsetAndMetadata> committed(Admin admin, String group) throws Exception {
        Map<TopicPartition, OffsetAndMetadata> m = new HashMap<>(admin.listConsumerGroupOffsets(group)
                .partitionsToOffsetAndMetadata().get(30, TimeUnit.SECONDS));
        m.values().removeIf(o -> o == null);
        return m;
    }

    private static boolean caughtUp(Admin admin, String group, List<TopicPartition> tps, int n) throws Exception {
        Map<TopicPartition, OffsetAndMetadata> m = committed(admin, group);
        long sum = 0;
        for (TopicPartition tp : tps) {
            OffsetAndMetadata o = m.get(tp);
            sum += o == null ? 0 : o.offset();
        }
        return sum >= n;
    }

    @Test
    void aNewerProducerWithTheSameTransactionalIdFencesTheZombie() throws Exception {
        String topic = "txn-fencing";
        Clients.createTopic(BROKER.bootstrap(), topic, 1);
        List<TopicPartition> tps = Clients.partitions(topic, 1);
        List<String> committed = new ArrayList<>();
        try (KafkaProducer<byte[], byte[]> zombie = Txn.producer(BROKER.bootstrap(), "fenced", Map.of())) {
            zombie.beginTransaction();
            Txn.sendSync(zombie, topic, 0, "zombie-0");
            Txn.sendSync(zombie, topic, 0, "zombie-1");
            // The newer instance's initTransactions aborts the zombie's open transaction.
            try (KafkaProducer<byte[], byte[]> fresh = Txn.producer(BROKER.bootstrap(), "fenced", Map.of())) {
                fresh.beginTransaction();
                committed.add(Txn.sendSync(fresh, topic, 0, "fresh-0"));
                // What the zombie gets from each call, in order.
                List<String> got = List.of(
                        outcome(() -> zombie.send(new ProducerRecord<>(topic, 0, null, Txn.bytes("zombie-2"))).get(60, TimeUnit.SECONDS)),
                        outcome(zombie::commitTransaction),
                        outcome(zombie::abortTransaction),
                        outcome(zombie::beginTransaction));
                assertEquals(List.of("InvalidProducerEpochException", "InvalidProducerEpochException", "ProducerFencedException",
                        "ProducerFencedException"), got,
                        "the zombie's send, commit, abort, begin");
                committed.add(Txn.sendSync(fresh, topic, 0, "fresh-1"));
                fresh.commitTransaction();
            }
        }
        assertEquals(Txn.byPartition(committed, 1), Txn.read(BROKER.bootstrap(), tps, Txn.READ_COMMITTED));
        List<String> raw = new ArrayList<>();
        Txn.read(BROKER.bootstrap(), tps, Txn.READ_UNCOMMITTED).get(0).forEach(r -> raw.add(r.substring(r.indexOf('=') + 1)));
        assertEquals(List.of("zombie-0", "zombie-1", "fresh-0", "fresh-1"), raw, "read_uncommitted");
    }

    interface Call {
        void call() throws Exception;
    }

    /**
     * "ok", or the simple class name of what the call threw (for an ExecutionException, of its
     * cause), followed by its cause's class in parentheses if it has one.
     */
    static String outcome(Call c) {
        try {
            c.call();
            return "ok";
        } catch (ExecutionException e) {
            return name(e.getCause());
        } catch (Exception e) {
            return name(e);
        }
    }

    private static String name(Throwable t) {
        String n = t.getClass().getSimpleName();
        return t.getCause() == null ? n : n + "(" + t.getCause().getClass().getSimpleName() + ")";
    }

    @Test
    void aTransactionOverItsTimeoutIsAbortedByTheBroker() throws Exception {
        String topic = "txn-timeout";
        Clients.createTopic(BROKER.bootstrap(), topic, 1);
        List<TopicPartition> tps = Clients.partitions(topic, 1);
        List<String> committed = new ArrayList<>();
        try (KafkaProducer<byte[], byte[]> first = Txn.producer(BROKER.bootstrap(), "times-out",
                Map.of(ProducerConfig.TRANSACTION_TIMEOUT_CONFIG, 2000));
             Admin admin = Clients.admin(BROKER.bootstrap())) {
            first.beginTransaction();
            Txn.sendSync(first, topic, 0, "late-0");
            Txn.sendSync(first, topic, 0, "late-1");
            Wait.until(Duration.ofSeconds(30), "the broker to abort the timed-out transaction", () -> {
                try {
                    TransactionDescription d = admin.describeTransactions(List.of("times-out"))
                            .description("times-out").get(10, TimeUnit.SECONDS);
                    return d.state() == TransactionState.COMPLETE_ABORT;
                } catch (Exception e) {
                    return false;
                }
            });
            assertEquals(Map.of(0, List.of()), Txn.read(BROKER.bootstrap(), tps, Txn.READ_COMMITTED),
                    "read_committed after the timeout abort");
            List<String> got = List.of(
                    outcome(first::commitTransaction),
                    outcome(first::abortTransaction),
                    outcome(first::beginTransaction),
                    outcome(() -> first.send(new ProducerRecord<>(topic, 0, null, Txn.bytes("again-0"))).get(60, TimeUnit.SECONDS)),
                    outcome(first::commitTransaction));
            // Transaction version 2: the broker's abort bumped the epoch for the producer, whose
            // commit then finds no transaction; that is fatal for this producer (the client aborts
            // its batches "due to fatal error"). Version 1 (a client before 4.0): the abort bumped
            // the epoch past the producer's, which is fenced from then on.
            String fatal = "KafkaException(InvalidTxnStateException)";
            String fenced = "ProducerFencedException";
            List<String> expected = Txn.transactionVersion(admin) == 2
                    ? List.of("InvalidTxnStateException", fatal, fatal, fatal, fatal)
                    : List.of(fenced, fenced, fenced, fenced, fenced);
            assertEquals(expected, got, "commit after the timeout, then abort, begin, send, commit");
        }
        // A new instance of the same transactional.id goes on.
        try (KafkaProducer<byte[], byte[]> next = Txn.producer(BROKER.bootstrap(), "times-out", Map.of())) {
            next.beginTransaction();
            committed.add(Txn.sendSync(next, topic, 0, "next-0"));
            next.commitTransaction();
        }
        assertEquals(Txn.byPartition(committed, 1), Txn.read(BROKER.bootstrap(), tps, Txn.READ_COMMITTED));
        List<String> raw = new ArrayList<>();
        Txn.read(BROKER.bootstrap(), tps, Txn.READ_UNCOMMITTED).get(0).forEach(r -> raw.add(r.substring(r.indexOf('=') + 1)));
        assertEquals(List.of("late-0", "late-1", "next-0"), raw, "read_uncommitted");
    }
}
