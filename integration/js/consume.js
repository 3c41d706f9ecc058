// kafkajs 2.2.4 consumer group against one broker (argv[2] = host:port, argv[3] = group,
// argv[4] = topic, argv[5] = how many records): reads from the earliest offsets until that many
// arrived, committing after each batch, then prints the values as one JSON line.
const { Kafka, logLevel } = require("kafkajs");

async function main() {
  const [bootstrap, group, topic, count] = process.argv.slice(2);
  const want = Number(count);
  const kafka = new Kafka({
    clientId: "gregor-kafkajs-consumer",
    brokers: [bootstrap],
    logLevel: logLevel.NOTHING,
    retry: { retries: 10 },
  });
  const consumer = kafka.consumer({ groupId: group, sessionTimeout: 6000, heartbeatInterval: 500 });
  await consumer.connect();
  const values = [];
  try {
    await consumer.subscribe({ topic, fromBeginning: true });
    await new Promise((resolve, reject) => {
      const timer = setTimeout(() => reject(new Error(`only ${values.length} of ${want} records`)), 60000);
      consumer
        .run({
          eachMessage: async ({ message }) => {
            values.push(message.value.toString());
            if (values.length >= want) {
              clearTimeout(timer);
              resolve();
            }
          },
        })
        .catch(reject);
    });
    // Stop first: kafkajs commits the resolved offsets of the last batch when it stops.
    await consumer.stop();
    console.log(JSON.stringify(values));
  } finally {
    await consumer.disconnect();
  }
}

main().catch((error) => {
  console.error(error);
  process.exit(1);
});
