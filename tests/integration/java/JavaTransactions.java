import java.time.Duration;
import java.util.*;
import org.apache.kafka.clients.consumer.*;
import org.apache.kafka.clients.producer.*;
import org.apache.kafka.common.TopicPartition;
import org.apache.kafka.common.serialization.*;

/** A transactional producer commits `count` records with the offset 7 of group `group` on
 * partition 0, then aborts `count` more; a read_committed consumer reads the topic back. Prints
 * how many records it read, how many of them the aborted transaction wrote, and the group's
 * committed offset. */
public class JavaTransactions {
    public static void main(String[] args) throws Exception {
        String bootstrap = args[0], topic = args[1], transactionalId = args[2], group = args[3];
        int count = Integer.parseInt(args[4]);
        long started = System.currentTimeMillis();
        Properties p = new Properties();
        p.put("bootstrap.servers", bootstrap);
        p.put("transactional.id", transactionalId);
        p.put("transaction.timeout.ms", "20000");
        try (KafkaProducer<String, String> producer = new KafkaProducer<>(p, new StringSerializer(), new StringSerializer())) {
            producer.initTransactions();
            producer.beginTransaction();
            for (int i = 0; i < count; i++) producer.send(new ProducerRecord<>(topic, 0, "k" + i, "committed-" + i));
            producer.sendOffsetsToTransaction(Map.of(new TopicPartition(topic, 0), new OffsetAndMetadata(7)),
                                              new ConsumerGroupMetadata(group));
            producer.commitTransaction();
            producer.beginTransaction();
            for (int i = 0; i < count; i++) producer.send(new ProducerRecord<>(topic, 0, "k" + i, "aborted-" + i));
            producer.flush();
            producer.abortTransaction();
        }
        long produced = System.currentTimeMillis();
        Properties c = new Properties();
        c.put("bootstrap.servers", bootstrap);
        c.put("group.id", group);
        c.put("enable.auto.commit", "false");
        c.put("isolation.level", "read_committed");
        int read = 0, aborted = 0;
        long committed;
        try (KafkaConsumer<String, String> consumer = new KafkaConsumer<>(c, new StringDeserializer(), new StringDeserializer())) {
            TopicPartition tp = new TopicPartition(topic, 0);
            committed = consumer.committed(Set.of(tp)).get(tp).offset();
            consumer.assign(List.of(tp));
            consumer.seekToBeginning(List.of(tp));
            long end = consumer.endOffsets(List.of(tp)).get(tp);
            long deadline = System.currentTimeMillis() + 20000;
            while (consumer.position(tp) < end && System.currentTimeMillis() < deadline) {
                for (ConsumerRecord<String, String> r : consumer.poll(Duration.ofMillis(500))) {
                    read++;
                    if (r.value().startsWith("aborted-")) aborted++;
                }
            }
        }
        System.err.println("produce_ms=" + (produced - started) + " consume_ms=" + (System.currentTimeMillis() - produced));
        System.out.println("read=" + read + " aborted=" + aborted + " committed_offset=" + committed);
    }
}
