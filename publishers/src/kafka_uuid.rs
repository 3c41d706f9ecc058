//! Kafka's textual form of a UUID (topic, directory and cluster ids): 22 base64url characters
//! without padding, as `org.apache.kafka.common.Uuid.toString` prints them. Logs and tools use
//! this form so an id can be matched against Kafka's tools and logs.

use std::fmt;

use base64::engine::general_purpose::URL_SAFE_NO_PAD;
use base64::Engine as _;
use uuid::Uuid;

/// Displays a UUID in Kafka's form: `tracing::info!(id = %KafkaUuid(id), ...)`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct KafkaUuid(pub Uuid);

impl fmt::Display for KafkaUuid {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&to_kafka_string(self.0))
    }
}

/// Kafka's textual form of `id`.
pub fn to_kafka_string(id: Uuid) -> String {
    URL_SAFE_NO_PAD.encode(id.as_bytes())
}

/// Parses Kafka's textual form; `None` for anything else.
pub fn from_kafka_string(text: &str) -> Option<Uuid> {
    let bytes = URL_SAFE_NO_PAD.decode(text).ok()?;
    Uuid::from_slice(&bytes).ok()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn prints_and_parses_as_kafka_does() {
        assert_eq!(KafkaUuid(Uuid::nil()).to_string(), "AAAAAAAAAAAAAAAAAAAAAA");
        let id = Uuid::from_u128(0x0102_0304_0506_0708_090a_0b0c_0d0e_0f10);
        assert_eq!(to_kafka_string(id), "AQIDBAUGBwgJCgsMDQ4PEA");
        assert_eq!(from_kafka_string("AQIDBAUGBwgJCgsMDQ4PEA"), Some(id));
        assert_eq!(from_kafka_string("not a uuid"), None);
        assert_eq!(from_kafka_string("AQIDBAUGBwgJCgsM"), None);
    }
}
