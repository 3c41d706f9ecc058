//! AlterUserScramCredentials (KIP-554) as Kafka's `ScramControlManager` decides it: a user named
//! twice in one request (deletion and/or upsertion, whatever the mechanisms) is
//! DUPLICATE_RESOURCE; each other entry is validated alone, and the valid ones are written
//! together. Kafka writes them as one batch, which its metadata log refuses past 8 MiB; Gregor
//! bounds the batch as it bounds its other controller writes, at [`MAX_RECORDS_PER_USER_OP`]
//! credentials, past which every user is refused with POLICY_VIOLATION. The client sends the salted password; the controller derives the stored and server
//! keys, so the password never reaches the controller or the log.

use std::collections::HashMap;

use gregor_publishers::image::ScramImage;
use gregor_publishers::records::{
    MetadataRecord, RemoveUserScramCredentialRecord, UserScramCredentialRecord,
};
use gregor_publishers::scram::{ScramMechanism, MAX_ITERATIONS, MIN_ITERATIONS};
use kafka_protocol::error::ResponseError;
use kafka_protocol::messages::alter_user_scram_credentials_request::{
    ScramCredentialDeletion, ScramCredentialUpsertion,
};
use kafka_protocol::messages::alter_user_scram_credentials_response::AlterUserScramCredentialsResult;
use kafka_protocol::messages::{
    AlterUserScramCredentialsRequest, AlterUserScramCredentialsResponse,
};
use kafka_protocol::protocol::StrBytes;

use super::listed::{decide_listed, ElementError, ListedAnswers, ListedElements, ListedError};
use super::{ControllerResult, MAX_RECORDS_PER_USER_OP};

