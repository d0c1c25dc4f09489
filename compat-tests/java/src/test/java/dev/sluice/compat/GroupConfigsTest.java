package dev.sluice.compat;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertNotEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.time.Duration;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.Collection;
import java.util.List;
import java.util.Map;
import java.util.Set;
import java.util.concurrent.ExecutionException;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicBoolean;
import org.apache.kafka.clients.admin.Admin;
import org.apache.kafka.clients.admin.AlterConfigOp;
import org.apache.kafka.clients.admin.Config;
import org.apache.kafka.clients.admin.ConfigEntry;
import org.apache.kafka.clients.admin.ListConfigResourcesOptions;
import org.apache.kafka.common.config.ConfigResource;
import org.apache.kafka.common.errors.InvalidConfigurationException;
import org.junit.jupiter.api.Tag;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.extension.RegisterExtension;

/**
 * Group configs (KIP-848's GROUP config resource): {@code kafka-configs --entity-type groups}
 * sets, describes (with the broker settings behind each value) and deletes them, refuses values
 * outside the broker's {@code group.consumer.*} bounds (unknown names and the other refusals are
 * in the Rust socket tests), and the values survive a restart; the AdminClient sees the same. A group's {@code consumer.session.timeout.ms} is the one its
 * consumer-protocol members get: a SIGKILLed member's partitions move after the group's 6 s, not
 * the broker's 45 s. Tagged "tools" (kafka-configs needs the 4.4 client).
 */
@Tag("tools")
class GroupConfigsTest {
    /** Bounds that let a group go below the broker's default session timeout of 45 s. */
    @RegisterExtension
    static final BrokerExtension BROKER = new BrokerExtension(Map.of(
            "group.consumer.min.session.timeout.ms", "6000",
            "group.consumer.min.heartbeat.interval.ms", "1000"));

    static final Duration TOOL_TIMEOUT = Duration.ofSeconds(90);
    static final String CONFIGS = "org.apache.kafka.tools.ConfigCommand";
    static final int GROUP_SESSION_MS = 6000;

    static JavaProcess.Result configs(String... args) throws Exception {
        List<String> all = new ArrayList<>(List.of("--bootstrap-server", BROKER.bootstrap(), "--entity-type", "groups"));
        all.addAll(Arrays.asList(args));
        return JavaProcess.run(TOOL_TIMEOUT, null, CONFIGS, all.toArray(String[]::new));
    }

    static String ok(String... args) throws Exception {
        JavaProcess.Result r = configs(args);
        assertEquals(0, r.exit(), "kafka-configs failed: " + r);
        return r.out();
    }

