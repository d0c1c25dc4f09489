package dev.sluice.compat;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.nio.file.Files;
import java.nio.file.Path;
import java.time.Duration;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.Collection;
import java.util.List;
import java.util.Map;
import java.util.OptionalLong;
import java.util.Set;
import java.util.concurrent.ExecutionException;
import java.util.concurrent.TimeUnit;
import java.util.stream.Collectors;
import org.apache.kafka.clients.admin.Admin;
import org.apache.kafka.clients.admin.ListTransactionsOptions;
import org.apache.kafka.clients.admin.ProducerState;
import org.apache.kafka.clients.admin.TransactionDescription;
import org.apache.kafka.clients.admin.TransactionListing;
import org.apache.kafka.clients.admin.TransactionState;
import org.apache.kafka.clients.producer.KafkaProducer;
import org.apache.kafka.clients.producer.ProducerConfig;
import org.apache.kafka.clients.producer.ProducerRecord;
import org.apache.kafka.clients.producer.RecordMetadata;
import org.apache.kafka.common.TopicPartition;
import org.apache.kafka.common.errors.TransactionalIdNotFoundException;
import org.apache.kafka.common.utils.Utils;
import org.junit.jupiter.api.Tag;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.extension.RegisterExtension;

/**
 * Transactions as administrators see them: AdminClient listTransactions, describeTransactions and
 * describeProducers on an ongoing and then a committed transaction, and Kafka's
 * {@code kafka-transactions} tool (list, describe, describe-producers, find-hanging, abort). A
 * hanging transaction is made the way one arises in practice: the coordinator loses its state
 * (the segments of its {@code __transaction_state} partition are deleted while the broker is
 * down) while a data partition still holds the transaction's records without a marker.
 */
class TransactionsAdminTest {
    @RegisterExtension
    static final BrokerExtension BROKER = new BrokerExtension();

    static final String TOOL = "org.apache.kafka.tools.TransactionsCommand";
    static final Duration TOOL_TIMEOUT = Duration.ofSeconds(90);
    static final long HOUR_MS = 3_600_000L;

