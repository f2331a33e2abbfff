/*
 * rocketmq-tx cdc engine: publishes the outbox_event rows written with delivery 'cdc' (status
 * 'CDC') from the MySQL/MariaDB binlog, read by the Debezium embedded engine, to RocketMQ with the
 * official Java client. `rocketmq-tx cdc` compiles and supervises this process; it is not meant to
 * be started by hand.
 *
 * Guarantee: a binlog position is marked processed only after the broker acknowledged every
 * message of the rows before it, and Debezium flushes processed positions to the offset file; a
 * crash resumes from the last flushed position, so rows after it are sent again (same EVENT_ID:
 * a duplicate, never a loss). Rows of rolled-back transactions never reach the binlog.
 *
 * Configuration: a properties file (argv[0]) written by the CLI, the database password in the
 * environment (RMQTX_CDC_DB_PASSWORD), never on disk or in argv. Progress: one JSON object per
 * line on stdout ({"type":"ready"|"progress"|"error"|"stopped",...}); logs on stderr. The engine
 * stops when stdin closes (its supervisor died) or on SIGTERM.
 */
import com.fasterxml.jackson.databind.JsonNode;
import com.fasterxml.jackson.databind.ObjectMapper;
import com.fasterxml.jackson.databind.node.ObjectNode;
import io.debezium.engine.DebeziumEngine;
import io.debezium.engine.RecordChangeEvent;
import io.debezium.engine.format.ChangeEventFormat;
import io.debezium.embedded.Connect;
import java.io.FileInputStream;
import java.io.InputStream;
import java.io.PrintStream;
import java.nio.ByteBuffer;
import java.nio.charset.StandardCharsets;
import java.util.ArrayList;
import java.util.HashMap;
import java.util.HashSet;
import java.util.List;
import java.util.Map;
import java.util.Properties;
import java.util.Set;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.CompletionException;
import java.util.concurrent.CountDownLatch;
import java.util.concurrent.ExecutorService;
import java.util.concurrent.Executors;
import java.util.concurrent.ScheduledExecutorService;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicBoolean;
import java.util.concurrent.atomic.AtomicLong;
import org.apache.kafka.connect.data.Struct;
import org.apache.kafka.connect.source.SourceRecord;
import org.apache.rocketmq.client.exception.MQClientException;
import org.apache.rocketmq.client.producer.DefaultMQProducer;
import org.apache.rocketmq.client.producer.LocalTransactionState;
import org.apache.rocketmq.client.producer.SendResult;
import org.apache.rocketmq.client.producer.SendStatus;
import org.apache.rocketmq.client.producer.TransactionListener;
import org.apache.rocketmq.client.producer.TransactionMQProducer;
import org.apache.rocketmq.client.producer.TransactionSendResult;
import org.apache.rocketmq.common.message.Message;
import org.apache.rocketmq.common.message.MessageExt;
import org.apache.rocketmq.common.message.MessageQueue;

public final class RocketMqTxCdc {
  private static final ObjectMapper JSON = new ObjectMapper();
  private static final PrintStream OUT = System.out;
  /** The status the producer writes for delivery 'cdc'; other rows belong to the relay. */
  private static final String CDC_STATUS = "CDC";
  /** RocketMQ 5 FIFO message group (MessageConst.PROPERTY_SHARDING_KEY). */
  private static final String SHARDING_KEY = "__SHARDINGKEY";

  private final Properties conf;
  private final Set<String> fifoTopics;
  private final Set<String> transactionTopics;
  private final DefaultMQProducer producer;
  private final long retryMaxMs;
  private final AtomicLong published = new AtomicLong();
  private final AtomicLong skipped = new AtomicLong();
  private final AtomicLong retries = new AtomicLong();
  /** Senders of one batch's rows (one ordering key at a time each). */
  private final ExecutorService senders;
  /**
   * The published event with the latest occurred_at (not the last one in log order: concurrent
   * transactions commit out of their occurred_at order, and the backlog query counts the CDC rows
   * that occurred after this one, so the last in log order left rows that were published counted
   * as backlog until the next event).
   */
  private volatile String lastEventId = "";
  private Comparable<?> lastOccurred;
  private volatile long lastSourceTsMs;
  private long lastReportMs;
  private long lastReported = -1;
  private String lastReportedEventId = "";
  private final AtomicBoolean stopping = new AtomicBoolean();

