//! ConsumerGroupHeartbeat requests subscribing to many topic names: the names stay in the
//! frame.
//!
//! A name is a few bytes on the wire but a decoded `TopicName` of 32, then the coordinator's
//! `String`s: a heartbeat subscribing to distinct names cost 25 times its frame (issue #11).
//! A request naming more than [`NAMES_DECODED`] is read here on the wire primitives: its other
//! fields decoded, its names checked as the crate's decoder checks them and kept as
//! `groups::topic_names::TopicNames`, a slice of the frame with an offset per distinct name,
//! which the coordinator keeps for the member.

use anyhow::bail;
use bytes::{Buf, Bytes};
use gregor_actors::groups::topic_names::TopicNames;
use kafka_protocol::messages::consumer_group_heartbeat_request::TopicPartitions;
use kafka_protocol::messages::{ConsumerGroupHeartbeatRequest, GroupId};
use kafka_protocol::protocol::Decodable;

use super::dedup_decode::{array_length, need, skip_tagged_fields, string};
use super::partition_chunks::nullable_str;

/// ConsumerGroupHeartbeat requests subscribing to more names than this keep them in their
/// frame.
pub const NAMES_DECODED: usize = 1024;

/// A ConsumerGroupHeartbeat whose subscribed names stay in its frame.
#[derive(Clone, Debug)]
pub struct FramedHeartbeat {
    /// The request without its subscribed names.
    pub request: ConsumerGroupHeartbeatRequest,
    pub names: TopicNames,
}

/// Reads `body` (a ConsumerGroupHeartbeat request body) when it subscribes to more than
/// [`NAMES_DECODED`] names; `None` for other requests, decoded whole. The request is read to
/// its end first, so a malformed one is refused whole, as the crate's decoder refuses it.
pub fn scan(body: &Bytes, version: i16) -> Option<anyhow::Result<FramedHeartbeat>> {
    if !(0..=1).contains(&version) {
        return None;
    }
    let mut rest = body.clone();
    let request = read_prefix(&mut rest).ok()?;
    let count = array_length(&mut rest, true).ok()?;
    if count <= NAMES_DECODED as i64 {
        return None;
    }
    Some((|| {
        let names = TopicNames::read(&mut rest, count as usize).map_err(anyhow::Error::msg)?;
        let regex = if version >= 1 {
            nullable_str(&mut rest, true)?
        } else {
            None
        };
        let assignor = nullable_str(&mut rest, true)?;
        let owned = match array_length(&mut rest, true)? {
            -1 => None,
            count if count < 0 => bail!("a negative TopicPartitions count"),
            count => {
                // Each entry is at least 18 bytes on the wire.
                let mut owned = Vec::with_capacity((count as usize).min(rest.len() / 18));
                for _ in 0..count {
                    owned.push(TopicPartitions::decode(&mut rest, version)?);
                }
                Some(owned)
            }
        };
        skip_tagged_fields(&mut rest)?;
        Ok(FramedHeartbeat {
            request: request
                .with_subscribed_topic_regex(regex)
                .with_server_assignor(assignor)
                .with_topic_partitions(owned),
            names,
        })
    })())
}

/// The fields before the subscribed names.
fn read_prefix(buf: &mut Bytes) -> anyhow::Result<ConsumerGroupHeartbeatRequest> {
    let group_id = string(buf, true, "the group id")?;
    let member_id = string(buf, true, "the member id")?;
    need(buf, 4)?;
    let member_epoch = buf.get_i32();
    let instance_id = nullable_str(buf, true)?;
    let rack_id = nullable_str(buf, true)?;
    need(buf, 4)?;
    let rebalance_timeout_ms = buf.get_i32();
    Ok(ConsumerGroupHeartbeatRequest::default()
        .with_group_id(GroupId(group_id))
        .with_member_id(member_id)
        .with_member_epoch(member_epoch)
        .with_instance_id(instance_id)
        .with_rack_id(rack_id)
        .with_rebalance_timeout_ms(rebalance_timeout_ms))
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;
    use bytes::BytesMut;
    use kafka_protocol::messages::TopicName;
    use kafka_protocol::protocol::{Encodable, StrBytes};

    fn request(count: usize, version: i16) -> ConsumerGroupHeartbeatRequest {
        ConsumerGroupHeartbeatRequest::default()
            .with_group_id(GroupId(StrBytes::from_static_str("g")))
            .with_member_id(StrBytes::from_static_str("m"))
            .with_member_epoch(3)
            .with_instance_id(Some(StrBytes::from_static_str("i")))
            .with_rack_id(None)
            .with_rebalance_timeout_ms(5_000)
            .with_subscribed_topic_names(Some(
                (0..count)
                    .map(|index| TopicName(StrBytes::from_string(format!("t{}", index % 1_000))))
                    .collect(),
            ))
            .with_subscribed_topic_regex((version >= 1).then(|| StrBytes::from_static_str("x.*")))
            .with_server_assignor(Some(StrBytes::from_static_str("range")))
            .with_topic_partitions(Some(vec![TopicPartitions::default()
                .with_topic_id(uuid::Uuid::from_u128(7))
                .with_partitions(vec![0, 2])]))
    }

    fn body(request: &ConsumerGroupHeartbeatRequest, version: i16) -> Bytes {
        let mut body = BytesMut::new();
        request.encode(&mut body, version).unwrap();
        body.freeze()
    }

    #[test]
    fn many_names_are_read_from_the_frame_as_decoded() {
        for version in 0..=1 {
            let encoded = body(&request(1_500, version), version);
            let decoded =
                ConsumerGroupHeartbeatRequest::decode(&mut encoded.clone(), version).unwrap();
            let framed = scan(&encoded, version).unwrap().unwrap();
            let mut shell = decoded.clone();
            let names = shell.subscribed_topic_names.take().unwrap();
            assert_eq!(framed.request, shell, "v{version}");
            assert_eq!(
                framed.names,
                TopicNames::from_names(names.iter().map(|n| n.as_str())),
                "v{version}"
            );
            assert_eq!(framed.names.len(), 1_000, "each name once");
            assert!(scan(&body(&request(1_024, version), version), version).is_none());
        }
    }

    #[test]
    fn a_malformed_framed_request_is_refused_whole() {
        let encoded = body(&request(1_500, 1), 1);
        assert!(scan(&encoded.slice(..encoded.len() - 4), 1)
            .unwrap()
            .is_err());
    }

    #[test]
    fn a_name_that_is_not_utf8_is_read_as_kafka_reads_it() {
        let encoded = body(&request(1_500, 1), 1);
        let mut bad = BytesMut::from(&encoded[..]);
        let at = bad.windows(4).position(|w| w == b"t123").unwrap();
        bad[at + 1] = 0xff;
        let framed = scan(&bad.freeze(), 1).unwrap().unwrap();
        // The first of the two copies of "t123" changed: one more distinct name.
        assert!(framed.names.contains("t\u{fffd}23"));
        assert_eq!(framed.names.len(), 1_001);
    }
}
