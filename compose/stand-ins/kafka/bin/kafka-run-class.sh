#!/bin/sh
# The stand-in's kafka-run-class.sh: a Java main class on the jars of /opt/kafka/libs, with the
# options the distribution's script takes from the environment. Tools start on the C1 compiler
# alone: a healthcheck's JVM is up in about a third of the time on a busy machine.
: "${KAFKA_HEAP_OPTS:=-Xmx256M}"
: "${KAFKA_JVM_PERFORMANCE_OPTS:=-XX:+UseSerialGC -XX:TieredStopAtLevel=1 -Djava.awt.headless=true}"
: "${KAFKA_LOG4J_OPTS:=-Dlog4j2.configurationFile=/opt/kafka/config/tools-log4j2.properties}"
# The options are word lists, as in the distribution's script.
# shellcheck disable=SC2086
exec java $KAFKA_HEAP_OPTS $KAFKA_JVM_PERFORMANCE_OPTS $KAFKA_LOG4J_OPTS ${KAFKA_OPTS:-} \
  -cp "/opt/kafka/libs/*" "$@"
