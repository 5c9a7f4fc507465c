#!/usr/bin/env bash
# librdkafka's own regression suite against a raftkafka cluster: builds the tests from a
# librdkafka source tree, points them at a cluster, runs every broker-facing test one by one
# and writes one result line per test. See docs/librdkafka-suite.md.
#
#   ops/librdkafka-tests.sh SRC_DIR [OUT_DIR]
#
# SRC_DIR   a librdkafka source tree (git clone https://github.com/confluentinc/librdkafka)
# OUT_DIR   where logs and results.tsv go (default ./librdkafka-results)
# Environment:
#   BOOTSTRAP=host:port,...   an existing cluster; unset: a 3-node `python -m raftkafka dev`
#                             cluster is started on loopback (and killed at the end)
#   TESTS="0001 0002 ..."     only these tests (default: every test file in SRC_DIR/tests)
#   TEST_TIMEOUT=300          seconds per test before it counts as TIMEOUT
#   TEST_KAFKA_VERSION=3.7.0  the broker version the tests assume (gates their features)
#   PYTHON=python             the interpreter that runs raftkafka
set -euo pipefail

SRC=${1:?usage: $0 LIBRDKAFKA_SRC_DIR [OUT_DIR]}
OUT=${2:-librdkafka-results}
SRC=$(cd "$SRC" && pwd)
mkdir -p "$OUT"
OUT=$(cd "$OUT" && pwd)
PYTHON=${PYTHON:-python}
TEST_TIMEOUT=${TEST_TIMEOUT:-300}
export TEST_KAFKA_VERSION=${TEST_KAFKA_VERSION:-3.7.0}
export LD_LIBRARY_PATH="$SRC/src:$SRC/src-cpp${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"  # the just-built library

# 1. Build (system libraries; no GSSAPI, no libcurl), once.
if [ ! -x "$SRC/tests/test-runner" ]; then
    echo "building librdkafka and its tests in $SRC (log: $OUT/build.log)"
    (cd "$SRC" && ./configure --disable-gssapi --disable-curl && make -j"$(nproc)" libs \
        && make -C tests -j"$(nproc)" build) > "$OUT/build.log" 2>&1 \
        || { echo "build failed: see $OUT/build.log" >&2; exit 1; }
fi

# 2. A cluster: the one given, or a dev cluster of our own.
CLUSTER_PID=
DATA=
cleanup() {
    if [ -n "$CLUSTER_PID" ]; then
        kill "$CLUSTER_PID" 2>/dev/null || true
        wait "$CLUSTER_PID" 2>/dev/null || true
    fi
    if [ -n "$DATA" ]; then
        rm -rf "$DATA"  # the dev cluster's data dirs (its log stays in OUT/cluster.log)
    fi
}
trap cleanup EXIT
trap 'exit 130' INT TERM  # so that cleanup runs
if [ -z "${BOOTSTRAP:-}" ]; then
    BASE=$((20000 + (RANDOM % 6000) * 2))  # even, below the ephemeral range
    # Kafka's group.initial.rebalance.delay.ms (3 s) is kept: tests such as 0089 and 0113 start
    # two consumers together and expect them in the group's first generation.
    DATA=$(mktemp -d)
    "$PYTHON" -m raftkafka dev --nodes 3 --base-port "$BASE" --data-dir "$DATA" \
        --set default.replication.factor=3 --set offsets.topic.replication.factor=3 \
        --set transaction.state.log.replication.factor=3 \
        --set num.partitions=4 --set auto.create.topics.enable=true \
        --set authorizer.class.name=org.apache.kafka.metadata.authorizer.StandardAuthorizer \
        --set allow.everyone.if.no.acl.found=true \
        > "$OUT/cluster.log" 2>&1 &
    CLUSTER_PID=$!
    for _ in $(seq 1 240); do
        grep -q '^ready' "$OUT/cluster.log" && break
        kill -0 "$CLUSTER_PID" 2>/dev/null || { echo "the dev cluster exited: see $OUT/cluster.log" >&2; exit 1; }
        sleep 0.5
    done
    grep -q '^ready' "$OUT/cluster.log" || { echo "the dev cluster never became ready" >&2; exit 1; }
    BOOTSTRAP="127.0.0.1:$BASE,127.0.0.1:$((BASE + 2)),127.0.0.1:$((BASE + 4))"
fi
echo "cluster: $BOOTSTRAP"

# Tests that create topics with particular configs or deny a topic call
# $KAFKA_PATH/bin/kafka-topics.sh and kafka-acls.sh: our `topics` and `acls` take the same flags.
mkdir -p "$OUT/kafka/bin"
for tool in topics acls; do
    cat > "$OUT/kafka/bin/kafka-$tool.sh" <<SHIM
#!/bin/sh
exec "$(command -v "$PYTHON")" -m raftkafka $tool "\$@"
SHIM
    chmod +x "$OUT/kafka/bin/kafka-$tool.sh"
done
export KAFKA_PATH="$OUT/kafka" BROKERS="$BOOTSTRAP"

# 3. test.conf: the cluster, random topic names so reruns do not collide.
cat > "$SRC/tests/test.conf" <<CONF
metadata.broker.list=$BOOTSTRAP
test.topic.random=true
test.timeout.multiplier=2
CONF

# 4. Every broker-facing test on its own (-L: local-only tests are skipped by the runner).
if [ -z "${TESTS:-}" ]; then
    TESTS=$(cd "$SRC/tests" && ls 0[0-9][0-9][0-9]-*.c 0[0-9][0-9][0-9]-*.cpp 2>/dev/null | cut -c1-4 | sort -u)
fi
RESULTS="$OUT/results.tsv"
printf 'test\tresult\tseconds\n' > "$RESULTS"
for n in $TESTS; do
    log="$OUT/$n.log"
    start=$(date +%s)
    set +e
    (cd "$SRC/tests" && TESTS=$n timeout "$TEST_TIMEOUT" ./test-runner -L -E) > "$log" 2>&1
    code=$?
    set -e
    secs=$(( $(date +%s) - start ))
    if [ $code -eq 124 ]; then
        result=TIMEOUT
    elif grep -Eq "\| +${n}_[a-z0-9_]+ +\| +\x1b?\[?[0-9;]*m?PASSED" "$log" || grep -Eq "${n}_[a-z0-9_]+ +.*PASSED" "$log"; then
        result=PASS
    elif grep -Eq "${n}_[a-z0-9_]+ +.*SKIPPED" "$log" || grep -q "No tests to run" "$log"; then
        result=SKIP
    else
        result=FAIL
    fi
    printf '%s\t%s\t%s\n' "$n" "$result" "$secs" | tee -a "$RESULTS"
done
echo "results: $RESULTS"
printf 'PASS %s  FAIL %s  TIMEOUT %s  SKIP %s\n' \
    "$(grep -c $'\tPASS\t' "$RESULTS" || true)" "$(grep -c $'\tFAIL\t' "$RESULTS" || true)" \
    "$(grep -c $'\tTIMEOUT\t' "$RESULTS" || true)" "$(grep -c $'\tSKIP\t' "$RESULTS" || true)"
