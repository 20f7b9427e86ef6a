#!/bin/sh
# The broker of docker-compose.secure.yml: SASL_SSL (SCRAM-SHA-512) listeners with the CA and
# keystore made by `resultlog kafka certs --hostname kafka`, Kafka's StandardAuthorizer with
# the super user `admin`, the controller listener authenticated with PLAIN (as
# `resultlog kafka up --tls --authorizer` configures a local broker).
#
# Passwords come from the environment (letters, digits, - and _ only: they go into SCRAM's
# own syntax). Everything else has a default for the container; tests run this script
# outside a container by overriding the hosts, ports and paths.
set -eu

: "${KAFKA_BIN:=/opt/kafka/bin}"
: "${KAFKA_HOST:=kafka}"                 # how the other containers reach the broker
: "${EXTERNAL_HOST:=127.0.0.1}"          # how the host reaches it (the published port)
: "${INTERNAL_PORT:=29092}"
: "${EXTERNAL_PORT:=9092}"
: "${EXTERNAL_ADVERTISED_PORT:=$EXTERNAL_PORT}"  # the published port, when it differs
: "${CONTROLLER_PORT:=9093}"
: "${TLS_DIR:=/etc/resultlog/tls}"       # ca.pem and broker.pem (key, certificate, CA)
: "${DATA_DIR:=/tmp/kraft-data}"
: "${CONFIG:=/tmp/resultlog-server.properties}"
: "${CLIENT_CONFIG:=/tmp/resultlog-admin.properties}"  # the admin's, for the healthcheck
: "${CLUSTER_ID:=aBCkANbNQg6eJvHesA4-og}"

for name in RESULTLOG_BROKER_SECRET RESULTLOG_ADMIN_PASSWORD RESULTLOG_AGGREGATOR_PASSWORD \
    RESULTLOG_WORKER_PASSWORD; do
  eval "value=\${$name:-}"
  case "$value" in
    "") echo "kafka-start: $name is not set" >&2; exit 1 ;;
    *[!A-Za-z0-9_-]*) echo "kafka-start: $name may hold only A-Z a-z 0-9 - _" >&2; exit 1 ;;
  esac
done
for file in ca.pem broker.pem; do
  [ -r "$TLS_DIR/$file" ] || {
    echo "kafka-start: cannot read $TLS_DIR/$file; run: resultlog kafka certs --dir compose/secure/tls --hostname kafka" >&2
    exit 1
  }
done

scram="org.apache.kafka.common.security.scram.ScramLoginModule required"
plain="org.apache.kafka.common.security.plain.PlainLoginModule required"
broker="username=\"resultlog-broker\" password=\"$RESULTLOG_BROKER_SECRET\""

umask 077  # the properties hold the broker's secret
cat > "$CONFIG" <<EOF
process.roles=broker,controller
node.id=1
controller.quorum.voters=1@$KAFKA_HOST:$CONTROLLER_PORT
listeners=INTERNAL://0.0.0.0:$INTERNAL_PORT,EXTERNAL://0.0.0.0:$EXTERNAL_PORT,CONTROLLER://0.0.0.0:$CONTROLLER_PORT
advertised.listeners=INTERNAL://$KAFKA_HOST:$INTERNAL_PORT,EXTERNAL://$EXTERNAL_HOST:$EXTERNAL_ADVERTISED_PORT
listener.security.protocol.map=INTERNAL:SASL_SSL,EXTERNAL:SASL_SSL,CONTROLLER:SASL_PLAINTEXT
controller.listener.names=CONTROLLER
inter.broker.listener.name=INTERNAL
sasl.enabled.mechanisms=SCRAM-SHA-512
sasl.mechanism.inter.broker.protocol=SCRAM-SHA-512
listener.name.internal.scram-sha-512.sasl.jaas.config=$scram $broker;
listener.name.external.scram-sha-512.sasl.jaas.config=$scram $broker;
sasl.mechanism.controller.protocol=PLAIN
listener.name.controller.sasl.enabled.mechanisms=PLAIN
listener.name.controller.plain.sasl.jaas.config=$plain $broker user_resultlog-broker="$RESULTLOG_BROKER_SECRET";
ssl.keystore.type=PEM
ssl.keystore.location=$TLS_DIR/broker.pem
ssl.truststore.type=PEM
ssl.truststore.location=$TLS_DIR/ca.pem
authorizer.class.name=org.apache.kafka.metadata.authorizer.StandardAuthorizer
super.users=User:resultlog-broker;User:admin
log.dirs=$DATA_DIR
num.partitions=1
auto.create.topics.enable=false
offsets.topic.replication.factor=1
transaction.state.log.replication.factor=1
transaction.state.log.min.isr=1
share.coordinator.state.topic.replication.factor=1
share.coordinator.state.topic.min.isr=1
group.initial.rebalance.delay.ms=0
EOF

cat > "$CLIENT_CONFIG" <<EOF
security.protocol=SASL_SSL
sasl.mechanism=SCRAM-SHA-512
sasl.jaas.config=$scram username="admin" password="$RESULTLOG_ADMIN_PASSWORD";
ssl.truststore.type=PEM
ssl.truststore.location=$TLS_DIR/ca.pem
EOF

credential() { echo "SCRAM-SHA-512=[name=$1,password=$2]"; }
"$KAFKA_BIN/kafka-storage.sh" format --cluster-id "$CLUSTER_ID" --config "$CONFIG" --ignore-formatted \
  --add-scram "$(credential resultlog-broker "$RESULTLOG_BROKER_SECRET")" \
  --add-scram "$(credential admin "$RESULTLOG_ADMIN_PASSWORD")" \
  --add-scram "$(credential aggregator "$RESULTLOG_AGGREGATOR_PASSWORD")" \
  --add-scram "$(credential worker "$RESULTLOG_WORKER_PASSWORD")" >/dev/null
exec "$KAFKA_BIN/kafka-server-start.sh" "$CONFIG"