  private RocketMqTxCdc(Properties conf) throws MQClientException {
    this.conf = conf;
    this.fifoTopics = csv(conf.getProperty("rmqtx.fifoTopics", ""));
    this.transactionTopics = csv(conf.getProperty("rmqtx.transactionTopics", ""));
    this.retryMaxMs = Long.parseLong(conf.getProperty("rmqtx.retryMaxMs", "5000"));
    int parallel = Integer.parseInt(conf.getProperty("rmqtx.sendParallelism", "16"));
    this.senders = Executors.newFixedThreadPool(parallel, r -> {
      Thread t = new Thread(r, "rmqtx-cdc-send");
      t.setDaemon(true);
      return t;
    });
    String group = conf.getProperty("rmqtx.producerGroup");
    // One producer for every topic: a TRANSACTION topic takes only half messages, sent and
    // committed at once; the rows are committed in the database (they are in the binlog), so a
    // check-back of a lost commit answers COMMIT.
    TransactionMQProducer p = new TransactionMQProducer(group);
    p.setTransactionListener(
        new TransactionListener() {
          @Override
          public LocalTransactionState executeLocalTransaction(Message msg, Object arg) {
            return LocalTransactionState.COMMIT_MESSAGE;
          }

          @Override
          public LocalTransactionState checkLocalTransaction(MessageExt msg) {
            return LocalTransactionState.COMMIT_MESSAGE;
          }
        });
    p.setNamesrvAddr(conf.getProperty("rmqtx.namesrv"));
    p.setSendMsgTimeout(Integer.parseInt(conf.getProperty("rmqtx.sendTimeoutMs", "5000")));
    p.setRetryTimesWhenSendFailed(0);
    p.setInstanceName("rmqtx-cdc-" + ProcessHandle.current().pid());
    this.producer = p;
  }

  public static void main(String[] args) throws Exception {
    Properties conf = new Properties();
    try (InputStream in = new FileInputStream(args[0])) {
      conf.load(in);
    }
    String password = System.getenv("RMQTX_CDC_DB_PASSWORD");
    conf.setProperty("database.password", password == null ? "" : password);
    RocketMqTxCdc cdc = new RocketMqTxCdc(conf);
    cdc.run();
  }

  private void run() throws Exception {
    producer.start();
    Properties engineProps = new Properties();
    for (String name : conf.stringPropertyNames()) {
      if (!name.startsWith("rmqtx.")) engineProps.setProperty(name, conf.getProperty(name));
    }
    CountDownLatch done = new CountDownLatch(1);
    final String[] failure = {null};
    DebeziumEngine<RecordChangeEvent<SourceRecord>> engine =
        DebeziumEngine.create(ChangeEventFormat.of(Connect.class))
            .using(engineProps)
            .notifying(this::handleBatch)
            .using(
                new DebeziumEngine.ConnectorCallback() {
                  @Override
                  public void taskStarted() {
                    emit("ready", "producerGroup", conf.getProperty("rmqtx.producerGroup"));
                  }
                })
            .using(
                (success, message, error) -> {
                  if (!success) failure[0] = message + (error != null ? ": " + error : "");
                  done.countDown();
                })
            .build();
    ExecutorService executor = Executors.newSingleThreadExecutor();
    executor.execute(engine);
    Runnable stop =
        () -> {
          if (!stopping.compareAndSet(false, true)) return;
          try {
            engine.close();
          } catch (IllegalStateException alreadyStopped) {
            // the engine stopped on its own (failure); nothing to close
          } catch (Exception e) {
            emit("error", "message", "close: " + e);
          }
        };
    Runtime.getRuntime().addShutdownHook(new Thread(() -> {
      stop.run();
      try {
        done.await();
      } catch (InterruptedException ignored) {
        Thread.currentThread().interrupt();
      }
    }));
    // The supervisor holds our stdin: EOF means it is gone, and so must we be.
    Thread stdinWatch =
        new Thread(
            () -> {
              try {
                while (System.in.read() >= 0) {
                  // ignore input
                }
              } catch (Exception ignored) {
                // closed
              }
              stop.run();
            });
    stdinWatch.setDaemon(true);
    stdinWatch.start();
    // Progress once a second while anything changed (the handler also reports on its way).
    ScheduledExecutorService reporter = Executors.newSingleThreadScheduledExecutor(r -> {
      Thread t = new Thread(r, "rmqtx-cdc-report");
      t.setDaemon(true);
      return t;
    });
    reporter.scheduleAtFixedRate(() -> report(false), 1, 1, TimeUnit.SECONDS);
    done.await();
    executor.shutdown();
    report(true);
    producer.shutdown();
    if (failure[0] != null && !stopping.get()) {
      emit("error", "message", failure[0]);
      System.exit(2);
    }
    emit("stopped", "published", published.get());
    System.exit(0);
  }

