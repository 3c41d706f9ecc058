use kafka_protocol::messages::incremental_alter_configs_request::AlterConfigsResource;
use kafka_protocol::messages::{alter_configs_request, AlterConfigsRequest};

use super::*;
use crate::controller::logic::configs::testing::{image_with, resource, s};

/// The functions under test with Kafka's default group config bounds.
fn incremental_alter_configs(
    image: &MetadataImage,
    request: &IncrementalAlterConfigsRequest,
    node_id: Option<i32>,
) -> ControllerResult<IncrementalAlterConfigsResponse> {
    super::incremental_alter_configs(image, request, node_id, &ConfigRules::default())
}

fn alter_configs(
    image: &MetadataImage,
    request: &AlterConfigsRequest,
    node_id: Option<i32>,
) -> ControllerResult<AlterConfigsResponse> {
    super::alter_configs(image, request, node_id, &ConfigRules::default())
}

const SET: i8 = 0;
const DELETE: i8 = 1;
const APPEND: i8 = 2;
const SUBTRACT: i8 = 3;

fn incremental(
    resources: Vec<AlterConfigsResource>,
    validate_only: bool,
) -> IncrementalAlterConfigsRequest {
    IncrementalAlterConfigsRequest::default()
        .with_resources(resources)
        .with_validate_only(validate_only)
}

/// (code, message) per resource.
fn outcome(
    result: &ControllerResult<IncrementalAlterConfigsResponse>,
) -> Vec<(i16, Option<String>)> {
    result
        .response
        .responses
        .iter()
        .map(|r| {
            (
                r.error_code,
                r.error_message.as_ref().map(ToString::to_string),
            )
        })
        .collect()
}

fn config(resource_type: i8, name: &str, key: &str, value: Option<&str>) -> MetadataRecord {
    MetadataRecord::Config(ConfigRecord {
        resource_type,
        resource_name: name.into(),
        name: key.into(),
        value: value.map(str::to_owned),
    })
}

#[test]
fn groups_need_not_exist_and_bad_entries_do_not_block_good_ones() {
    let image = image_with(&[]);
    let request = incremental(
        vec![
            resource(
                rt::GROUP,
                "G1",
                &[("consumer.heartbeat.interval.ms", SET, Some("10000"))],
            ),
            resource(
                rt::GROUP,
                "G2",
                &[("consumer.heartbeat.interval.ms", SET, Some("1"))],
            ),
            resource(
                rt::GROUP,
                "",
                &[("consumer.heartbeat.interval.ms", SET, Some("6000"))],
            ),
            resource(rt::TOPIC, "missing", &[("retention.ms", SET, Some("1"))]),
        ],
        false,
    );
    let result = incremental_alter_configs(&image, &request, Some(1));
    assert_eq!(
        outcome(&result),
        [
            (0, None),
            (40, Some("consumer.heartbeat.interval.ms must be greater than or equal to group.consumer.min.heartbeat.interval.ms".into())),
            (42, Some("Default group resources are not allowed.".into())),
            (3, Some("The topic 'missing' does not exist.".into())),
        ]
    );
    assert_eq!(
        result.records,
        [config(
            rt::GROUP,
            "G1",
            "consumer.heartbeat.interval.ms",
            Some("10000")
        )]
    );
    // validate_only: the same answers, nothing written.
    let dry = incremental_alter_configs(&image, &request.clone().with_validate_only(true), Some(1));
    assert_eq!(outcome(&dry), outcome(&result));
    assert!(dry.records.is_empty());
}

