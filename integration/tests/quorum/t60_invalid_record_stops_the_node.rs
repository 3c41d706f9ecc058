//! A committed record that does not apply stops the node (Kafka's fatal fault handler) instead of
//! being skipped: the process logs why and exits with status 1, and it stops again on the same
//! record when restarted, so its image never silently differs from the log.
//!
//! The record comes from the controller's test-only hook `GREGOR_TEST_ONLY_INVALID_RECORD_ON_CREATE`
//! (creating the named topic also writes a record the controller never validated).

use std::time::Instant;

use anyhow::{bail, ensure};
use gregor_integration::admin::{creatable, create_topics};
use gregor_integration::{GregorNode, KafkaConn};

use crate::FORM_TIMEOUT;

const HOOK: &str = "GREGOR_TEST_ONLY_INVALID_RECORD_ON_CREATE";
const STOP_LINE: &str = "metadata processing stopped";

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_record_that_does_not_apply_stops_the_node() -> anyhow::Result<()> {
    let mut node = GregorNode::start(&[])?;
    node.set_env(HOOK, "poisoned");
    node.restart_same_ports()?;

    let mut conn = KafkaConn::connect(&node.bootstrap()).await?;
    let healthy = conn
        .send(&create_topics(vec![creatable("healthy", 1, 1)], false), 7)
        .await?;
    assert_eq!(healthy.topics[0].error_code, 0, "{healthy:?}");

    // The node dies applying the entry, so the create is never acknowledged as a success.
    if let Ok(answer) = conn
        .send(&create_topics(vec![creatable("poisoned", 1, 1)], false), 7)
        .await
    {
        assert_ne!(answer.topics[0].error_code, 0, "{answer:?}");
    }
    let deadline = Instant::now() + FORM_TIMEOUT;
    let status = loop {
        if let Some(status) = node.try_exit_status()? {
            break status;
        }
        ensure!(
            Instant::now() < deadline,
            "the node kept running after a record that does not apply\n{}",
            node.stderr()
        );
        tokio::time::sleep(std::time::Duration::from_millis(25)).await;
    };
    assert_eq!(status.code(), Some(1), "{}", node.stderr());
    let stderr = node.stderr();
    assert!(
        stderr.contains(STOP_LINE) && stderr.contains("UnfenceBroker"),
        "{stderr}"
    );
    assert!(!stderr.contains("metadata record skipped"), "{stderr}");

    // The record is committed: replaying the log after a restart stops the node again.
    match node.restart_same_ports() {
        Ok(()) => bail!("the node became ready past a record that does not apply"),
        Err(error) => {
            let text = format!("{error:#}");
            assert!(text.contains("exited before it was ready"), "{text}");
            assert_eq!(node.stderr().matches(STOP_LINE).count(), 2, "{text}");
        }
    }
    Ok(())
}