  /**
   * One batch of change events, in log order. The CDC rows are sent in parallel across orderings
   * keys (aggregate id, else tx id) and one after another within a key, so one aggregate's events
   * keep their commit order; positions are marked processed only after every send of the batch
   * was acknowledged, so a crash can only resend.
   */
  private void handleBatch(
      List<RecordChangeEvent<SourceRecord>> records,
      DebeziumEngine.RecordCommitter<RecordChangeEvent<SourceRecord>> committer)
      throws InterruptedException {
    Map<String, CompletableFuture<Void>> chains = new HashMap<>();
    String batchLastEventId = null;
    Comparable<?> batchLastOccurred = null;
    long batchLastTs = 0;
    for (RecordChangeEvent<SourceRecord> event : records) {
      SourceRecord record = event.record();
      if (record.value() instanceof Struct value && value.schema().field("op") != null) {
        String op = value.getString("op");
        // c: inserted (streaming), r: read by the snapshot; updates and deletes are the relay's
        // or the archiver's work on rows already published.
        if (("c".equals(op) || "r".equals(op)) && value.get("after") instanceof Struct after) {
          if (CDC_STATUS.equals(after.getString("status"))) {
            String key = orderKey(after);
            Runnable send = () -> publishUnchecked(after);
            chains.compute(
                key,
                (k, previous) ->
                    previous == null
                        ? CompletableFuture.runAsync(send, senders)
                        : previous.thenRunAsync(send, senders));
            Comparable<?> occurred = occurredAt(after.get("occurred_at"));
            if (batchLastEventId == null || later(occurred, batchLastOccurred)) {
              batchLastEventId = after.getString("event_id");
              batchLastOccurred = occurred;
            }
            Struct source = value.getStruct("source");
            if (source != null && source.get("ts_ms") instanceof Long ts) batchLastTs = ts;
          } else {
            skipped.incrementAndGet();
          }
        }
      }
    }
    try {
      CompletableFuture.allOf(chains.values().toArray(new CompletableFuture<?>[0])).join();
    } catch (CompletionException e) {
      if (e.getCause() instanceof StoppingException) throw new InterruptedException(e.getCause().getMessage());
      throw e;
    }
    for (RecordChangeEvent<SourceRecord> event : records) committer.markProcessed(event);
    committer.markBatchFinished();
    if (batchLastEventId != null) {
      if (lastOccurred == null || later(batchLastOccurred, lastOccurred)) {
        lastEventId = batchLastEventId;
        lastOccurred = batchLastOccurred;
      }
      lastSourceTsMs = batchLastTs;
    }
    report(false);
  }

  /**
   * occurred_at as Debezium hands it over: epoch millis or micros (Long) for DATETIME(3) and
   * TIMESTAMP(3), an ISO-8601 string for a zoned timestamp (compared as an Instant).
   */
  private static Comparable<?> occurredAt(Object value) {
    if (value instanceof Long l) return l;
    if (value == null) return null;
    try {
      return java.time.OffsetDateTime.parse(value.toString()).toInstant();
    } catch (java.time.format.DateTimeParseException e) {
      return value.toString();
    }
  }

  /** a after b (a value that cannot be compared with b counts as later: the newest seen wins). */
  @SuppressWarnings({"unchecked", "rawtypes"})
  private static boolean later(Comparable<?> a, Comparable<?> b) {
    if (a == null) return false;
    if (b == null || a.getClass() != b.getClass()) return true;
    return ((Comparable) a).compareTo(b) > 0;
  }

  private static String orderKey(Struct row) {
    String aggregate = row.getString("aggregate_id");
    return aggregate != null ? aggregate : row.getString("tx_id");
  }

  /** The engine is stopping with a row unsent: the batch is not marked, the row is sent again later. */
  private static final class StoppingException extends RuntimeException {
    StoppingException(String message) {
      super(message);
    }
  }

  private void publishUnchecked(Struct row) {
    try {
      publish(row);
    } catch (InterruptedException e) {
      Thread.currentThread().interrupt();
      throw new StoppingException(e.getMessage());
    }
  }

