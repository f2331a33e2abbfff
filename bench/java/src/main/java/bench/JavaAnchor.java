package bench;

import java.io.BufferedReader;
import java.io.InputStreamReader;
import java.io.PrintStream;
import java.lang.management.ManagementFactory;
import java.nio.charset.StandardCharsets;
import java.sql.Connection;
import java.sql.DriverManager;
import java.sql.PreparedStatement;
import java.sql.ResultSet;
import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import java.util.UUID;
import java.util.concurrent.ArrayBlockingQueue;
import java.util.concurrent.BlockingQueue;
import java.util.concurrent.atomic.AtomicLong;
import java.util.concurrent.atomic.AtomicReference;
import org.apache.rocketmq.client.apis.ClientConfiguration;
import org.apache.rocketmq.client.apis.ClientServiceProvider;
import org.apache.rocketmq.client.apis.message.Message;
import org.apache.rocketmq.client.apis.producer.Producer;
import org.apache.rocketmq.client.apis.producer.Transaction;
import org.apache.rocketmq.client.apis.producer.TransactionResolution;

/**
 * The Java anchor of the benchmark: half send, BEGIN, INSERT tx_record (first statement), INSERT
 * bench_order, COMMIT, Transaction.commit() with rocketmq-client-java 5 and MariaDB Connector/J (or
 * the PostgreSQL JDBC driver when the bench runs on PostgreSQL).
 * Commands on stdin (one per line), one RESULT line of JSON on stdout per command:
 *   run CONCURRENCY DURATION_MS ROLLBACK_EVERY TAG
 *   quit
 * Arguments: ENDPOINTS TOPIC JDBC_URL POOL_SIZE PRODUCER_GROUP
 */
public final class JavaAnchor {
  private static final String INSERT_TX =
      "INSERT INTO tx_record (tx_id, status, resolved_by, producer_group, topic, event_count)"
          + " VALUES (?, 'COMMITTED', 'PRODUCER', ?, ?, 1)";
  private static final String INSERT_ORDER = "INSERT INTO bench_order (id, note) VALUES (?, ?)";

  private final String topic;
  private final String group;
  private final BlockingQueue<Connection> pool;
  private final Producer producer;
  private final ClientServiceProvider provider = ClientServiceProvider.loadService();

  private JavaAnchor(String endpoints, String topic, String jdbcUrl, int poolSize, String group)
      throws Exception {
    this.topic = topic;
    this.group = group;
    this.pool = new ArrayBlockingQueue<>(poolSize);
    for (int i = 0; i < poolSize; i++) pool.add(DriverManager.getConnection(jdbcUrl));
    ClientConfiguration config =
        ClientConfiguration.newBuilder()
            .setEndpoints(endpoints)
            .setRequestTimeout(Duration.ofSeconds(3))
            .build();
    this.producer =
        provider
            .newProducerBuilder()
            .setClientConfiguration(config)
            .setTopics(topic)
            .setTransactionChecker(
                view -> {
                  String txId = view.getProperties().get("TX_ID");
                  if (txId == null) return TransactionResolution.UNKNOWN;
                  try {
                    Connection c = pool.take();
                    try (PreparedStatement ps =
                        c.prepareStatement("SELECT status FROM tx_record WHERE tx_id = ?")) {
                      ps.setString(1, txId);
                      try (ResultSet rs = ps.executeQuery()) {
                        if (!rs.next()) return TransactionResolution.UNKNOWN;
                        return "COMMITTED".equals(rs.getString(1))
                            ? TransactionResolution.COMMIT
                            : TransactionResolution.ROLLBACK;
                      }
                    } finally {
                      pool.put(c);
                    }
                  } catch (Exception e) {
                    return TransactionResolution.UNKNOWN;
                  }
                })
            .build();
  }

  /** One transaction; returns true when it committed. Rollback transactions throw nothing. */
  private boolean transact(String key, boolean rollback) throws Exception {
    String txId = UUID.randomUUID().toString();
    Message message =
        provider
            .newMessageBuilder()
            .setTopic(topic)
            .setTag(key.substring(0, key.indexOf('-')))
            .setKeys(key)
            .addProperty("TX_ID", txId)
            .setBody(("{\"key\":\"" + key + "\"}").getBytes(StandardCharsets.UTF_8))
            .build();
    Transaction transaction = producer.beginTransaction();
    producer.send(message, transaction);
    Connection c = pool.take();
    boolean committed = false;
    try {
      c.setAutoCommit(false);
      try (PreparedStatement tx = c.prepareStatement(INSERT_TX);
          PreparedStatement order = c.prepareStatement(INSERT_ORDER)) {
        tx.setString(1, txId);
        tx.setString(2, group);
        tx.setString(3, topic);
        tx.executeUpdate();
        order.setString(1, key);
        order.setString(2, "bench");
        order.executeUpdate();
      }
      if (rollback) {
        c.rollback();
      } else {
        c.commit();
        committed = true;
      }
    } catch (Exception e) {
      try {
        c.rollback();
      } catch (Exception ignored) {
        // the connection is reset below
      }
      transaction.rollback();
      throw e;
    } finally {
      c.setAutoCommit(true);
      pool.put(c);
    }
    if (committed) transaction.commit();
    else transaction.rollback();
    return committed;
  }

