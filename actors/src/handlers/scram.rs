//! DescribeUserScramCredentials (50), served from the image as Kafka's `ScramImage.describe`,
//! and AlterUserScramCredentials (51), decided by the controller (a broker forwards it). Only
//! mechanisms and iteration counts are ever described, never salts or keys.

use std::collections::HashMap;
use std::sync::Arc;

use gregor_publishers::image::ScramImage;
use kafka_protocol::error::ResponseError;
use kafka_protocol::messages::describe_user_scram_credentials_response::{
    CredentialInfo, DescribeUserScramCredentialsResult,
};
use kafka_protocol::messages::{
    AlterUserScramCredentialsRequest, AlterUserScramCredentialsResponse,
    DescribeUserScramCredentialsRequest, DescribeUserScramCredentialsResponse, ResponseKind,
};
use kafka_protocol::protocol::StrBytes;

use gregor_publishers::acl::AclOperation;

use super::{ApiResponse, ErrorCounts};
use crate::authorizer::Access;
use crate::context::{HandlerContext, RequestInfo};
use crate::controller::logic::scram::{ListedScramAlteration, ScramAlteration};
use crate::controller::logic::ListedElements;
use crate::controller::{
    refused_scram_alteration, AlterListedScramCredentials, AlterUserScramCredentials,
};

/// Kafka's `ScramImage.describe`: every user when the list is null or empty; a user named twice
/// is DUPLICATE_RESOURCE, an unknown one RESOURCE_NOT_FOUND.
pub(super) fn describe_credentials(
    image: &ScramImage,
    request: &DescribeUserScramCredentialsRequest,
) -> DescribeUserScramCredentialsResponse {
    // (user, named more than once), in request order (or user order for "all").
    let mut users: Vec<(String, bool)> = Vec::new();
    match request.users.as_deref() {
        None | Some([]) => {
            for (user, _, _) in image.iter() {
                if users.last().is_none_or(|(last, _)| last != user) {
                    users.push((user.to_owned(), false));
                }
            }
        }
        Some(named) => {
            // Each name's place in `users`, so a repeat is found in O(1), not by a scan.
            let mut places: HashMap<&str, usize> = HashMap::with_capacity(named.len());
            for user in named {
                match places.get(user.name.as_str()) {
                    Some(&at) => users[at].1 = true,
                    None => {
                        places.insert(user.name.as_str(), users.len());
                        users.push((user.name.to_string(), false));
                    }
                }
            }
        }
    }
    let results = users
        .into_iter()
        .map(|(user, twice)| {
            let result =
                DescribeUserScramCredentialsResult::default().with_user(StrBytes::from_string(user.clone()));
            if twice {
                return result
                    .with_error_code(ResponseError::DuplicateResource.code())
                    .with_error_message(Some(StrBytes::from_string(format!(
                        "Cannot describe SCRAM credentials for the same user twice in a single request: {user}"
                    ))));
            }
            let infos: Vec<CredentialInfo> = image
                .of_user(&user)
                .map(|(mechanism, credential)| {
                    CredentialInfo::default()
                        .with_mechanism(mechanism.type_code())
                        .with_iterations(credential.iterations)
                })
                .collect();
            if infos.is_empty() {
                result
                    .with_error_code(ResponseError::ResourceNotFound.code())
                    .with_error_message(Some(StrBytes::from_string(format!(
                        "Attempt to describe a user credential that does not exist: {user}"
                    ))))
            } else {
                result.with_credential_infos(infos)
            }
        })
        .collect();
    DescribeUserScramCredentialsResponse::default().with_results(results)
}

pub(super) fn describe(
    ctx: &HandlerContext,
    info: &RequestInfo,
    request: &DescribeUserScramCredentialsRequest,
) -> ApiResponse {
    let image = ctx.image.load();
    // Kafka: DESCRIBE on the cluster, else the request and every listed user, repeats
    // included, are refused (`getErrorResponse`: results without the user's name).
    let response = if Access::new(ctx, info).allows_cluster(AclOperation::Describe) {
        describe_credentials(&image.scram, request)
    } else {
        let denied = ResponseError::ClusterAuthorizationFailed.code();
        let message = || Some(StrBytes::from_static_str("Cluster authorization failed."));
        let refused = DescribeUserScramCredentialsResult::default()
            .with_error_code(denied)
            .with_error_message(message());
        DescribeUserScramCredentialsResponse::default()
            .with_error_code(denied)
            .with_error_message(message())
            .with_results(vec![refused; request.users.as_ref().map_or(0, Vec::len)])
    };
    let mut errors = ErrorCounts::default();
    errors.add(response.error_code);
    errors.add_all(response.results.iter().map(|r| r.error_code));
    ApiResponse::new(ResponseKind::DescribeUserScramCredentials(response), errors)
}

