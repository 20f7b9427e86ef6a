#!/bin/sh
# The broker (KRaft) on a server.properties, logging to the console as the official image does.
: "${KAFKA_HEAP_OPTS:=-Xmx1G -Xms1G}"
: "${KAFKA_JVM_PERFORMANCE_OPTS:=-XX:+UseSerialGC -Djava.awt.headless=true}"
: "${KAFKA_LOG4J_OPTS:=-Dlog4j2.configurationFile=/opt/kafka/config/log4j2.properties}"
export KAFKA_HEAP_OPTS KAFKA_JVM_PERFORMANCE_OPTS KAFKA_LOG4J_OPTS
exec "$(dirname "$0")/kafka-run-class.sh" kafka.Kafka "$@"