    @Test
    void adminClientListsAndDescribesTransactionsAndProducers() throws Exception {
        String topic = "txn-admin";
        String id = "admin-txn";
        Clients.createTopic(BROKER.bootstrap(), topic, 2);
        List<TopicPartition> tps = Clients.partitions(topic, 2);
        long ts = System.currentTimeMillis() - HOUR_MS;
        try (Admin admin = Clients.admin(BROKER.bootstrap());
             KafkaProducer<byte[], byte[]> p = Txn.producer(BROKER.bootstrap(), id,
                     Map.of(ProducerConfig.TRANSACTION_TIMEOUT_CONFIG, 45_000))) {
            int node = admin.describeCluster().nodes().get(30, TimeUnit.SECONDS).iterator().next().id();
            assertThrows(TransactionalIdNotFoundException.class, () -> unwrap(() ->
                    admin.describeTransactions(List.of("no-such-id")).description("no-such-id").get(30, TimeUnit.SECONDS)));
            long before = System.currentTimeMillis();
            p.beginTransaction();
            long[] first = new long[2];
            for (int i = 0; i < 5; i++) {
                for (int part = 0; part < 2; part++) {
                    RecordMetadata m = p.send(new ProducerRecord<>(topic, part, ts + i, null, Txn.bytes("v" + i))).get(60, TimeUnit.SECONDS);
                    if (i == 0) {
                        first[part] = m.offset();
                    }
                }
            }
            long after = System.currentTimeMillis();

            TransactionDescription d = describe(admin, id);
            assertEquals(TransactionState.ONGOING, d.state());
            assertEquals(node, d.coordinatorId());
            assertEquals(45_000, d.transactionTimeoutMs());
            assertEquals(Set.copyOf(tps), d.topicPartitions());
            long started = d.transactionStartTimeMs().orElseThrow();
            assertTrue(started >= before - 1000 && started <= after + 1000, "start time " + started + " not in [" + before + ", " + after + "]");
            long pid = d.producerId();
            short epoch = (short) d.producerEpoch();

            assertEquals(List.of(new TransactionListing(id, pid, TransactionState.ONGOING)), listings(admin, new ListTransactionsOptions(), id));
            assertEquals(List.of(new TransactionListing(id, pid, TransactionState.ONGOING)),
                    listings(admin, new ListTransactionsOptions().filterStates(List.of(TransactionState.ONGOING)), id));
            assertEquals(List.of(), listings(admin, new ListTransactionsOptions().filterStates(List.of(TransactionState.COMPLETE_COMMIT)), id));
            assertEquals(List.of(new TransactionListing(id, pid, TransactionState.ONGOING)),
                    listings(admin, new ListTransactionsOptions().filterProducerIds(Set.of(pid))));
            assertEquals(List.of(), listings(admin, new ListTransactionsOptions().filterProducerIds(Set.of(pid + 1000))));

            for (int part = 0; part < 2; part++) {
                ProducerState s = onlyProducer(admin, tps.get(part));
                assertEquals(pid, s.producerId());
                assertEquals(epoch, s.producerEpoch());
                assertEquals(4, s.lastSequence(), "last sequence of " + tps.get(part));
                assertEquals(ts + 4, s.lastTimestamp(), "last timestamp of " + tps.get(part));
                assertEquals(OptionalLong.of(first[part]), s.currentTransactionStartOffset(), "transaction start of " + tps.get(part));
            }

            p.commitTransaction();
            // EndTxn is answered before the markers are written (PrepareCommit), then CompleteCommit.
            Wait.until(Duration.ofSeconds(15), "CompleteCommit", () -> {
                try {
                    return describe(admin, id).state() == TransactionState.COMPLETE_COMMIT;
                } catch (Exception e) {
                    return false;
                }
            });
            TransactionDescription done = describe(admin, id);
            assertEquals(Set.of(), done.topicPartitions());
            assertEquals(pid, done.producerId());
            assertEquals(List.of(), listings(admin, new ListTransactionsOptions().filterStates(List.of(TransactionState.ONGOING)), id));
            assertEquals(List.of(new TransactionListing(id, pid, TransactionState.COMPLETE_COMMIT)),
                    listings(admin, new ListTransactionsOptions().filterStates(List.of(TransactionState.COMPLETE_COMMIT)), id));
            assertEquals(List.of(new TransactionListing(id, pid, TransactionState.COMPLETE_COMMIT)),
                    listings(admin, new ListTransactionsOptions().filterProducerIds(Set.of(pid))));
            for (TopicPartition tp : tps) {
                ProducerState s = onlyProducer(admin, tp);
                assertEquals(pid, s.producerId());
                assertEquals(OptionalLong.empty(), s.currentTransactionStartOffset(), "no open transaction on " + tp);
                assertEquals(done.producerEpoch(), s.producerEpoch(), "epoch of the commit marker on " + tp);
            }
        }
    }

    @Test
    @Tag("tools")
    void kafkaTransactionsToolListsDescribesAndDescribesProducers() throws Exception {
        String topic = "txn-cli";
        String id = "cli-txn";
        Clients.createTopic(BROKER.bootstrap(), topic, 1);
        long ts = System.currentTimeMillis() - HOUR_MS;
        try (Admin admin = Clients.admin(BROKER.bootstrap());
             KafkaProducer<byte[], byte[]> p = Txn.producer(BROKER.bootstrap(), id, Map.of())) {
            int node = admin.describeCluster().nodes().get(30, TimeUnit.SECONDS).iterator().next().id();
            p.beginTransaction();
            long start = -1;
            for (int i = 0; i < 3; i++) {
                RecordMetadata m = p.send(new ProducerRecord<>(topic, 0, ts, null, Txn.bytes("c" + i))).get(60, TimeUnit.SECONDS);
                start = i == 0 ? m.offset() : start;
            }
            TransactionDescription d = describe(admin, id);

            List<List<String>> list = table(ok("list"));
            assertEquals(List.of("TransactionalId", "Coordinator", "ProducerId", "TransactionState"), list.get(0));
            assertTrue(list.contains(List.of(id, Integer.toString(node), Long.toString(d.producerId()), "Ongoing")), "list: " + list);

            List<List<String>> desc = table(ok("describe", "--transactional-id", id));
            assertEquals(List.of("CoordinatorId", "TransactionalId", "ProducerId", "ProducerEpoch", "TransactionState",
                    "TransactionTimeoutMs", "CurrentTransactionStartTimeMs", "TransactionDurationMs", "TopicPartitions"), desc.get(0));
            List<String> row = desc.get(1);
            assertEquals(List.of(Integer.toString(node), id, Long.toString(d.producerId()), Integer.toString(d.producerEpoch()),
                    "Ongoing", "60000", Long.toString(d.transactionStartTimeMs().orElseThrow())), row.subList(0, 7));
            assertEquals(topic + "-0", row.get(8));

            List<List<String>> producers = table(ok("describe-producers", "--topic", topic, "--partition", "0"));
            assertEquals(List.of(List.of("ProducerId", "ProducerEpoch", "LatestCoordinatorEpoch", "LastSequence", "LastTimestamp",
                    "CurrentTransactionStartOffset"), List.of(Long.toString(d.producerId()), Integer.toString(d.producerEpoch()),
                    "-1", "2", Long.toString(ts), Long.toString(start))), producers);

            // The coordinator knows this transaction and the partition: it is old but not hanging.
            assertEquals(List.of(FIND_HANGING_HEADERS), table(ok("find-hanging", "--topic", topic)));

            JavaProcess.Result missing = tool("describe", "--transactional-id", "no-such-txn");
            assertEquals(1, missing.exit(), missing.toString());
            assertTrue(missing.err().contains("Failed to describe transaction state of transactional-id `no-such-txn`: "
                    + "DescribeTransactions request for transactionalId `no-such-txn` failed because the ID could not be found."),
                    missing.toString());
            p.abortTransaction();
        }
    }

