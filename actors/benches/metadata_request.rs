//! Apache Kafka's `KRaftMetadataRequestBenchmark` (`testMetadataRequestForAllTopics`), shape
//! for shape: an all-topics Metadata request against an image of 5 brokers and 500 / 1,000 /
//! 5,000 topics x 10 / 20 / 50 partitions (replication factor 3, replicas the next brokers
//! round the ring), no authorizer. One iteration builds the response from the image as the
//! handler does (the same functions: the topics written straight from the image to bytes)
//! and encodes the rest as the network layer does (size, header, body into a `BytesMut`
//! sized once from `encoded_size_bound`), at Metadata v12.
//!
//! Run: `cargo bench -p gregor-actors --bench metadata_request -- --warm-up-time 1 --measurement-time 3`

use std::sync::Arc;
use std::time::Duration;

use bytes::{BufMut, BytesMut};
use criterion::{BenchmarkId, Criterion, Throughput};
use kafka_protocol::messages::{BrokerId, MetadataResponse, ResponseHeader};
use kafka_protocol::protocol::{Encodable, StrBytes};
use uuid::Uuid;

use gregor_actors::handlers::{
    encode_all_topics, encoded_size_bound, response_brokers, BrokerTable, EncodedList, ErrorCounts,
};
use gregor_publishers::records::{Endpoint, PartitionRecord, RegisterBrokerRecord, TopicRecord};
use gregor_publishers::{MetadataDelta, MetadataImage, MetadataRecord, Provenance};

/// The node's allocator (`node/src/main.rs`), so the figures are the node's.
#[global_allocator]
static GLOBAL: mimalloc::MiMalloc = mimalloc::MiMalloc;

const BROKERS: i32 = 5;
const REPLICATION_FACTOR: i32 = 3;
const LISTENER: &str = "PLAINTEXT";
const VERSION: i16 = 12;
/// Kafka's authorized-operations value when the client did not ask for them.
const OPERATIONS_NOT_REQUESTED: i32 = i32::MIN;

fn image(topics: usize, partitions: usize) -> MetadataImage {
    let mut records = Vec::new();
    for broker in 0..BROKERS {
        records.push(MetadataRecord::RegisterBroker(RegisterBrokerRecord {
            broker_id: broker,
            incarnation_id: Uuid::from_u128(broker as u128 + 1),
            broker_epoch: 100 + i64::from(broker),
            endpoints: vec![Endpoint {
                name: LISTENER.into(),
                host: format!("broker-{broker}.example.com"),
                port: 9092,
                security_protocol: 0,
            }],
            features: vec![],
            rack: None,
            fenced: false,
            in_controlled_shutdown: false,
            log_dirs: vec![],
        }));
    }
    let mut leader = 0;
    for topic in 0..topics {
        let topic_id = Uuid::from_u128(0x0007_091c_0000_0000 + topic as u128);
        records.push(MetadataRecord::Topic(TopicRecord {
            name: format!("topic{topic}"),
            topic_id,
        }));
        for partition in 0..partitions as i32 {
            let replicas: Vec<i32> = (0..REPLICATION_FACTOR)
                .map(|n| (leader + n) % BROKERS)
                .collect();
            records.push(MetadataRecord::Partition(PartitionRecord {
                partition_id: partition,
                topic_id,
                isr: replicas.clone(),
                leader,
                replicas,
                removing_replicas: vec![],
                adding_replicas: vec![],
                directories: vec![],
                leader_recovery_state: 0,
                leader_epoch: 0,
                partition_epoch: 0,
            }));
            leader = (leader + 1) % BROKERS;
        }
    }
    let mut delta = MetadataDelta::new(Arc::new(MetadataImage::empty()));
    for record in &records {
        if let Err(error) = delta.replay(record) {
            panic!("the benchmark's records do not replay: {error}");
        }
    }
    delta.apply(Provenance::default())
}

/// What the handler and the network layer do for one all-topics request, without an
/// authorizer: the topics encoded from the image with their error codes counted, then the
/// rest of the response encoded around an empty list (the node writes the topics' bytes in
/// its place).
fn all_topics_metadata(image: &MetadataImage) -> (BytesMut, EncodedList) {
    let brokers = BrokerTable::new(image, LISTENER);
    let mut errors = ErrorCounts::default();
    let topics = encode_all_topics(
        image,
        &brokers,
        VERSION,
        |_| true,
        |_| OPERATIONS_NOT_REQUESTED,
        &mut errors,
    );
    let response = MetadataResponse::default()
        .with_brokers(response_brokers(image, LISTENER))
        .with_cluster_id(Some(StrBytes::from_static_str("bench-cluster")))
        .with_controller_id(BrokerId(0));
    // As `encode_response`: the buffer sized once from the response's size bound.
    let mut out = BytesMut::with_capacity(9 + encoded_size_bound(&response));
    out.put_i32(0);
    let encoded = ResponseHeader::default()
        .with_correlation_id(7)
        .encode(&mut out, 1)
        .and_then(|()| response.encode(&mut out, VERSION));
    if let Err(error) = encoded {
        panic!("the response does not encode: {error}");
    }
    std::hint::black_box(errors);
    (out, topics)
}

fn bench(c: &mut Criterion) {
    let mut group = c.benchmark_group("metadata_request_all_topics");
    for (topics, partitions) in [
        (500, 10),
        (1_000, 10),
        (5_000, 10),
        (500, 20),
        (1_000, 20),
        (5_000, 20),
        (500, 50),
    ] {
        let image = image(topics, partitions);
        let (rest, listed) = all_topics_metadata(&image);
        let size = rest.len() + listed.bytes.len();
        println!("{topics} topics x {partitions} partitions: {size} bytes per response");
        group.throughput(Throughput::Elements((topics * partitions) as u64));
        group.bench_function(
            BenchmarkId::from_parameter(format!("{topics}x{partitions}")),
            |b| b.iter_with_large_drop(|| all_topics_metadata(&image)),
        );
    }
    group.finish();
}

fn main() {
    // As the node does (`node/src/main.rs`), so its image is measured on the same pages.
    if std::env::var_os("MIMALLOC_ALLOW_THP").is_none() {
        if let Err(error) = rustix::thread::disable_transparent_huge_pages(true) {
            eprintln!("transparent huge pages stay on: {error}");
        }
    }
    let mut criterion = Criterion::default()
        .warm_up_time(Duration::from_secs(1))
        .measurement_time(Duration::from_secs(3))
        .configure_from_args();
    bench(&mut criterion);
    criterion.final_summary();
}
