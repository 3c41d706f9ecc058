//! Brokers that are not the active controller get producer-id blocks from it through
//! AllocateProducerIds on its controller listener (KIP-730): InitProducerId answers with ids that
//! are unique across brokers, consecutive within a broker's block.

use gregor_integration::{wait_until, KafkaConn};
use kafka_protocol::messages::{InitProducerIdRequest, ProducerId};
use kafka_protocol::protocol::StrBytes;

use crate::{Cluster, FORM_TIMEOUT};

async fn init_producer_id(
    bootstrap: &str,
    transactional_id: Option<&str>,
) -> anyhow::Result<(i16, i64, i16)> {
    let mut conn = KafkaConn::connect(bootstrap).await?;
    let request = InitProducerIdRequest::default()
        .with_transactional_id(transactional_id.map(|t| StrBytes::from_string(t.to_owned()).into()))
        .with_transaction_timeout_ms(60_000)
        .with_producer_id(ProducerId(-1))
        .with_producer_epoch(-1);
    let response = conn.send(&request, 4).await?;
    Ok((
        response.error_code,
        response.producer_id.0,
        response.producer_epoch,
    ))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn brokers_get_distinct_blocks_from_the_active_controller() -> anyhow::Result<()> {
    let cluster = Cluster::start(1, 2)?;
    let brokers: Vec<String> = cluster.brokers.iter().map(|(_, n)| n.bootstrap()).collect();
    let mut first = Vec::new();
    for broker in &brokers {
        let id = match wait_until("a producer id from the broker", FORM_TIMEOUT, || async {
            let (code, id, epoch) = init_producer_id(broker, None).await?;
            Ok((code == 0).then_some((id, epoch)))
        })
        .await
        {
            Ok(id) => id,
            Err(error) => {
                for (node_id, node) in cluster.controllers.iter().chain(&cluster.brokers) {
                    eprintln!("--- node {node_id}:\n{}", node.stderr());
                }
                return Err(error);
            }
        };
        assert_eq!(id.1, 0, "a new producer starts at epoch 0");
        first.push(id.0);
    }
    // Each broker has its own block of 1000.
    assert_ne!(first[0] / 1000, first[1] / 1000, "blocks {first:?}");
    let again = init_producer_id(&brokers[0], None).await?;
    assert_eq!(again, (0, first[0] + 1, 0));
    // Transactions are not served: the coordinator is not available, nothing is written.
    let transactional = init_producer_id(&brokers[1], Some("txn-1")).await?;
    assert_eq!(transactional, (15, -1, -1));
    Ok(())
}