  private String run(int concurrency, long durationMs, int rollbackEvery, String tag)
      throws Exception {
    long cpu0 = cpuNanos();
    long start = System.nanoTime();
    long deadline = start + durationMs * 1_000_000L;
    AtomicLong seq = new AtomicLong();
    List<List<Double>> latencies = new ArrayList<>();
    List<List<String>> committedKeys = new ArrayList<>();
    List<List<String>> rolledBackKeys = new ArrayList<>();
    AtomicLong errors = new AtomicLong();
    AtomicReference<String> firstError = new AtomicReference<>();
    List<Thread> threads = new ArrayList<>();
    for (int t = 0; t < concurrency; t++) {
      List<Double> lat = new ArrayList<>();
      List<String> ck = new ArrayList<>();
      List<String> rk = new ArrayList<>();
      latencies.add(lat);
      committedKeys.add(ck);
      rolledBackKeys.add(rk);
      Thread thread =
          new Thread(
              () -> {
                while (System.nanoTime() < deadline) {
                  long n = seq.incrementAndGet();
                  String key = tag + "-" + n;
                  boolean rollback = rollbackEvery > 0 && n % rollbackEvery == 0;
                  long t0 = System.nanoTime();
                  try {
                    boolean ok = transact(key, rollback);
                    if (ok) {
                      lat.add((System.nanoTime() - t0) / 1e6);
                      ck.add(key);
                    } else {
                      rk.add(key);
                    }
                  } catch (Exception e) {
                    errors.incrementAndGet();
                    firstError.compareAndSet(null, String.valueOf(e));
                  }
                }
              });
      thread.start();
      threads.add(thread);
    }
    for (Thread thread : threads) thread.join();
    double elapsedMs = (System.nanoTime() - start) / 1e6;
    double cpuMs = (cpuNanos() - cpu0) / 1e6;
    StringBuilder sb = new StringBuilder(1 << 16);
    int committed = 0;
    int rolledBack = 0;
    sb.append("{\"elapsedMs\":").append(elapsedMs).append(",\"cpuMs\":").append(cpuMs);
    sb.append(",\"errors\":").append(errors.get());
    String fe = firstError.get();
    if (fe != null) sb.append(",\"firstError\":\"").append(escape(fe)).append('"');
    sb.append(",\"latencies\":[");
    boolean first = true;
    for (List<Double> lat : latencies) {
      for (Double d : lat) {
        if (!first) sb.append(',');
        sb.append(String.format("%.3f", d));
        first = false;
        committed++;
      }
    }
    sb.append("],\"committedKeys\":");
    appendKeys(sb, committedKeys);
    sb.append(",\"rolledBackKeys\":");
    for (List<String> rk : rolledBackKeys) rolledBack += rk.size();
    appendKeys(sb, rolledBackKeys);
    sb.append(",\"committed\":").append(committed).append(",\"rolledBack\":").append(rolledBack);
    sb.append('}');
    return sb.toString();
  }

  private static void appendKeys(StringBuilder sb, List<List<String>> lists) {
    sb.append('[');
    boolean first = true;
    for (List<String> l : lists) {
      for (String k : l) {
        if (!first) sb.append(',');
        sb.append('"').append(k).append('"');
        first = false;
      }
    }
    sb.append(']');
  }

  private static String escape(String s) {
    return s.replace("\\", "\\\\").replace("\"", "\\\"").replace("\n", " ");
  }

  private static long cpuNanos() {
    java.lang.management.OperatingSystemMXBean os = ManagementFactory.getOperatingSystemMXBean();
    if (os instanceof com.sun.management.OperatingSystemMXBean) {
      return ((com.sun.management.OperatingSystemMXBean) os).getProcessCpuTime();
    }
    return 0;
  }

  public static void main(String[] args) throws Exception {
    PrintStream out = new PrintStream(System.out, true, StandardCharsets.UTF_8);
    JavaAnchor anchor =
        new JavaAnchor(args[0], args[1], args[2], Integer.parseInt(args[3]), args[4]);
    out.println("READY {}");
    BufferedReader in = new BufferedReader(new InputStreamReader(System.in, StandardCharsets.UTF_8));
    String line;
    while ((line = in.readLine()) != null) {
      String[] p = line.trim().split(" ");
      if (p[0].equals("quit")) break;
      if (p[0].equals("run")) {
        String result =
            anchor.run(
                Integer.parseInt(p[1]), Long.parseLong(p[2]), Integer.parseInt(p[3]), p[4]);
        out.println("RESULT " + result);
      }
    }
    anchor.producer.close();
    for (Connection c : anchor.pool) c.close();
    System.exit(0);
  }
}