#[test]
fn broker_side_prechecks() {
    let image = image_with(&[]);
    let request = incremental(
        vec![
            resource(
                rt::GROUP,
                "dup",
                &[("consumer.heartbeat.interval.ms", SET, Some("6000"))],
            ),
            resource(
                rt::GROUP,
                "dup",
                &[("consumer.heartbeat.interval.ms", SET, Some("7000"))],
            ),
            resource(
                rt::GROUP,
                "keys",
                &[("a", SET, Some("1")), ("a", DELETE, None)],
            ),
            resource(
                rt::GROUP,
                "nulls",
                &[("a", SET, None), ("b", DELETE, None), ("c", APPEND, None)],
            ),
            resource(rt::BROKER, "2", &[("log.retention.ms", SET, Some("1"))]),
            resource(rt::BROKER, "x", &[("log.retention.ms", SET, Some("1"))]),
            resource(64, "r", &[]),
            resource(rt::BROKER_LOGGER, "1", &[("root", SET, Some("INFO"))]),
        ],
        false,
    );
    assert_eq!(
        precheck_incremental(&request, Some(1)),
        [
            Precheck::Failed(ApiError::invalid_request(
                "Each resource must appear at most once."
            )),
            Precheck::Failed(ApiError::invalid_request(
                "Each resource must appear at most once."
            )),
            Precheck::Failed(ApiError::invalid_request(
                "Error due to duplicate config keys"
            )),
            Precheck::Failed(ApiError::invalid_request(
                "Null value not supported for : a, c"
            )),
            Precheck::Failed(ApiError::invalid_request(
                "Unexpected broker id, expected 1, but received 2"
            )),
            Precheck::Failed(ApiError::invalid_request(
                "Node id must be an integer, but it is: x"
            )),
            Precheck::Failed(ApiError::invalid_request("Unknown resource type 64")),
            Precheck::BrokerLogger,
        ]
    );
    let result = incremental_alter_configs(&image, &request, Some(1));
    assert!(result.records.is_empty());
    assert!(result.response.responses.iter().all(|r| r.error_code == 42));
}

#[test]
fn topic_ops_append_subtract_delete() {
    let image = image_with(&[config(
        rt::TOPIC,
        "orders",
        "cleanup.policy",
        Some("delete"),
    )]);
    let result = incremental_alter_configs(
        &image,
        &incremental(
            vec![resource(
                rt::TOPIC,
                "orders",
                &[
                    ("cleanup.policy", APPEND, Some("compact")),
                    ("retention.ms", SET, Some("1000")),
                    ("segment.ms", DELETE, None),
                ],
            )],
            false,
        ),
        Some(1),
    );
    assert_eq!(outcome(&result), [(0, None)]);
    assert_eq!(
        result.records,
        [
            config(
                rt::TOPIC,
                "orders",
                "cleanup.policy",
                Some("delete,compact")
            ),
            config(rt::TOPIC, "orders", "retention.ms", Some("1000")),
        ]
    );
    let image = super::super::testing::apply(&image, &result.records);
    let result = incremental_alter_configs(
        &image,
        &incremental(
            vec![
                resource(
                    rt::TOPIC,
                    "orders",
                    &[
                        ("cleanup.policy", SUBTRACT, Some("delete")),
                        ("retention.ms", DELETE, None),
                    ],
                ),
                resource(rt::TOPIC, "orders2", &[("retention.ms", APPEND, Some("1"))]),
            ],
            false,
        ),
        Some(1),
    );
    assert_eq!(
        result.records,
        [
            config(rt::TOPIC, "orders", "cleanup.policy", Some("compact")),
            config(rt::TOPIC, "orders", "retention.ms", None),
        ]
    );
    assert_eq!(
        outcome(&result)[1],
        (3, Some("The topic 'orders2' does not exist.".into()))
    );
}