    static final List<String> FIND_HANGING_HEADERS = List.of("Topic", "Partition", "ProducerId", "ProducerEpoch",
            "CoordinatorEpoch", "StartOffset", "LastTimestamp", "Duration(min)");

    @Test
    @Tag("tools")
    void kafkaTransactionsToolFindsAndAbortsAHangingTransaction() throws Exception {
        Broker broker = BROKER.controllable();
        String topic = "txn-hanging";
        String id = "hanging-txn";
        Clients.createTopic(BROKER.bootstrap(), topic, 1);
        List<TopicPartition> tps = Clients.partitions(topic, 1);
        long old = System.currentTimeMillis() - HOUR_MS;
        List<String> visible = new ArrayList<>();
        List<String> all = new ArrayList<>();
        long pid;
        short epoch;
        long start;
        try (Admin admin = Clients.admin(BROKER.bootstrap());
             KafkaProducer<byte[], byte[]> p = Txn.producer(BROKER.bootstrap(), id, Map.of())) {
            p.beginTransaction();
            visible.add(Txn.sendSync(p, topic, 0, "before-0"));
            p.commitTransaction();
            p.beginTransaction();
            start = -1;
            for (int i = 0; i < 3; i++) {
                RecordMetadata m = p.send(new ProducerRecord<>(topic, 0, old, null, Txn.bytes("hang-" + i))).get(60, TimeUnit.SECONDS);
                all.add("0/" + m.offset() + "=hang-" + i);
                start = i == 0 ? m.offset() : start;
            }
            TransactionDescription d = describe(admin, id);
            pid = d.producerId();
            epoch = (short) d.producerEpoch();
            p.close(Duration.ZERO); // leaves the transaction open
        }
        all.add(0, visible.get(0));
        // The coordinator loses the transaction: the segments of its __transaction_state partition
        // are deleted while the broker is down (the partition's directory stays). The data
        // partition keeps the open transaction.
        int coordinatorPartition = Utils.abs(id.hashCode()) % 50;
        broker.stop();
        Path state = broker.root().resolve("data").resolve("__transaction_state-" + coordinatorPartition);
        assertTrue(Files.isDirectory(state), state + " is where the broker keeps the coordinator's state");
        List<Path> segmentFiles;
        try (var files = Files.list(state)) {
            segmentFiles = files.filter(f -> f.getFileName().toString().matches("\\d{20}\\..*")).collect(Collectors.toList());
        }
        assertTrue(segmentFiles.stream().anyMatch(f -> f.toString().endsWith(".log")), "segments in " + state + ": " + segmentFiles);
        for (Path f : segmentFiles) {
            Files.delete(f);
        }
        broker.start();

        try (KafkaProducer<byte[], byte[]> plain = Clients.producer(BROKER.bootstrap(), Map.of())) {
            String after = Txn.sendSync(plain, topic, 0, "after-0");
            all.add(after);
            visible.add(after);
        }
        assertEquals(Map.of(0, List.of(visible.get(0))), Txn.readNow(BROKER.bootstrap(), tps, Txn.READ_COMMITTED),
                "read_committed stops at the hanging transaction");
        List<List<String>> list = table(ok("list"));
        assertTrue(list.stream().noneMatch(r -> r.get(0).equals(id)), "the coordinator lost " + id + ": " + list);

        List<List<String>> hanging = table(ok("find-hanging", "--topic", topic));
        assertEquals(FIND_HANGING_HEADERS, hanging.get(0));
        assertEquals(2, hanging.size(), "find-hanging: " + hanging);
        assertEquals(List.of(topic, "0", Long.toString(pid), Integer.toString(epoch), "0", Long.toString(start), Long.toString(old)),
                hanging.get(1).subList(0, 7));
        assertTrue(Long.parseLong(hanging.get(1).get(7)) >= 59, "duration in minutes: " + hanging.get(1));

        JavaProcess.Result wrong = tool("abort", "--topic", topic, "--partition", "0", "--start-offset", Long.toString(start + 1));
        assertEquals(1, wrong.exit(), wrong.toString());
        assertTrue(wrong.err().contains("Could not find any open transactions starting at offset " + (start + 1)
                + " on partition " + topic + "-0"), wrong.toString());

        ok("abort", "--topic", topic, "--partition", "0", "--start-offset", Long.toString(start));
        assertEquals(List.of(FIND_HANGING_HEADERS), table(ok("find-hanging", "--topic", topic)));
        assertEquals(Txn.byPartition(visible, 1), Txn.read(BROKER.bootstrap(), tps, Txn.READ_COMMITTED),
                "read_committed after the abort");
        assertEquals(Txn.byPartition(all, 1), Txn.read(BROKER.bootstrap(), tps, Txn.READ_UNCOMMITTED), "read_uncommitted");
        List<List<String>> producers = table(ok("describe-producers", "--topic", topic, "--partition", "0"));
        List<String> mine = producers.stream().filter(r -> r.get(0).equals(Long.toString(pid))).findFirst().orElseThrow();
        assertEquals("None", mine.get(5), "no open transaction left: " + producers);
    }

