// kafkajs 2.2.4 admin against one broker (argv[2] = host:port): prints one JSON line per step so
// the Python test can check every answer. kafkajs uses only non-flexible versions (ApiVersions
// v2, Metadata v6, CreateTopics v3, DeleteTopics v1, CreatePartitions v1; clients.md #8).
const { Kafka, logLevel } = require("kafkajs");

async function main() {
  const kafka = new Kafka({
    clientId: "gregor-kafkajs",
    brokers: [process.argv[2]],
    logLevel: logLevel.NOTHING,
    retry: { retries: 2 },
  });
  const admin = kafka.admin();
  const out = (step, value) => console.log(JSON.stringify({ step, value }));
  await admin.connect();
  try {
    out("create", await admin.createTopics({
      topics: [{ topic: "js-a", numPartitions: 3 }, { topic: "js-b", numPartitions: 1 }],
    }));
    // kafkajs answers false when every topic already exists.
    out("create-again", await admin.createTopics({ topics: [{ topic: "js-a", numPartitions: 3 }] }));
    out("list", (await admin.listTopics()).sort());
    await admin.createPartitions({ topicPartitions: [{ topic: "js-a", count: 5 }] });
    const md = await admin.fetchTopicMetadata({ topics: ["js-a"] });
    out("partitions", md.topics[0].partitions.map((p) => [p.partitionId, p.leader]).sort((a, b) => a[0] - b[0]));
    const cluster = await admin.describeCluster();
    out("cluster", { controller: cluster.controller, brokers: cluster.brokers.map((b) => b.nodeId) });
    await admin.deleteTopics({ topics: ["js-b"] });
    out("list-after-delete", (await admin.listTopics()).sort());
    try {
      await admin.createPartitions({ topicPartitions: [{ topic: "js-a", count: 2 }] });
      out("shrink", "accepted");
    } catch (error) {
      out("shrink", { type: error.type || null, message: String(error.message) });
    }
  } finally {
    await admin.disconnect();
  }
}

main().catch((error) => {
  console.error(String(error && error.stack ? error.stack : error));
  process.exit(1);
});
