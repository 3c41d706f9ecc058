//! Which quota applies to a request: Kafka's eight-level precedence, shared with the `default`
//! quota-callback plug-in (see `gregor_publishers::quota_callback::table`).

pub use gregor_publishers::quota_callback::sanitize;
pub use gregor_publishers::quota_callback::table::{
    desanitize, EntityName, MetricTags, QuotaEntity, QuotaTable,
};