#[test]
fn topic_validation_errors() {
    let image = image_with(&[]);
    let result = incremental_alter_configs(
        &image,
        &incremental(
            vec![
                resource(rt::TOPIC, "orders", &[("retention.ms", APPEND, Some("1"))]),
                resource(rt::TOPIC, "orders", &[("nope", SET, Some("1"))]),
            ],
            false,
        ),
        Some(1),
    );
    // Duplicated resources: both refused.
    assert!(outcome(&result).iter().all(|(code, _)| *code == 42));
    let result = incremental_alter_configs(
        &image,
        &incremental(
            vec![
                resource(rt::TOPIC, "orders", &[("retention.ms", APPEND, Some("1"))]),
                resource(rt::TOPIC, "orders2", &[("nope", SET, Some("1"))]),
                resource(rt::TOPIC, "", &[]),
                resource(rt::TOPIC, "bad name", &[]),
                resource(
                    rt::TOPIC,
                    "orders3",
                    &[("segment.bytes", SET, Some("1048575"))],
                ),
            ],
            false,
        ),
        Some(1),
    );
    assert_eq!(
        outcome(&result),
        [
            (40, Some("Can't APPEND to key retention.ms because its type is not LIST.".into())),
            (3, Some("The topic 'orders2' does not exist.".into())),
            (42, Some("Default topic resources are not allowed.".into())),
            (17, Some("Topic name is invalid: 'bad name' contains one or more characters other than ASCII alphanumerics, '.', '_' and '-'".into())),
            (40, Some("Invalid value 1048575 for configuration segment.bytes: Value must be at least 1048576".into())),
        ]
    );
    assert!(result.records.is_empty());
    let unknown = incremental_alter_configs(
        &image,
        &incremental(
            vec![resource(rt::TOPIC, "orders", &[("nope", SET, Some("1"))])],
            false,
        ),
        Some(1),
    );
    assert_eq!(
        outcome(&unknown),
        [(40, Some("Unknown topic config name: nope".into()))]
    );
}

#[test]
fn broker_resources() {
    let image = image_with(&[config(rt::BROKER, "", "log.retention.ms", Some("5000"))]);
    let result = incremental_alter_configs(
        &image,
        &incremental(
            vec![
                resource(rt::BROKER, "", &[("log.retention.ms", SET, Some("5000"))]),
                resource(rt::BROKER, "1", &[("num.io.threads", SET, Some("8"))]),
                resource(rt::BROKER, "1", &[]),
            ],
            false,
        ),
        Some(1),
    );
    // Duplicate "1" resources refused; the unchanged cluster default is still written.
    assert_eq!(outcome(&result)[0], (0, None));
    assert_eq!(
        result.records,
        [config(rt::BROKER, "", "log.retention.ms", Some("5000"))]
    );
    let result = incremental_alter_configs(
        &image,
        &incremental(
            vec![resource(
                rt::BROKER,
                "1",
                &[("num.io.threads", SET, Some("8"))],
            )],
            false,
        ),
        Some(1),
    );
    assert_eq!(
        outcome(&result),
        [(
            42,
            Some("Cannot update these configs dynamically: Set(num.io.threads)".into())
        )]
    );
    // On the controller side (`None`: the request arrived on a controller listener) any node
    // id may be named, and an unregistered one is refused by the registration check.
    let result = incremental_alter_configs(
        &image,
        &incremental(
            vec![resource(
                rt::BROKER,
                "7",
                &[("log.retention.ms", SET, Some("1"))],
            )],
            false,
        ),
        None,
    );
    assert_eq!(
        outcome(&result),
        [(102, Some("No node with id 7 found.".into()))]
    );
    let result = incremental_alter_configs(
        &image,
        &incremental(
            vec![resource(
                rt::BROKER,
                "-1",
                &[("log.retention.ms", SET, Some("1"))],
            )],
            false,
        ),
        None,
    );
    assert_eq!(
        outcome(&result),
        [(42, Some("Invalid negative broker ID.".into()))]
    );
}

#[test]
fn client_metrics_create_and_delete() {
    let image = image_with(&[]);
    let result = incremental_alter_configs(
        &image,
        &incremental(
            vec![
                resource(
                    rt::CLIENT_METRICS,
                    "sub1",
                    &[
                        ("metrics", SET, Some("org.apache.kafka.")),
                        ("interval.ms", SET, Some("1000")),
                    ],
                ),
                resource(
                    rt::CLIENT_METRICS,
                    "sub2",
                    &[("interval.ms", SET, Some("50"))],
                ),
                resource(rt::CLIENT_METRICS, "", &[("interval.ms", SET, Some("500"))]),
                resource(
                    rt::CLIENT_METRICS,
                    "sub3",
                    &[("match", SET, Some("client_idx=a"))],
                ),
            ],
            false,
        ),
        Some(1),
    );
    assert_eq!(
        outcome(&result),
        [
            (0, None),
            (42, Some("Invalid value 50 for interval.ms, interval must be between 100 and 3600000 (1 hour)".into())),
            (42, Some("Subscription name can't be empty".into())),
            (40, Some("Illegal client matching pattern: client_idx=a".into())),
        ]
    );
    assert_eq!(result.records.len(), 2);
}

