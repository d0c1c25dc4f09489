package dev.sluice.compat;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertInstanceOf;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.time.Duration;
import java.util.List;
import java.util.Map;
import java.util.concurrent.ExecutionException;
import java.util.concurrent.TimeUnit;
import org.apache.kafka.clients.admin.Admin;
import org.apache.kafka.clients.admin.AlterConfigOp;
import org.apache.kafka.clients.admin.Config;
import org.apache.kafka.clients.admin.ConfigEntry;
import org.apache.kafka.clients.admin.ConfigEntry.ConfigSource;
import org.apache.kafka.clients.admin.DescribeConfigsOptions;
import org.apache.kafka.common.config.ConfigResource;
import org.apache.kafka.common.errors.InvalidRequestException;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.extension.RegisterExtension;

/**
 * Dynamic broker configs through the Java AdminClient: incrementalAlterConfigs on the cluster
 * default and on broker 1, topics without an override following them at once, the sources
 * describeConfigs reports, refusals, and the values surviving a broker restart.
 */
class BrokerConfigsAdminTest {
    @RegisterExtension
    static final BrokerExtension BROKER = new BrokerExtension();

    static final ConfigResource DEFAULT = new ConfigResource(ConfigResource.Type.BROKER, "");
    static final ConfigResource NODE = new ConfigResource(ConfigResource.Type.BROKER, "1");

    static void alter(Admin admin, ConfigResource resource, AlterConfigOp.OpType op, String name, String value)
            throws Exception {
        admin.incrementalAlterConfigs(Map.of(resource, List.of(new AlterConfigOp(new ConfigEntry(name, value), op))))
                .all().get(30, TimeUnit.SECONDS);
    }

    static ConfigEntry entry(Admin admin, ConfigResource resource, String name) throws Exception {
        Config config = admin.describeConfigs(List.of(resource), new DescribeConfigsOptions().includeSynonyms(true))
                .all().get(30, TimeUnit.SECONDS).get(resource);
        ConfigEntry e = config.get(name);
        assertTrue(e != null, name + " missing from " + resource);
        return e;
    }

    static void awaitEntry(Admin admin, ConfigResource resource, String name, String value, ConfigSource source)
            throws InterruptedException {
        Wait.until(Duration.ofSeconds(30), resource + " " + name + "=" + value + " from " + source, () -> {
            try {
                ConfigEntry e = entry(admin, resource, name);
                return value.equals(e.value()) && e.source() == source;
            } catch (Exception ex) {
                throw new RuntimeException(ex);
            }
        });
    }

    @Test
    void dynamicBrokerDefaultsReachTopicsAndSurviveRestart() throws Exception {
        Broker broker = BROKER.controllable();
        Clients.createTopic(BROKER.bootstrap(), "dyn-follows", 1);
        ConfigResource topic = new ConfigResource(ConfigResource.Type.TOPIC, "dyn-follows");
        try (Admin admin = Clients.admin(BROKER.bootstrap())) {
            ConfigEntry before = entry(admin, topic, "retention.ms");
            assertEquals("604800000", before.value());
            assertEquals(ConfigSource.DEFAULT_CONFIG, before.source());

            alter(admin, DEFAULT, AlterConfigOp.OpType.SET, "log.retention.ms", "3600000");
            alter(admin, NODE, AlterConfigOp.OpType.SET, "log.segment.bytes", "2097152");
            awaitEntry(admin, topic, "retention.ms", "3600000", ConfigSource.DYNAMIC_DEFAULT_BROKER_CONFIG);
            awaitEntry(admin, topic, "segment.bytes", "2097152", ConfigSource.DYNAMIC_BROKER_CONFIG);
            awaitEntry(admin, NODE, "log.segment.bytes", "2097152", ConfigSource.DYNAMIC_BROKER_CONFIG);

            ExecutionException refused = assertThrows(ExecutionException.class,
                    () -> alter(admin, NODE, AlterConfigOp.OpType.SET, "num.partitions", "4"));
            assertInstanceOf(InvalidRequestException.class, refused.getCause());
            ExecutionException bad = assertThrows(ExecutionException.class,
                    () -> alter(admin, DEFAULT, AlterConfigOp.OpType.SET, "log.retention.ms", "soon"));
            assertInstanceOf(InvalidRequestException.class, bad.getCause());
            assertEquals("3600000", entry(admin, topic, "retention.ms").value(), "a refused change changes nothing");
        }

        broker.stop();
        broker.start();
        try (Admin admin = Clients.admin(BROKER.bootstrap())) {
            awaitEntry(admin, topic, "retention.ms", "3600000", ConfigSource.DYNAMIC_DEFAULT_BROKER_CONFIG);
            awaitEntry(admin, topic, "segment.bytes", "2097152", ConfigSource.DYNAMIC_BROKER_CONFIG);

            alter(admin, DEFAULT, AlterConfigOp.OpType.DELETE, "log.retention.ms", null);
            alter(admin, NODE, AlterConfigOp.OpType.DELETE, "log.segment.bytes", null);
            awaitEntry(admin, topic, "retention.ms", "604800000", ConfigSource.DEFAULT_CONFIG);
            awaitEntry(admin, topic, "segment.bytes", "1073741824", ConfigSource.DEFAULT_CONFIG);
        }
    }
}