    @Test
    void kafkaConfigsSetsDescribesAndDeletesGroupConfigsThatSurviveRestart() throws Exception {
        String group = "configured";
        assertTrue(ok("--describe", "--entity-name", group).contains("The group '" + group + "' doesn't exist and doesn't have dynamic config."));

        String out = ok("--alter", "--entity-name", group, "--add-config",
                "consumer.session.timeout.ms=20000,consumer.heartbeat.interval.ms=2000");
        assertTrue(out.contains("Completed updating config for group " + group + "."), out);
        String described = ok("--describe", "--entity-name", group);
        assertTrue(described.contains("Dynamic configs for group " + group + " are:"), described);
        assertTrue(described.contains("consumer.session.timeout.ms=20000 sensitive=false synonyms={DYNAMIC_GROUP_CONFIG:consumer.session.timeout.ms=20000, DEFAULT_CONFIG:group.consumer.session.timeout.ms=45000}"), described);
        assertTrue(described.contains("consumer.heartbeat.interval.ms=2000 sensitive=false synonyms={DYNAMIC_GROUP_CONFIG:consumer.heartbeat.interval.ms=2000, DEFAULT_CONFIG:group.consumer.heartbeat.interval.ms=5000}"), described);
        assertEquals(2, described.lines().filter(l -> l.startsWith("  ")).count(), described);
        String all = ok("--describe", "--entity-name", group, "--all");
        for (String line : List.of("consumer.assignment.interval.ms=1000 ", "share.auto.offset.reset=latest ",
                "streams.num.standby.replicas=0 ", "errors.deadletterqueue.topic.name= ")) {
            assertTrue(all.contains(line), line + " missing from:\n" + all);
        }

        // Refused with the broker's bounds, and nothing changes.
        JavaProcess.Result refused = configs("--alter", "--entity-name", group, "--add-config", "consumer.session.timeout.ms=5000");
        assertNotEquals(0, refused.exit(), refused.toString());
        assertTrue(refused.err().contains("InvalidConfigurationException: consumer.session.timeout.ms must be in the range 6000 to 60000 inclusive."), refused.toString());
        assertEquals(described, ok("--describe", "--entity-name", group));

        // The AdminClient sees the same, and lists the group among those with configs.
        ConfigResource resource = new ConfigResource(ConfigResource.Type.GROUP, group);
        try (Admin admin = Clients.admin(BROKER.bootstrap())) {
            Config config = admin.describeConfigs(List.of(resource)).all().get(30, TimeUnit.SECONDS).get(resource);
            ConfigEntry session = config.get("consumer.session.timeout.ms");
            assertEquals("20000", session.value());
            assertEquals(ConfigEntry.ConfigSource.DYNAMIC_GROUP_CONFIG, session.source());
            assertEquals(ConfigEntry.ConfigSource.DEFAULT_CONFIG, config.get("consumer.assignment.interval.ms").source());
            Collection<ConfigResource> listed = admin.listConfigResources(Set.of(ConfigResource.Type.GROUP),
                    new ListConfigResourcesOptions()).all().get(30, TimeUnit.SECONDS);
            assertTrue(listed.contains(resource), listed.toString());
            ExecutionException e = org.junit.jupiter.api.Assertions.assertThrows(ExecutionException.class, () ->
                    admin.incrementalAlterConfigs(Map.of(resource, List.of(new AlterConfigOp(
                            new ConfigEntry("consumer.heartbeat.interval.ms", "20000"), AlterConfigOp.OpType.SET))))
                            .all().get(30, TimeUnit.SECONDS));
            assertTrue(e.getCause() instanceof InvalidConfigurationException, e.toString());
            assertEquals("consumer.heartbeat.interval.ms must be in the range 1000 to 15000 inclusive.", e.getCause().getMessage());
        }

        Broker broker = BROKER.controllable();
        broker.stop();
        broker.start();
        assertEquals(described, ok("--describe", "--entity-name", group), "after a restart");

        assertTrue(ok("--alter", "--entity-name", group, "--delete-config", "consumer.heartbeat.interval.ms,consumer.session.timeout.ms")
                .contains("Completed updating config for group " + group + "."));
        assertTrue(ok("--describe", "--entity-name", group).contains("doesn't exist and doesn't have dynamic config"));
    }

    @Test
    void aGroupsSessionTimeoutIsTheOneItsConsumerProtocolMembersGet() throws Exception {
        String bootstrap = BROKER.bootstrap();
        String topic = "group-configs-session";
        String group = "short-session";
        int partitions = ConsumerGroupTest.PARTITIONS;
        Clients.createTopic(bootstrap, topic, partitions);
        ok("--alter", "--entity-name", group, "--add-config",
                "consumer.session.timeout.ms=" + GROUP_SESSION_MS + ",consumer.heartbeat.interval.ms=1000");
        Ledger ledger = new Ledger();
        AtomicBoolean producing = new AtomicBoolean(true);
        Thread producer = new Thread(() -> ConsumerGroupTest.produce(bootstrap, topic, ledger, producing), "producer");
        String assignor = GroupMember.CONSUMER_PROTOCOL + "uniform";
        try (GroupMember a = GroupMember.inProcess("A", ledger, bootstrap, topic, group, assignor);
             GroupMember.Child c = GroupMember.child("C", ledger, bootstrap, topic, group, assignor)) {
            producer.start();
            ConsumerGroupTest.settled(List.of(a, c), "A and C to share the partitions");
            Wait.until(ConsumerGroupTest.SETTLE, "the child member to process a record",
                    () -> ledger.history.stream().anyMatch(p -> p.member().equals("C")));
            c.crash();
            long killed = System.nanoTime();
            ConsumerGroupTest.settled(List.of(a), "A to take over the crashed member's partitions");
            long movedMs = ConsumerGroupTest.ms(killed) - ConsumerGroupTest.SETTLE_CHECK.toMillis();
            Log.info("partitions moved %d ms after the SIGKILL (group session %d ms, broker default 45000 ms)",
                    movedMs, GROUP_SESSION_MS);
            assertTrue(movedMs >= GROUP_SESSION_MS - 1500, "moved before the group's session could end: " + movedMs + " ms");
            assertTrue(movedMs < 30_000, "the broker's 45 s session timeout applied, not the group's: " + movedMs + " ms");
            producing.set(false);
            producer.join(60_000);
            Wait.until(ConsumerGroupTest.SETTLE, () -> "every record to be processed; missing " + ConsumerGroupTest.sample(ledger.missing()),
                    () -> ledger.missing().isEmpty());
            assertEquals(List.of(), ledger.wrong());
        } finally {
            producing.set(false);
        }
    }
}