#[test]
fn legacy_alter_replaces_the_whole_set() {
    let image = image_with(&[
        config(
            rt::GROUP,
            "g",
            "consumer.heartbeat.interval.ms",
            Some("6000"),
        ),
        config(rt::GROUP, "g", "consumer.session.timeout.ms", Some("50000")),
    ]);
    let request = AlterConfigsRequest::default().with_resources(vec![
        alter_configs_request::AlterConfigsResource::default()
            .with_resource_type(rt::GROUP)
            .with_resource_name(s("g"))
            .with_configs(vec![alter_configs_request::AlterableConfig::default()
                .with_name(s("consumer.session.timeout.ms"))
                .with_value(Some(s("55000")))]),
        alter_configs_request::AlterConfigsResource::default()
            .with_resource_type(rt::BROKER_LOGGER)
            .with_resource_name(s("1")),
    ]);
    let result = alter_configs(&image, &request, Some(1));
    let codes: Vec<_> = result
        .response
        .responses
        .iter()
        .map(|r| {
            (
                r.error_code,
                r.error_message.as_ref().map(ToString::to_string),
            )
        })
        .collect();
    assert_eq!(
        codes,
        [(0, None), (42, Some("Unknown resource type 8".into()))]
    );
    assert_eq!(
        result.records,
        [
            config(rt::GROUP, "g", "consumer.session.timeout.ms", Some("55000")),
            config(rt::GROUP, "g", "consumer.heartbeat.interval.ms", None),
        ]
    );
    let image = super::super::testing::apply(&image, &result.records);
    assert_eq!(image.configs.get(rt::GROUP, "g").map(|c| c.len()), Some(1));
}

/// Kafka's `BoundedList` of records: 10,000 config records in one request are written; one
/// more fails every resource, validated only or not, and nothing is written.
#[test]
fn at_most_ten_thousand_config_records_in_one_request() {
    let image = image_with(&[]);
    let groups = |count: usize| -> Vec<AlterConfigsResource> {
        (0..count)
            .map(|index| {
                resource(
                    rt::GROUP,
                    &format!("G{index}"),
                    &[("consumer.heartbeat.interval.ms", SET, Some("10000"))],
                )
            })
            .collect()
    };
    let mut at_limit = groups(MAX_RECORDS_PER_USER_OP);
    at_limit.push(resource(rt::GROUP, "", &[]));
    let result = incremental_alter_configs(&image, &incremental(at_limit, false), Some(1));
    assert_eq!(result.records.len(), MAX_RECORDS_PER_USER_OP);
    let codes: Vec<i16> = outcome(&result).iter().map(|(code, _)| *code).collect();
    assert!(codes[..MAX_RECORDS_PER_USER_OP]
        .iter()
        .all(|code| *code == 0));
    assert_eq!(codes[MAX_RECORDS_PER_USER_OP], 42);
    let too_large = (
        44,
        Some("Unable to perform excessively large batch operation.".to_owned()),
    );
    for validate_only in [false, true] {
        let mut over = groups(MAX_RECORDS_PER_USER_OP + 1);
        over.insert(0, resource(rt::GROUP, "", &[]));
        let result = incremental_alter_configs(&image, &incremental(over, validate_only), Some(1));
        assert!(result.records.is_empty());
        let outcomes = outcome(&result);
        assert_eq!(outcomes.len(), MAX_RECORDS_PER_USER_OP + 2);
        assert!(outcomes.iter().all(|o| *o == too_large), "{validate_only}");
    }
}
