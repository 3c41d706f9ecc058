use kafka_protocol::messages::{
    alter_configs_request, AlterConfigsRequest, IncrementalAlterConfigsRequest,
};

use super::*;
use crate::controller::logic::configs::testing::{image_with, resource};
use crate::controller::logic::configs::{alter_configs, incremental_alter_configs};

/// Resources in memory, each with whether another names the same type and name.
struct Listed {
    incremental: Vec<IncrementalResource>,
    legacy: Vec<LegacyResource>,
}

impl Listed {
    fn duplicated(&self, index: usize) -> bool {
        let key = |t: i8, n: &StrBytes| (t, n.to_string());
        let keys: Vec<(i8, String)> = if self.legacy.is_empty() {
            self.incremental
                .iter()
                .map(|r| key(r.resource_type, &r.resource_name))
                .collect()
        } else {
            self.legacy
                .iter()
                .map(|r| key(r.resource_type, &r.resource_name))
                .collect()
        };
        keys.iter().filter(|k| **k == keys[index]).count() > 1
    }
}

impl ListedConfigResources for Listed {
    fn count(&self) -> usize {
        self.incremental.len().max(self.legacy.len())
    }

    fn legacy(&self) -> bool {
        !self.legacy.is_empty()
    }

    fn each(
        &self,
        visit: &mut dyn FnMut(usize, ConfigResource<'_>, bool) -> bool,
    ) -> Result<(), String> {
        for index in 0..self.count() {
            let resource = match self.legacy.get(index) {
                Some(resource) => ConfigResource::Legacy(resource),
                None => ConfigResource::Incremental(&self.incremental[index]),
            };
            if !visit(index, resource, self.duplicated(index)) {
                break;
            }
        }
        Ok(())
    }
}

/// Every kind of resource and failure the decision knows.
fn mixed() -> Vec<IncrementalResource> {
    vec![
        resource(2, "orders", &[("flush.ms", 0, Some("5"))]),
        resource(2, "missing", &[("flush.ms", 0, Some("5"))]),
        resource(2, "bad/name", &[("flush.ms", 0, Some("5"))]),
        resource(2, "", &[("flush.ms", 0, Some("5"))]),
        resource(2, "orders3", &[("flush.ms", 0, Some("not a number"))]),
        resource(2, "orders3", &[("retention.ms", 0, Some("7"))]),
        resource(2, "a", &[("flush.ms", 0, Some("1")), ("flush.ms", 1, None)]),
        resource(4, "1", &[("log.retention.ms", 0, None)]),
        resource(4, "1", &[("log.retention.ms", 0, Some("100"))]),
        resource(4, "7", &[("log.retention.ms", 0, Some("100"))]),
        resource(4, "x", &[]),
        resource(4, "", &[("no.such.config", 0, Some("1"))]),
        resource(8, "1", &[("root", 0, Some("INFO"))]),
        resource(99, "z", &[]),
        resource(32, "", &[]),
        resource(
            32,
            "group",
            &[("consumer.session.timeout.ms", 0, Some("50000"))],
        ),
        resource(
            32,
            "other",
            &[("consumer.session.timeout.ms", 0, Some("1"))],
        ),
        resource(16, "metrics", &[("interval.ms", 0, Some("1000"))]),
        resource(2, "b", &[]),
        resource(2, "c", &[("cleanup.policy", 9, Some("x"))]),
        resource(2, "d", &[("flush.ms", 2, Some("1"))]),
        resource(2, "e", &[("cleanup.policy", 2, Some("compact"))]),
        resource(2, "f", &[("retention.ms", 1, None)]),
    ]
}

/// Each decoded answer's code and message.
fn answered<'a>(
    answers: impl Iterator<Item = (i16, Option<&'a StrBytes>)>,
) -> Vec<(i16, Option<String>)> {
    answers
        .map(|(code, message)| (code, message.map(ToString::to_string)))
        .collect()
}

/// The test image with topics `a` to `f` as well.
fn image() -> Arc<MetadataImage> {
    let topics: Vec<_> = ["a", "b", "c", "d", "e", "f"]
        .iter()
        .enumerate()
        .map(|(i, name)| {
            gregor_publishers::records::MetadataRecord::Topic(
                gregor_publishers::records::TopicRecord {
                    name: (*name).into(),
                    topic_id: uuid::Uuid::from_u128(100 + i as u128),
                },
            )
        })
        .collect();
    Arc::new(image_with(&topics))
}

fn listed_answers(
    listed: &Listed,
    node_id: Option<i32>,
    validate_only: bool,
    image: &Arc<MetadataImage>,
) -> (
    Vec<(i16, Option<String>)>,
    Vec<gregor_publishers::records::MetadataRecord>,
) {
    let routes = vec![Route::Decided; listed.count()];
    let result = alter_listed_configs(
        image,
        listed,
        &routes,
        node_id,
        validate_only,
        &ConfigRules::default(),
    );
    let decision = result.response;
    let mut answers = Vec::new();
    listed
        .each(&mut |index, resource, duplicated| {
            let code = decision.code(index);
            answers.push((code, decision.message(index, resource, duplicated, code)));
            true
        })
        .unwrap();
    (answers, result.records)
}

#[test]
fn listed_resources_are_decided_and_explained_as_decoded_ones() {
    let image = image();
    for node_id in [None, Some(1)] {
        for validate_only in [false, true] {
            let request = IncrementalAlterConfigsRequest::default()
                .with_resources(mixed())
                .with_validate_only(validate_only);
            let decoded =
                incremental_alter_configs(&image, &request, node_id, &ConfigRules::default());
            let expected = answered(
                decoded
                    .response
                    .responses
                    .iter()
                    .map(|r| (r.error_code, r.error_message.as_ref())),
            );
            let listed = Listed {
                incremental: mixed(),
                legacy: Vec::new(),
            };
            let (answers, records) = listed_answers(&listed, node_id, validate_only, &image);
            assert_eq!(answers, expected, "node {node_id:?}");
            assert_eq!(records, decoded.records);
            assert!(expected.iter().any(|(code, _)| *code == 0));
            assert!(expected.iter().filter(|(code, _)| *code != 0).count() > 12);
        }
    }
    // AlterConfigs: the same resources, each replacing its configs.
    let legacy: Vec<LegacyResource> = mixed()
        .iter()
        .map(|r| {
            LegacyResource::default()
                .with_resource_type(r.resource_type)
                .with_resource_name(r.resource_name.clone())
                .with_configs(
                    r.configs
                        .iter()
                        .map(|c| {
                            alter_configs_request::AlterableConfig::default()
                                .with_name(c.name.clone())
                                .with_value(c.value.clone())
                        })
                        .collect(),
                )
        })
        .collect();
    let request = AlterConfigsRequest::default().with_resources(legacy.clone());
    let decoded = alter_configs(&image, &request, Some(1), &ConfigRules::default());
    let expected = answered(
        decoded
            .response
            .responses
            .iter()
            .map(|r| (r.error_code, r.error_message.as_ref())),
    );
    let listed = Listed {
        incremental: Vec::new(),
        legacy,
    };
    let (answers, records) = listed_answers(&listed, Some(1), false, &image);
    assert_eq!(answers, expected);
    assert_eq!(records, decoded.records);
}

#[test]
fn too_many_records_fail_every_decided_resource_alike() {
    let image = image();
    // 10,001 group resources of one record each: one over the limit.
    let many: Vec<IncrementalResource> = (0..=MAX_RECORDS_PER_USER_OP)
        .map(|i| {
            resource(
                32,
                &format!("g{i}"),
                &[("consumer.session.timeout.ms", 0, Some("50000"))],
            )
        })
        .collect();
    for validate_only in [false, true] {
        let request = IncrementalAlterConfigsRequest::default()
            .with_resources(many.clone())
            .with_validate_only(validate_only);
        let decoded = incremental_alter_configs(&image, &request, None, &ConfigRules::default());
        let listed = Listed {
            incremental: many.clone(),
            legacy: Vec::new(),
        };
        let (answers, records) = listed_answers(&listed, None, validate_only, &image);
        assert!(records.is_empty() && decoded.records.is_empty());
        let expected = answered(
            decoded
                .response
                .responses
                .iter()
                .map(|r| (r.error_code, r.error_message.as_ref())),
        );
        assert_eq!(answers, expected);
        assert_eq!(answers[0].0, ResponseError::PolicyViolation.code());
    }
}

#[test]
fn uncommitted_successes_and_answers_from_elsewhere_keep_their_messages() {
    let image = image();
    let listed = Listed {
        incremental: mixed(),
        legacy: Vec::new(),
    };
    let routes = vec![Route::Decided; listed.count()];
    let decision = alter_listed_configs(
        &image,
        &listed,
        &routes,
        None,
        false,
        &ConfigRules::default(),
    )
    .response
    .fail_succeeded(ResponseError::NotController, "lost the lead");
    assert_eq!(decision.code(0), ResponseError::NotController.code());
    let first = IncrementalResource::default();
    let first = ConfigResource::Incremental(&first);
    assert_eq!(
        decision
            .message(0, first, false, decision.code(0))
            .as_deref(),
        Some("lost the lead")
    );
    // A failure keeps its own message.
    assert_eq!(
        decision.code(1),
        ResponseError::UnknownTopicOrPartition.code()
    );

    // As a controller elsewhere answered: its messages kept by place.
    let elsewhere = ListedConfigDecision {
        codes: vec![0, 42],
        messages: vec![(1, Some("why".to_owned()))],
        ..Default::default()
    };
    assert_eq!((elsewhere.code(0), elsewhere.code(1)), (0, 42));
    assert_eq!(
        elsewhere.message(1, first, false, 42).as_deref(),
        Some("why")
    );
    assert_eq!(elsewhere.message(0, first, false, 0), None);
    // A resource the controller did not answer.
    assert_eq!(elsewhere.code(2), ResponseError::UnknownServerError.code());
    assert!(elsewhere.message(2, first, false, -1).is_some());
    assert!(decision.codes.iter().filter(|code| **code == 0).count() > 3);

    let refused = ListedConfigDecision::refused(ResponseError::NotController, "elsewhere");
    assert_eq!(refused.code(5), ResponseError::NotController.code());
    assert_eq!(
        refused.message(5, first, false, 41).as_deref(),
        Some("elsewhere")
    );
}
