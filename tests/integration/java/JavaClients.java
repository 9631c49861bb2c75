import java.time.Duration;
import java.util.*;
import org.apache.kafka.clients.consumer.*;
import org.apache.kafka.clients.producer.*;
import org.apache.kafka.common.TopicPartition;
import org.apache.kafka.common.serialization.*;

/** Produces `count` records with an idempotent acks=all producer, reads them back with an assigned
 * consumer, and prints how many were acknowledged, read, and read as acknowledged. */
public class JavaClients {
    public static void main(String[] args) throws Exception {
        String bootstrap = args[0], topic = args[1];
        int count = Integer.parseInt(args[2]);
        Properties p = new Properties();
        p.put("bootstrap.servers", bootstrap);
        p.put("acks", "all");
        p.put("enable.idempotence", "true");
        p.put("compression.type", args.length > 3 ? args[3] : "none");
        Map<String, Long> acked = new TreeMap<>();
        try (KafkaProducer<String, String> producer = new KafkaProducer<>(p, new StringSerializer(), new StringSerializer())) {
            List<java.util.concurrent.Future<RecordMetadata>> fs = new ArrayList<>();
            for (int i = 0; i < count; i++) fs.add(producer.send(new ProducerRecord<>(topic, "k" + i, "v" + i)));
            producer.flush();
            for (int i = 0; i < count; i++) { RecordMetadata md = fs.get(i).get(); acked.put(md.partition() + ":" + md.offset(), (long) i); }
        }
        Properties c = new Properties();
        c.put("bootstrap.servers", bootstrap);
        c.put("enable.auto.commit", "false");
        c.put("auto.offset.reset", "earliest");
        int read = 0, matched = 0;
        try (KafkaConsumer<String, String> consumer = new KafkaConsumer<>(c, new StringDeserializer(), new StringDeserializer())) {
            List<TopicPartition> tps = new ArrayList<>();
            consumer.partitionsFor(topic).forEach(pi -> tps.add(new TopicPartition(topic, pi.partition())));
            consumer.assign(tps);
            consumer.seekToBeginning(tps);
            long deadline = System.currentTimeMillis() + 20000;
            while (read < count && System.currentTimeMillis() < deadline) {
                for (ConsumerRecord<String, String> r : consumer.poll(Duration.ofMillis(500))) {
                    read++;
                    Long i = acked.get(r.partition() + ":" + r.offset());
                    if (i != null && r.value().equals("v" + i) && r.key().equals("k" + i)) matched++;
                }
            }
        }
        System.out.println("acknowledged=" + acked.size() + " read=" + read + " matched=" + matched);
    }
}