type Refusal = (ResponseError, &'static str);

fn user_and_mechanism(name: &str, mechanism: i8) -> Result<ScramMechanism, Refusal> {
    if name.is_empty() {
        return Err((
            ResponseError::UnacceptableCredential,
            "Username must not be empty",
        ));
    }
    ScramMechanism::from_type(mechanism).ok_or((
        ResponseError::UnsupportedSaslMechanism,
        "Unknown SCRAM mechanism",
    ))
}

const DUPLICATE: Refusal = (
    ResponseError::DuplicateResource,
    "A user credential cannot be altered twice in the same request",
);

/// More valid alterations than one batch may write.
const TOO_MANY: Refusal = (
    ResponseError::PolicyViolation,
    "Unable to perform excessively large batch operation.",
);

/// The record deleting `deletion`'s credential, or why it is refused.
fn deletion_record(
    image: &ScramImage,
    deletion: &ScramCredentialDeletion,
) -> Result<MetadataRecord, Refusal> {
    let mechanism = user_and_mechanism(&deletion.name, deletion.mechanism)?;
    if image.credential(&deletion.name, mechanism).is_none() {
        return Err((
            ResponseError::ResourceNotFound,
            "Attempt to delete a user credential that does not exist",
        ));
    }
    Ok(MetadataRecord::RemoveUserScramCredential(
        RemoveUserScramCredentialRecord {
            name: deletion.name.to_string(),
            mechanism: mechanism.type_code(),
        },
    ))
}

/// The record storing `upsertion`'s credential (its keys derived from the salted password),
/// or why it is refused.
fn upsertion_record(upsertion: &ScramCredentialUpsertion) -> Result<MetadataRecord, Refusal> {
    let mechanism = user_and_mechanism(&upsertion.name, upsertion.mechanism)?;
    if upsertion.iterations < MIN_ITERATIONS {
        return Err((ResponseError::UnacceptableCredential, "Too few iterations"));
    }
    if upsertion.iterations > MAX_ITERATIONS {
        return Err((ResponseError::UnacceptableCredential, "Too many iterations"));
    }
    let credential = mechanism.credential_from_salted(
        upsertion.salt.to_vec(),
        &upsertion.salted_password,
        upsertion.iterations,
    );
    Ok(MetadataRecord::UserScramCredential(
        UserScramCredentialRecord {
            name: upsertion.name.to_string(),
            mechanism: mechanism.type_code(),
            salt: credential.salt,
            stored_key: credential.stored_key,
            server_key: credential.server_key,
            iterations: credential.iterations,
        },
    ))
}

/// Decides an AlterUserScramCredentials request against `image`.
pub fn alter_user_scram_credentials(
    image: &ScramImage,
    request: &AlterUserScramCredentialsRequest,
) -> ControllerResult<AlterUserScramCredentialsResponse> {
    // Per user, in order of first appearance: its record, or why it is refused.
    let mut users: Vec<(&str, Result<MetadataRecord, Refusal>)> = Vec::new();
    // Each user's place in `users`, so a repeat is found in O(1), not by a scan.
    let mut places: HashMap<&str, usize> = HashMap::new();
    let mut decide = |name, decision: &dyn Fn() -> Result<MetadataRecord, Refusal>| {
        match places.get(name).and_then(|&at| users.get_mut(at)) {
            // A user that already failed keeps its first error.
            Some((_, outcome)) if outcome.is_ok() => *outcome = Err(DUPLICATE),
            Some(_) => {}
            None => {
                places.insert(name, users.len());
                users.push((name, decision()));
            }
        }
    };
    for deletion in &request.deletions {
        decide(deletion.name.as_str(), &|| deletion_record(image, deletion));
    }
    for upsertion in &request.upsertions {
        decide(upsertion.name.as_str(), &|| upsertion_record(upsertion));
    }
    if users.iter().filter(|(_, outcome)| outcome.is_ok()).count() > MAX_RECORDS_PER_USER_OP {
        for (_, outcome) in &mut users {
            *outcome = Err(TOO_MANY);
        }
    }
    let mut records = Vec::new();
    let mut results = Vec::new();
    for (user, outcome) in users {
        let result = AlterUserScramCredentialsResult::default()
            .with_user(StrBytes::from_string(user.to_owned()));
        results.push(match outcome {
            // Kafka answers a success with a null message, not the crate's default empty one.
            Ok(record) => {
                records.push(record);
                result.with_error_message(None)
            }
            Err((code, message)) => result
                .with_error_code(code.code())
                .with_error_message(Some(StrBytes::from_static_str(message))),
        });
    }
    ControllerResult {
        records,
        response: AlterUserScramCredentialsResponse::default().with_results(results),
    }
}

/// One alteration of a request read from where it is kept (issue #11).
#[derive(Debug, Clone, PartialEq)]
pub enum ScramAlteration {
    Deletion(ScramCredentialDeletion),
    Upsertion(ScramCredentialUpsertion),
}

impl ScramAlteration {
    /// The user it alters.
    pub fn user(&self) -> &str {
        match self {
            ScramAlteration::Deletion(deletion) => deletion.name.as_str(),
            ScramAlteration::Upsertion(upsertion) => upsertion.name.as_str(),
        }
    }
}

impl ElementError for Refusal {
    fn is_batch_too_large(&self) -> bool {
        *self == TOO_MANY
    }

    /// The messages never name the user.
    fn answer(&self, _: &str) -> ListedError {
        ListedError {
            code: self.0.code(),
            message: Some(vec![self.1.to_owned()]),
        }
    }
}

/// The answer to a [`ListedElements`] AlterUserScramCredentials request: each distinct user's
/// error code and message, in order of first appearance (deletions, then upsertions).
pub type ListedScramAlteration = ListedAnswers<ListedError>;

/// Decides a request whose alterations are read from `alterations` (deletions, then
/// upsertions) as [`alter_user_scram_credentials`] decides the same alterations, without
/// holding them or their answers whole: a user's answer is its first alteration's, or
/// DUPLICATE_RESOURCE when that one is valid and the user is altered again.
pub fn alter_listed_credentials(
    image: &ScramImage,
    alterations: &dyn ListedElements<ScramAlteration>,
) -> ControllerResult<ListedScramAlteration> {
    decide_listed(
        "AlterUserScramCredentials",
        alterations,
        false,
        |alteration, repeated, records_so_far| {
            let record = match alteration {
                ScramAlteration::Deletion(deletion) => deletion_record(image, deletion)?,
                ScramAlteration::Upsertion(upsertion) => upsertion_record(upsertion)?,
            };
            if repeated {
                return Err(DUPLICATE);
            }
            if records_so_far == MAX_RECORDS_PER_USER_OP {
                return Err(TOO_MANY);
            }
            Ok((vec![record], ListedError::default()))
        },
        ScramAlteration::user,
        ListedError::clone,
    )
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;

    use gregor_publishers::{MetadataDelta, MetadataImage, Provenance};

    use super::*;
    use crate::controller::logic::listed::Listed;

    fn upsert(name: &str, mechanism: i8, iterations: i32) -> ScramCredentialUpsertion {
        ScramCredentialUpsertion::default()
            .with_name(StrBytes::from_string(name.to_owned()))
            .with_mechanism(mechanism)
            .with_iterations(iterations)
            .with_salt(bytes::Bytes::from_static(b"salt"))
            .with_salted_password(bytes::Bytes::from_static(&[7; 32]))
    }

    fn delete(name: &str, mechanism: i8) -> ScramCredentialDeletion {
        ScramCredentialDeletion::default()
            .with_name(StrBytes::from_string(name.to_owned()))
            .with_mechanism(mechanism)
    }

    fn outcome(
        result: &ControllerResult<AlterUserScramCredentialsResponse>,
    ) -> Vec<(String, i16, Option<String>)> {
        result
            .response
            .results
            .iter()
            .map(|r| {
                (
                    r.user.to_string(),
                    r.error_code,
                    r.error_message.as_ref().map(|m| m.to_string()),
                )
            })
            .collect()
    }

    fn with_alice() -> MetadataImage {
        let request = AlterUserScramCredentialsRequest::default()
            .with_upsertions(vec![upsert("alice", 1, 4096)]);
        let result = alter_user_scram_credentials(&ScramImage::default(), &request);
        let mut delta = MetadataDelta::new(Arc::new(MetadataImage::empty()));
        for record in &result.records {
            assert!(delta.replay(record).is_ok());
        }
        delta.apply(Provenance::default())
    }

    #[test]
    fn kafkas_errors_per_user() {
        let image = with_alice();
        let request = AlterUserScramCredentialsRequest::default()
            .with_deletions(vec![
                delete("alice", 2),
                delete("", 1),
                delete("bob", 3),
                delete("carol", 1),
                delete("carol", 2),
            ])
            .with_upsertions(vec![
                upsert("dave", 1, 4095),
                upsert("erin", 2, 16385),
                upsert("frank", 2, 16384),
                upsert("alice", 1, 4096),
            ]);
        let result = alter_user_scram_credentials(&image.scram, &request);
        let not_found = Some("Attempt to delete a user credential that does not exist".to_owned());
        assert_eq!(
            outcome(&result),
            vec![
                ("alice".into(), 91, not_found.clone()),
                ("".into(), 93, Some("Username must not be empty".into())),
                ("bob".into(), 33, Some("Unknown SCRAM mechanism".into())),
                ("carol".into(), 91, not_found),
                ("dave".into(), 93, Some("Too few iterations".into())),
                ("erin".into(), 93, Some("Too many iterations".into())),
                ("frank".into(), 0, None),
            ]
        );
        assert_eq!(result.records.len(), 1);
    }

    #[test]
    fn a_user_named_twice_is_a_duplicate_and_writes_nothing() {
        let image = with_alice();
        let request = AlterUserScramCredentialsRequest::default()
            .with_deletions(vec![delete("alice", 1)])
            .with_upsertions(vec![upsert("alice", 2, 8192), upsert("bob", 1, 4096)]);
        let result = alter_user_scram_credentials(&image.scram, &request);
        assert_eq!(
            outcome(&result),
            vec![
                (
                    "alice".into(),
                    92,
                    Some("A user credential cannot be altered twice in the same request".into())
                ),
                ("bob".into(), 0, None),
            ]
        );
        assert_eq!(result.records.len(), 1);
    }

    #[test]
    fn upserts_store_keys_derived_from_the_salted_password() {
        let image = with_alice();
        let credential = image.scram.credential("alice", ScramMechanism::Sha256);
        let expected =
            ScramMechanism::Sha256.credential_from_salted(b"salt".to_vec(), &[7; 32], 4096);
        assert_eq!(credential, Some(&expected));
        let request =
            AlterUserScramCredentialsRequest::default().with_deletions(vec![delete("alice", 1)]);
        let result = alter_user_scram_credentials(&image.scram, &request);
        assert_eq!(outcome(&result), vec![("alice".into(), 0, None)]);
        assert_eq!(
            result.records,
            vec![MetadataRecord::RemoveUserScramCredential(
                RemoveUserScramCredentialRecord {
                    name: "alice".into(),
                    mechanism: 1
                }
            )]
        );
    }

    #[test]
    fn listed_alterations_are_answered_as_the_decoded_request() {
        let image = with_alice();
        let mut deletions = vec![
            delete("alice", 2),
            delete("", 1),
            delete("bob", 3),
            delete("carol", 1),
            delete("alice", 1),
        ];
        let mut upsertions = vec![
            upsert("dave", 1, 4095),
            upsert("erin", 2, 16385),
            upsert("frank", 2, 16384),
            upsert("carol", 1, 4096),
            upsert("gina", 1, 4096),
            upsert("gina", 2, 4096),
        ];
        // Many failing alike (one outcome each kind) and a few valid between them.
        for index in 0..2_000 {
            deletions.push(delete(&format!("d{index}"), 1));
            upsertions.push(upsert(
                &format!("u{index}"),
                1,
                4096 + i32::from(index % 500 != 0) * 100_000,
            ));
        }
        let request = AlterUserScramCredentialsRequest::default()
            .with_deletions(deletions.clone())
            .with_upsertions(upsertions.clone());
        let decoded = alter_user_scram_credentials(&image.scram, &request);
        let alterations: Vec<ScramAlteration> = deletions
            .into_iter()
            .map(ScramAlteration::Deletion)
            .chain(upsertions.into_iter().map(ScramAlteration::Upsertion))
            .collect();
        let listed = Listed::new(alterations, ScramAlteration::user);
        let kept = alter_listed_credentials(&image.scram, &listed);
        let firsts = listed.firsts();
        assert_eq!(kept.response.answered(), firsts.len());
        let results: Vec<AlterUserScramCredentialsResult> = firsts
            .iter()
            .enumerate()
            .map(|(index, alteration)| {
                let outcome = kept.response.outcome(index).expect("answered");
                AlterUserScramCredentialsResult::default()
                    .with_user(StrBytes::from_string(alteration.user().to_owned()))
                    .with_error_code(outcome.code)
                    .with_error_message(outcome.message_for(alteration.user()))
            })
            .collect();
        assert_eq!(results, decoded.response.results);
        assert_eq!(kept.records, decoded.records);
        assert_eq!(kept.records.len(), 1 + 4, "frank and four u<n>");
        assert!(kept.response.outcomes.len() < 20);
    }

    #[test]
    fn more_credentials_than_one_batch_refuse_every_user() {
        let image = with_alice();
        let mut upsertions: Vec<_> = (0..MAX_RECORDS_PER_USER_OP)
            .map(|index| upsert(&format!("u{index}"), 1, 4096))
            .collect();
        upsertions.push(upsert("dave", 1, 4095));
        let at_limit = AlterUserScramCredentialsRequest::default()
            .with_deletions(vec![delete("bob", 1)])
            .with_upsertions(upsertions.clone());
        let decided = alter_user_scram_credentials(&image.scram, &at_limit);
        assert_eq!(decided.records.len(), MAX_RECORDS_PER_USER_OP);
        upsertions.push(upsert("erin", 2, 4096));
        let over = AlterUserScramCredentialsRequest::default()
            .with_deletions(vec![delete("bob", 1)])
            .with_upsertions(upsertions.clone());
        let refused = alter_user_scram_credentials(&image.scram, &over);
        assert!(refused.records.is_empty());
        let too_many = Some("Unable to perform excessively large batch operation.".to_owned());
        assert_eq!(outcome(&refused).len(), MAX_RECORDS_PER_USER_OP + 3);
        assert!(outcome(&refused)
            .iter()
            .all(|(_, code, message)| *code == 44 && *message == too_many));
        // Listed, the same.
        let alterations: Vec<ScramAlteration> =
            std::iter::once(ScramAlteration::Deletion(delete("bob", 1)))
                .chain(upsertions.into_iter().map(ScramAlteration::Upsertion))
                .collect();
        let listed = Listed::new(alterations, ScramAlteration::user);
        let kept = alter_listed_credentials(&image.scram, &listed);
        assert!(kept.records.is_empty());
        assert_eq!(kept.response.answered(), MAX_RECORDS_PER_USER_OP + 3);
        assert_eq!(
            kept.response.outcomes,
            vec![ListedError {
                code: 44,
                message: too_many.map(|m| vec![m])
            }]
        );
    }
}
