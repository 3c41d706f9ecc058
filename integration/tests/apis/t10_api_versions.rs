//! ApiVersions v0-4: the advertised table, header v0 on every version, throttle field from v1.

use std::collections::BTreeMap;

use gregor_integration::GregorNode;
use kafka_protocol::messages::{ApiKey, ApiVersionsRequest};
use kafka_protocol::protocol::StrBytes;
use kafka_protocol::protocol::VersionRange;

use crate::{connect, Failures};

/// The ranges this node must advertise: `(api key, min, max)`.
const REQUIRED: &[(i16, i16, i16)] = &[
    (18, 0, 4), // ApiVersions
    (3, 0, 13), // Metadata
    (60, 0, 2), // DescribeCluster
    (19, 2, 7), // CreateTopics
    (20, 1, 6), // DeleteTopics
    (37, 0, 3), // CreatePartitions
    (0, 0, 13), // Produce
    (1, 4, 18), // Fetch
    (2, 1, 10), // ListOffsets
    (22, 0, 5), // InitProducerId
];

fn request(version: i16) -> ApiVersionsRequest {
    let req = ApiVersionsRequest::default();
    if version >= 3 {
        req.with_client_software_name(StrBytes::from_static_str("gregor-integration"))
            .with_client_software_version(StrBytes::from_static_str("0.1.0"))
    } else {
        req
    }
}

#[tokio::test]
async fn every_version_advertises_the_required_ranges() {
    let node = GregorNode::start(&[]).unwrap();
    let mut conn = connect(&node).await;
    let mut f = Failures::default();
    let mut tables = Vec::new();
    for version in 0..=4i16 {
        // `send` decodes the response header as v0 for every ApiVersions version (and checks that
        // no byte is left over), so a v1 header on v3+ would fail here.
        let resp = match conn.send(&request(version), version).await {
            Ok(r) => r,
            Err(e) => {
                f.push(format!("ApiVersions v{version}: {e:#}"));
                conn = connect(&node).await;
                continue;
            }
        };
        f.eq(&format!("v{version} error_code"), resp.error_code, 0);
        if version >= 1 {
            f.eq(
                &format!("v{version} throttle_time_ms"),
                resp.throttle_time_ms,
                0,
            );
        }
        let mut table = BTreeMap::new();
        // Kafka lists the keys in ascending order (an `EnumSet` of `ApiKeys`).
        f.check(
            resp.api_keys
                .windows(2)
                .all(|w| w[0].api_key < w[1].api_key),
            || format!("v{version}: api keys not in ascending order"),
        );
        for k in &resp.api_keys {
            f.check(
                table
                    .insert(k.api_key, (k.min_version, k.max_version))
                    .is_none(),
                || format!("v{version}: api key {} listed twice", k.api_key),
            );
            f.check(k.min_version <= k.max_version, || {
                format!(
                    "v{version}: api key {} has min {} > max {}",
                    k.api_key, k.min_version, k.max_version
                )
            });
            // Everything advertised must be encodable: by the wire crate, or, for the voter
            // APIs whose newer versions (KAFKA-18775) the crate lacks, by Gregor's own codec.
            match ApiKey::try_from(k.api_key) {
                Ok(key) => {
                    let valid = match key {
                        ApiKey::AddRaftVoter => VersionRange { min: 0, max: 2 },
                        ApiKey::RemoveRaftVoter => VersionRange { min: 0, max: 1 },
                        // Advertised from v0 (KAFKA-18659) for librdkafka's compression; v0-v2
                        // are refused by closing the connection, as Kafka 4 does.
                        ApiKey::Produce => VersionRange {
                            min: 0,
                            max: key.valid_versions().max,
                        },
                        _ => key.valid_versions(),
                    };
                    f.check(
                        k.min_version >= valid.min && k.max_version <= valid.max,
                        || {
                            format!(
                            "v{version}: {key:?} advertised {}..{} outside the protocol's {valid}",
                            k.min_version, k.max_version
                        )
                        },
                    );
                }
                Err(_) => f.push(format!(
                    "v{version}: unknown api key {} advertised",
                    k.api_key
                )),
            }
        }
        for &(key, min, max) in REQUIRED {
            f.eq(
                &format!("v{version}: range of api key {key}"),
                table.get(&key).copied(),
                Some((min, max)),
            );
        }
        tables.push(table);
    }
    for w in tables.windows(2) {
        f.check(w[0] == w[1], || {
            "the advertised table differs between versions".to_string()
        });
    }
    f.assert_none(&node);
}

#[tokio::test]
async fn v3_with_an_invalid_client_software_name_is_invalid_request() {
    let node = GregorNode::start(&[]).unwrap();
    let mut conn = connect(&node).await;
    for version in 3..=4i16 {
        let req = ApiVersionsRequest::default()
            .with_client_software_name(StrBytes::from_static_str("-bad name!"))
            .with_client_software_version(StrBytes::from_static_str("1.0"));
        let resp = conn.send(&req, version).await.unwrap();
        assert_eq!(
            resp.error_code, 42,
            "ApiVersions v{version} with client_software_name \"-bad name!\" must be INVALID_REQUEST(42)"
        );
    }
}
