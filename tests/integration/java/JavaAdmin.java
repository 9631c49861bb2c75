import java.util.*;
import java.util.concurrent.ExecutionException;
import org.apache.kafka.clients.admin.*;
import org.apache.kafka.common.config.ConfigResource;

/** With the Java AdminClient: creates `topic` (3 partitions, replication factor 2, retention.ms set),
 * describes it and its configs, sets one config incrementally, grows it to 4 partitions, describes the
 * cluster, tries to create it again, and deletes it. Prints one `key=value` line per step. */
public class JavaAdmin {
    public static void main(String[] args) throws Exception {
        String bootstrap = args[0], topic = args[1];
        Properties p = new Properties();
        p.put("bootstrap.servers", bootstrap);
        p.put("request.timeout.ms", "15000");
        p.put("default.api.timeout.ms", "20000");
        try (Admin admin = Admin.create(p)) {
            NewTopic created = new NewTopic(topic, 3, (short) 2).configs(Map.of("retention.ms", "3600000"));
            CreateTopicsResult result = admin.createTopics(List.of(created));
            result.all().get();
            System.out.println("created=" + result.numPartitions(topic).get() + "/" + result.replicationFactor(topic).get()
                + " retention.ms=" + result.config(topic).get().get("retention.ms").value());
            waitForPartitions(admin, topic, 3);
            ConfigResource resource = new ConfigResource(ConfigResource.Type.TOPIC, topic);
            admin.incrementalAlterConfigs(Map.of(resource, List.of(new AlterConfigOp(
                new ConfigEntry("cleanup.policy", "compact"), AlterConfigOp.OpType.SET)))).all().get();
            Config config = admin.describeConfigs(List.of(resource)).all().get().get(resource);
            System.out.println("configs=" + config.get("retention.ms").value() + "," + config.get("cleanup.policy").value()
                + "," + config.get("retention.ms").source());
            admin.createPartitions(Map.of(topic, NewPartitions.increaseTo(4))).all().get();
            System.out.println("partitions=" + waitForPartitions(admin, topic, 4));
            DescribeClusterResult cluster = admin.describeCluster();
            int controller = cluster.controller().get().id();
            System.out.println("brokers=" + cluster.nodes().get().size() + " controller_listed="
                + cluster.nodes().get().stream().anyMatch(n -> n.id() == controller));
            try {
                admin.createTopics(List.of(new NewTopic(topic, 1, (short) 1))).all().get();
                System.out.println("again=created");
            } catch (ExecutionException e) {
                System.out.println("again=" + e.getCause().getClass().getSimpleName());
            }
            admin.deleteTopics(List.of(topic)).all().get();
            System.out.println("deleted=true");
        }
    }

    static int waitForPartitions(Admin admin, String topic, int partitions) throws Exception {
        long deadline = System.currentTimeMillis() + 20000;
        while (true) {
            try {
                int found = admin.describeTopics(List.of(topic)).allTopicNames().get().get(topic).partitions().size();
                if (found >= partitions || System.currentTimeMillis() > deadline) return found;
            } catch (ExecutionException e) {
                if (System.currentTimeMillis() > deadline) throw e;
            }
            Thread.sleep(100);
        }
    }
}