/// AlterUserScramCredentials for a request whose alterations stay in its frame (deletions,
/// then upsertions): the answer's body lists no users, and the returned answers give each
/// distinct user's, in order of first appearance, for the caller to write as it sends the
/// answer. Decided as [`alter`] decides a decoded request.
pub async fn alter_listed(
    ctx: &HandlerContext,
    info: &RequestInfo,
    alterations: Arc<dyn ListedElements<ScramAlteration>>,
) -> (ApiResponse, ListedScramAlteration) {
    let distinct = alterations.distinct();
    let answers = if !Access::new(ctx, info).allows_cluster(AclOperation::Alter) {
        ListedScramAlteration::refused(
            ResponseError::ClusterAuthorizationFailed.code(),
            "Cluster authorization failed.",
        )
    } else if ctx.answers_not_controller(info) {
        ListedScramAlteration::refused(
            ResponseError::NotController.code(),
            "This node is not the active controller",
        )
    } else {
        match ctx
            .ask_controller(
                info.controller_failure.as_ref(),
                AlterListedScramCredentials { alterations },
            )
            .await
        {
            Ok(answers) => answers,
            Err(error) => {
                tracing::error!(%error, "controller actor unavailable");
                ListedScramAlteration::refused(
                    ResponseError::NotController.code(),
                    "The controller is not available; retry against another node",
                )
            }
        }
    };
    let errors = ErrorCounts::of_listed(&answers, distinct, 0, |outcome| outcome.code);
    let response = AlterUserScramCredentialsResponse::default();
    let answer = ApiResponse::new(ResponseKind::AlterUserScramCredentials(response), errors);
    (answer, answers)
}

pub(super) async fn alter(
    ctx: &HandlerContext,
    info: &RequestInfo,
    request: AlterUserScramCredentialsRequest,
) -> ApiResponse {
    let response = if !Access::new(ctx, info).allows_cluster(AclOperation::Alter) {
        refused_scram_alteration(
            &request,
            ResponseError::ClusterAuthorizationFailed,
            "Cluster authorization failed.",
        )
    } else if ctx.answers_not_controller(info) {
        // Only the active controller decides (a broker forwards; this is what is left when no
        // active controller could be reached).
        refused_scram_alteration(
            &request,
            ResponseError::NotController,
            "This node is not the active controller",
        )
    } else {
        let request = Arc::new(request);
        match ctx
            .ask_controller(
                info.controller_failure.as_ref(),
                AlterUserScramCredentials {
                    request: Arc::clone(&request),
                },
            )
            .await
        {
            Ok(response) => response,
            Err(error) => {
                tracing::error!(%error, "controller actor unavailable");
                refused_scram_alteration(
                    &request,
                    ResponseError::NotController,
                    "The controller is not available; retry against another node",
                )
            }
        }
    };
    let mut errors = ErrorCounts::default();
    errors.add_all(response.results.iter().map(|r| r.error_code));
    ApiResponse::new(ResponseKind::AlterUserScramCredentials(response), errors)
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;

    use gregor_publishers::records::{MetadataRecord, UserScramCredentialRecord};
    use gregor_publishers::{MetadataDelta, MetadataImage, Provenance};
    use kafka_protocol::messages::describe_user_scram_credentials_request::UserName;

    use super::*;

    fn image() -> MetadataImage {
        let mut delta = MetadataDelta::new(Arc::new(MetadataImage::empty()));
        for (name, mechanism, iterations) in
            [("bob", 2, 8192), ("alice", 1, 4096), ("alice", 2, 5000)]
        {
            let record = MetadataRecord::UserScramCredential(UserScramCredentialRecord {
                name: name.into(),
                mechanism,
                salt: vec![1],
                stored_key: vec![2],
                server_key: vec![3],
                iterations,
            });
            assert!(delta.replay(&record).is_ok());
        }
        delta.apply(Provenance::default())
    }

    /// (user, error code, error message, (mechanism, iterations) per credential).
    type Described = (String, i16, Option<String>, Vec<(i8, i32)>);

    fn described(users: Option<&[&str]>) -> Vec<Described> {
        let request = DescribeUserScramCredentialsRequest::default().with_users(users.map(|u| {
            u.iter()
                .map(|name| {
                    UserName::default().with_name(StrBytes::from_string((*name).to_owned()))
                })
                .collect()
        }));
        describe_credentials(&image().scram, &request)
            .results
            .into_iter()
            .map(|r| {
                (
                    r.user.to_string(),
                    r.error_code,
                    r.error_message.map(|m| m.to_string()),
                    r.credential_infos
                        .iter()
                        .map(|c| (c.mechanism, c.iterations))
                        .collect(),
                )
            })
            .collect()
    }

    #[test]
    fn every_user_when_none_is_named() {
        let all = vec![
            (
                "alice".to_owned(),
                0,
                Some(String::new()),
                vec![(1, 4096), (2, 5000)],
            ),
            ("bob".to_owned(), 0, Some(String::new()), vec![(2, 8192)]),
        ];
        assert_eq!(described(None), all);
        assert_eq!(described(Some(&[])), all);
    }

    #[test]
    fn named_users_unknown_and_twice() {
        assert_eq!(
            described(Some(&["bob", "carol", "alice", "bob"])),
            vec![
                (
                    "bob".to_owned(),
                    92,
                    Some("Cannot describe SCRAM credentials for the same user twice in a single request: bob".to_owned()),
                    vec![]
                ),
                (
                    "carol".to_owned(),
                    91,
                    Some("Attempt to describe a user credential that does not exist: carol".to_owned()),
                    vec![]
                ),
                ("alice".to_owned(), 0, Some(String::new()), vec![(1, 4096), (2, 5000)]),
            ]
        );
    }
}