    // ---------------------------------------------------------------------------------------------

    static JavaProcess.Result tool(String... args) throws Exception {
        List<String> all = new ArrayList<>(List.of("--bootstrap-server", BROKER.bootstrap()));
        all.addAll(Arrays.asList(args));
        return JavaProcess.run(TOOL_TIMEOUT, null, TOOL, all.toArray(String[]::new));
    }

    static String ok(String... args) throws Exception {
        JavaProcess.Result r = tool(args);
        assertEquals(0, r.exit(), "kafka-transactions failed: " + r);
        return r.out();
    }

    /** The tool's tab-separated table: one list of trimmed cells per non-empty line. */
    static List<List<String>> table(String out) {
        return out.lines().filter(l -> !l.isBlank())
                .map(l -> Arrays.stream(l.split("\t")).map(String::strip).collect(Collectors.toList()))
                .collect(Collectors.toList());
    }

    static TransactionDescription describe(Admin admin, String id) throws Exception {
        return admin.describeTransactions(List.of(id)).description(id).get(30, TimeUnit.SECONDS);
    }

    /** The listings ListTransactions returns with these filters, those of other ids than `id` left out. */
    static List<TransactionListing> listings(Admin admin, ListTransactionsOptions o, String id) throws Exception {
        Collection<TransactionListing> l = admin.listTransactions(o).all().get(30, TimeUnit.SECONDS);
        return l.stream().filter(t -> t.transactionalId().equals(id)).collect(Collectors.toList());
    }

    static List<TransactionListing> listings(Admin admin, ListTransactionsOptions o) throws Exception {
        return new ArrayList<>(admin.listTransactions(o).all().get(30, TimeUnit.SECONDS));
    }

    static ProducerState onlyProducer(Admin admin, TopicPartition tp) throws Exception {
        List<ProducerState> l = admin.describeProducers(List.of(tp)).partitionResult(tp).get(30, TimeUnit.SECONDS).activeProducers();
        assertEquals(1, l.size(), "active producers of " + tp + ": " + l);
        return l.get(0);
    }

    interface Call {
        Object call() throws Exception;
    }

    static void unwrap(Call c) throws Throwable {
        try {
            c.call();
        } catch (ExecutionException e) {
            throw e.getCause();
        }
    }
}
