//! Writing a throttle time into a response body (KIP-219: the response carries it, the
//! connection is muted for it). Versions without the field simply do not encode it.

use kafka_protocol::messages::ResponseKind;

macro_rules! throttle_field {
    ($body:expr, $($variant:ident),+ $(,)?) => {
        match $body {
            $(ResponseKind::$variant(response) => Some(&mut response.throttle_time_ms),)+
            _ => None,
        }
    };
}

fn field(body: &mut ResponseKind) -> Option<&mut i32> {
    throttle_field!(
        body,
        ApiVersions,
        Metadata,
        DescribeCluster,
        CreateTopics,
        DeleteTopics,
        CreatePartitions,
        DescribeConfigs,
        AlterConfigs,
        IncrementalAlterConfigs,
        ListConfigResources,
        DescribeClientQuotas,
        AlterClientQuotas,
        AddRaftVoter,
        RemoveRaftVoter,
        Produce,
        Fetch,
        ListOffsets,
        FindCoordinator,
        JoinGroup,
        SyncGroup,
        Heartbeat,
        LeaveGroup,
        OffsetCommit,
        OffsetFetch,
        InitProducerId,
    )
}

/// Sets the body's `throttle_time_ms` to the larger of its own and `throttle_ms` (Kafka sends
/// the maximum across the quotas a request violated); returns the value now in the body (0 for
/// a body without the field).
pub fn raise_throttle_time(body: &mut ResponseKind, throttle_ms: i32) -> i32 {
    match field(body) {
        Some(current) => {
            *current = (*current).max(throttle_ms);
            *current
        }
        None => 0,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use kafka_protocol::messages::{CreateTopicsResponse, MetadataResponse};

    #[test]
    fn keeps_the_maximum() {
        let mut body =
            ResponseKind::CreateTopics(CreateTopicsResponse::default().with_throttle_time_ms(5000));
        assert_eq!(raise_throttle_time(&mut body, 1000), 5000);
        let mut body = ResponseKind::Metadata(MetadataResponse::default());
        assert_eq!(raise_throttle_time(&mut body, 1000), 1000);
    }
}
