#!/bin/sh
# One-shot service of docker-compose.yml: waits until the broker is registered, then creates the
# topics and FIFO consumer groups listed in scripts/topics.json (mounted at $TOPICS_FILE) with
# mqadmin. mqadmin can exit 0 on failure, so each output is checked for "success".
set -u
NAMESRV=${NAMESRV_ADDR:-namesrv:9876}
CLUSTER=${CLUSTER_NAME:-DefaultCluster}
TOPICS_FILE=${TOPICS_FILE:-/etc/rocketmq-tx/topics.json}
TIMEOUT=${WAIT_TIMEOUT_SECONDS:-180}
PARALLEL=${PARALLEL:-4}
MQADMIN="sh ${ROCKETMQ_HOME:-/home/rocketmq/rocketmq-5.3.3}/bin/mqadmin"
FAILED=/tmp/init-topics.failed
rm -f "$FAILED"

# BROKERS: the broker names that must be registered before the topics are created on the cluster
# (updateTopic -c creates a topic on the brokers registered at that moment).
BROKERS=${BROKERS:-broker-a}
echo "init-topics: waiting for $BROKERS of $CLUSTER in namesrv $NAMESRV ..."
start=$(date +%s)
for broker in $BROKERS; do
  until $MQADMIN clusterList -n "$NAMESRV" 2>/dev/null | grep -q "^$CLUSTER .*$broker"; do
    if [ $(($(date +%s) - start)) -ge "$TIMEOUT" ]; then
      echo "init-topics: $broker not registered after ${TIMEOUT}s" >&2
      exit 1
    fi
    sleep 2
  done
done
echo "init-topics: $BROKERS registered after $(($(date +%s) - start))s"

# One topic per line in topics.json: { "name": "X", "type": "Y" }
topics=$(sed -n 's/.*"name": *"\([^"]*\)", *"type": *"\([A-Z]*\)".*/\1=\2/p' "$TOPICS_FILE")
groups=$(tr -d '\n' <"$TOPICS_FILE" | sed -n 's/.*"fifoGroups": *\[\([^]]*\)\].*/\1/p' | tr -d ' "' | tr ',' ' ')
if [ -z "$topics" ]; then
  echo "init-topics: no topics found in $TOPICS_FILE" >&2
  exit 1
fi

# run WHAT mqadmin-args...: fails loudly (naming WHAT) unless the output says "success"
run() {
  what=$1
  shift
  out=$($MQADMIN "$@" 2>&1)
  if echo "$out" | grep -q "success"; then
    echo "init-topics: ok   $what"
  else
    echo "init-topics: FAIL $what" >&2
    echo "$out" | tail -5 >&2
    touch "$FAILED"
  fi
}

i=0
for t in $topics; do
  name=${t%%=*}
  type=${t#*=}
  run "topic $name ($type)" updateTopic -n "$NAMESRV" -c "$CLUSTER" -t "$name" -a "+message.type=$type" &
  i=$((i + 1))
  [ $((i % PARALLEL)) -eq 0 ] && wait
done
wait
for g in $groups; do
  run "FIFO group $g" updateSubGroup -n "$NAMESRV" -c "$CLUSTER" -g "$g" -o true &
  i=$((i + 1))
  [ $((i % PARALLEL)) -eq 0 ] && wait
done
wait

if [ -f "$FAILED" ]; then
  echo "init-topics: some topics/groups could not be created (see FAIL lines above)" >&2
  exit 1
fi
echo "init-topics: all topics and FIFO groups ready"
