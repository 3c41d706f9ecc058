//! CreatePartitions v0-3: increases, assignments, validate_only, and Kafka's errors.

use gregor_integration::admin::create_partitions;
use gregor_integration::GregorNode;
use kafka_protocol::messages::CreatePartitionsRequest;

use crate::{connect, create_ok, Failures};

#[tokio::test]
async fn every_version_grows_partitions_and_reports_errors() {
    let node = GregorNode::start(&[]).unwrap();
    let mut conn = connect(&node).await;
    let mut f = Failures::default();
    for version in 0..=3i16 {
        let name = format!("cp-v{version}");
        create_ok(&mut conn, &[(&name, 1)]).await;
        // (case, count, assignments, validate_only, expected code, expected message, partitions after)
        #[allow(clippy::type_complexity)]
        let steps: Vec<(
            &str,
            i32,
            Option<Vec<Vec<i32>>>,
            bool,
            i16,
            Option<String>,
            usize,
        )> = vec![
            ("increase 1 -> 3", 3, None, false, 0, None, 3),
            (
                "decrease 3 -> 2",
                2,
                None,
                false,
                37,
                // KRaft's ReplicationControlManager text (not the old ZooKeeper-era one).
                Some(format!(
                    "The topic {name} currently has 3 partition(s); 2 would not be an increase."
                )),
                3,
            ),
            (
                "same count 3",
                3,
                None,
                false,
                37,
                Some("Topic already has 3 partition(s).".into()),
                3,
            ),
            ("validate_only 3 -> 5", 5, None, true, 0, None, 3),
            (
                "increase 3 -> 5 with assignments",
                5,
                Some(vec![vec![1], vec![1]]),
                false,
                0,
                None,
                5,
            ),
            (
                "assignment count mismatch",
                8,
                Some(vec![vec![1]]),
                false,
                39,
                None,
                5,
            ),
            (
                "assignment to an unknown broker",
                6,
                Some(vec![vec![42]]),
                false,
                39,
                None,
                5,
            ),
        ];
        for (case, count, assignments, validate_only, code, message, after) in steps {
            let what = |w: &str| format!("v{version} {case}: {w}");
            let resp = match conn
                .send::<CreatePartitionsRequest>(
                    &create_partitions(&name, count, assignments, validate_only),
                    version,
                )
                .await
            {
                Ok(r) => r,
                Err(e) => {
                    f.push(what(&format!("{e:#}")));
                    conn = connect(&node).await;
                    continue;
                }
            };
            f.eq(&what("throttle_time_ms"), resp.throttle_time_ms, 0);
            f.eq(&what("results"), resp.results.len(), 1);
            if let Some(r) = resp.results.first() {
                f.eq(&what("name"), r.name.0.to_string(), name.clone());
                f.eq(&what("error_code"), r.error_code, code);
                if code == 0 || message.is_some() {
                    f.eq(
                        &what("error_message"),
                        r.error_message.as_ref().map(|m| m.to_string()),
                        message,
                    );
                }
            }
            crate::wait_topic(&mut conn, &name, Some(after)).await;
        }

        // Unknown topic: UNKNOWN_TOPIC_OR_PARTITION with a null message, as KRaft answers.
        let resp = conn
            .send::<CreatePartitionsRequest>(
                &create_partitions("cp-missing", 2, None, false),
                version,
            )
            .await
            .unwrap();
        f.eq(
            &format!("v{version} unknown topic"),
            resp.results
                .iter()
                .map(|r| (r.name.0.to_string(), r.error_code, r.error_message.clone()))
                .collect::<Vec<_>>(),
            vec![("cp-missing".to_string(), 3, None)],
        );
    }
    f.assert_none(&node);
}