  /** Sends one row's message until the broker acknowledges it (or the engine stops). */
  private void publish(Struct row) throws InterruptedException {
    String eventId = row.getString("event_id");
    Message msg = message(row);
    String topic = msg.getTopic();
    String orderKey = orderKey(row);
    long delay = 100;
    while (true) {
      try {
        if (transactionTopics.contains(topic)) {
          TransactionSendResult r = producer.sendMessageInTransaction(msg, null);
          if (r.getLocalTransactionState() == LocalTransactionState.COMMIT_MESSAGE
              && r.getSendStatus() == SendStatus.SEND_OK) break;
          throw new IllegalStateException("half message " + r.getSendStatus() + " / " + r.getLocalTransactionState());
        }
        if (fifoTopics.contains(topic)) msg.putUserProperty(SHARDING_KEY, orderKey);
        // Keyed by aggregate: one aggregate's rows go to one queue, in binlog (commit) order.
        SendResult r = producer.send(msg, (List<MessageQueue> mqs, Message m, Object key) ->
            mqs.get(Math.floorMod(key.hashCode(), mqs.size())), orderKey);
        if (r.getSendStatus() == SendStatus.SEND_OK) break;
        throw new IllegalStateException("send status " + r.getSendStatus());
      } catch (Exception e) {
        if (stopping.get()) throw new InterruptedException("stopping with event " + eventId + " unsent");
        retries.incrementAndGet();
        emit("error", "message", "send of event " + eventId + " to " + topic + " failed (retry in " + delay + " ms): " + e);
        Thread.sleep(delay);
        delay = Math.min(delay * 2, retryMaxMs);
      }
    }
    published.incrementAndGet();
  }

  /** The message the relay would send for this row: topic, tag, keys, properties and body. */
  private static Message message(Struct row) {
    Message msg = new Message(row.getString("topic"), body(row.get("payload")));
    String tag = row.getString("tag");
    if (tag != null) msg.setTags(tag);
    try {
      JsonNode keys = JSON.readTree(row.getString("keys"));
      List<String> list = new ArrayList<>();
      for (JsonNode k : keys) list.add(k.asText());
      if (!list.isEmpty()) msg.setKeys(list);
      JsonNode props = JSON.readTree(row.getString("properties"));
      for (Map.Entry<String, JsonNode> p : props.properties()) msg.putUserProperty(p.getKey(), p.getValue().asText());
    } catch (Exception e) {
      throw new IllegalArgumentException("outbox row " + row.getString("event_id") + ": bad keys or properties JSON", e);
    }
    return msg;
  }

  private static byte[] body(Object payload) {
    if (payload instanceof byte[] b) return b;
    if (payload instanceof ByteBuffer buf) {
      byte[] b = new byte[buf.remaining()];
      buf.duplicate().get(b);
      return b;
    }
    if (payload instanceof String s) return s.getBytes(StandardCharsets.UTF_8);
    return new byte[0];
  }

  /** A progress line at most once a second, when something changed (and at the end). */
  private synchronized void report(boolean force) {
    long now = System.currentTimeMillis();
    long seen = published.get() + skipped.get() + retries.get();
    // lastEventId moves after a batch's sends were counted: a report in between had the counts
    // but the previous id, and nothing else changed after the last batch, so without this the
    // new id was never reported (the backlog stayed one batch high until the next event).
    String eventId = lastEventId;
    boolean changed = seen != lastReported || !eventId.equals(lastReportedEventId);
    if (!force && (now - lastReportMs < 1000 || !changed)) return;
    lastReportMs = now;
    lastReported = seen;
    lastReportedEventId = eventId;
    ObjectNode o = JSON.createObjectNode();
    o.put("type", "progress");
    o.put("published", published.get());
    o.put("skipped", skipped.get());
    o.put("retries", retries.get());
    o.put("lastEventId", eventId);
    o.put("lastSourceTsMs", lastSourceTsMs);
    o.put("at", now);
    line(o);
  }

  private static void emit(String type, String key, Object value) {
    ObjectNode o = JSON.createObjectNode();
    o.put("type", type);
    o.put(key, String.valueOf(value));
    o.put("at", System.currentTimeMillis());
    line(o);
  }

  private static synchronized void line(ObjectNode o) {
    OUT.println(o.toString());
    OUT.flush();
  }

  private static Set<String> csv(String s) {
    Set<String> out = new HashSet<>();
    for (String p : s.split(",")) if (!p.isBlank()) out.add(p.trim());
    return out;
  }
}
