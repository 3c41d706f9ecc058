// kafkajs 2.2.4 producer against one broker (argv[2] = host:port, argv[3] = topic): sends ten
// records (Produce v7, non-flexible) with keys, headers and timestamps, then prints the offsets
// the broker acknowledged as one JSON line. The Python test reads them back with another client.
const { Kafka, logLevel, CompressionTypes } = require("kafkajs");

async function main() {
  const [bootstrap, topic] = process.argv.slice(2);
  const kafka = new Kafka({
    clientId: "gregor-kafkajs-producer",
    brokers: [bootstrap],
    logLevel: logLevel.NOTHING,
    retry: { retries: 5 },
  });
  const producer = kafka.producer({ idempotent: true, maxInFlightRequests: 1 });
  await producer.connect();
  try {
    const messages = [];
    for (let i = 0; i < 10; i++) {
      messages.push({
        key: `js-key-${i}`,
        value: `js-value-${i}`,
        partition: 0,
        timestamp: String(1700000000000 + i),
        headers: { origin: "kafkajs" },
      });
    }
    const plain = await producer.send({ topic, acks: -1, messages: messages.slice(0, 5) });
    const gzip = await producer.send({
      topic, acks: -1, compression: CompressionTypes.GZIP, messages: messages.slice(5),
    });
    console.log(JSON.stringify({ plain: plain.map((r) => r.baseOffset), gzip: gzip.map((r) => r.baseOffset) }));
  } finally {
    await producer.disconnect();
  }
}

main().catch((error) => {
  console.error(error);
  process.exit(1);
});
