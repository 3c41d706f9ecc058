// kafkajs 2.2.4 reading from the latest offset (argv[2] = host:port, argv[3] = topic, which
// already holds records): admin.fetchTopicOffsets, then a consumer in a new group with
// fromBeginning false (ListOffsets v3 for LATEST) that must get only what a producer sends after
// it joined. Prints {"offsets": [...], "consumed": [[offset, value], ...]} as one JSON line.
const { Kafka, logLevel } = require("kafkajs");

async function main() {
  const [bootstrap, topic] = process.argv.slice(2);
  const kafka = new Kafka({
    clientId: "gregor-kafkajs-latest",
    brokers: [bootstrap],
    logLevel: logLevel.NOTHING,
    retry: { retries: 3 },
  });
  const admin = kafka.admin();
  await admin.connect();
  const offsets = await admin.fetchTopicOffsets(topic);
  await admin.disconnect();

  const consumer = kafka.consumer({ groupId: `latest-${topic}`, sessionTimeout: 6000, heartbeatInterval: 500 });
  const producer = kafka.producer();
  await Promise.all([consumer.connect(), producer.connect()]);
  const consumed = [];
  try {
    await consumer.subscribe({ topic, fromBeginning: false });
    const running = consumer.run({
      eachMessage: async ({ message }) => {
        consumed.push([message.offset, message.value.toString()]);
      },
    });
    // Where the consumer starts (LATEST) is resolved after it joins its group, so a record sent
    // before that is behind its position: send one every 200 ms until some arrive.
    const deadline = Date.now() + 60000;
    for (let n = 0; consumed.length === 0; n++) {
      if (Date.now() > deadline) {
        throw new Error("nothing consumed from the latest offset in 60 s");
      }
      await producer.send({ topic, messages: [{ value: `after-${n}` }] });
      await new Promise((resolve) => setTimeout(resolve, 200));
    }
    await running;
    await consumer.stop();
    console.log(JSON.stringify({ offsets, consumed }));
  } finally {
    await Promise.all([consumer.disconnect(), producer.disconnect()]);
  }
}

main().catch((error) => {
  console.error(error);
  process.exit(1);
});
