// kafkajs 2.2.4 SASL against one broker: argv = host:port mechanism user password. Connects an
// admin client (SaslHandshake, SaslAuthenticate), lists topics and prints one JSON line: the
// topics, or the error's name and message.
const { Kafka, logLevel } = require("kafkajs");

async function main() {
  const [broker, mechanism, username, password] = process.argv.slice(2);
  const kafka = new Kafka({
    clientId: "gregor-kafkajs-sasl",
    brokers: [broker],
    sasl: { mechanism, username, password },
    logLevel: logLevel.NOTHING,
    retry: { retries: 0 },
  });
  const admin = kafka.admin();
  try {
    await admin.connect();
    console.log(JSON.stringify({ topics: (await admin.listTopics()).sort() }));
  } catch (error) {
    console.log(JSON.stringify({ error: error.name, message: error.message }));
  } finally {
    await admin.disconnect();
  }
}

main();
