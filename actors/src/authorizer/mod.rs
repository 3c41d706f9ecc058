//! The ACL authorizer, Kafka's `StandardAuthorizer`: super users first, then the ACLs of the
//! metadata image (a matching DENY refuses, a matching ALLOW grants, no ACL on the resource at
//! all falls back to `allow.everyone.if.no.acl.found`, ACLs that exist but do not match
//! refuse).
//!
//! The ACLs come from the image through [`AclPublisher`], which swaps the image's
//! `Arc<AclsImage>` (persistent maps holding the lookup index) into an `ArcSwap`: a check is a
//! lock-free load and an index lookup, O(log n + matching ACLs). Handlers call it through
//! [`Access`], built once per request with the request's principal and host.

mod publisher;

use std::collections::HashSet;
use std::sync::Arc;

use arc_swap::ArcSwap;
use gregor_publishers::acl::{operation_bit, AclOperation, ResourceType, CLUSTER_NAME};
use gregor_publishers::image::{AclRule, AclsImage};

pub use publisher::AclPublisher;

use crate::context::{HandlerContext, RequestInfo};

/// The `authorizer.class.name` values that select this authorizer (Kafka's class name, and the
/// short name).
pub const AUTHORIZER_CLASS_NAMES: &[&str] = &[
    "org.apache.kafka.metadata.authorizer.StandardAuthorizer",
    "StandardAuthorizer",
];

/// The value of KIP-430 authorized-operations fields when they were not asked for.
pub const AUTHORIZED_OPERATIONS_OMITTED: i32 = i32::MIN;

/// The authorizer's configuration.
#[derive(Clone, Debug, Default)]
pub struct AuthorizerSettings {
    /// `super.users`: principals (`User:admin`) allowed everything.
    pub super_users: HashSet<String>,
    /// `allow.everyone.if.no.acl.found`.
    pub allow_everyone_if_no_acl_found: bool,
}

impl AuthorizerSettings {
    /// Parses `super.users` (semicolon-separated principals, blanks ignored).
    pub fn parse_super_users(value: &str) -> HashSet<String> {
        value
            .split(';')
            .map(str::trim)
            .filter(|p| !p.is_empty())
            .map(str::to_owned)
            .collect()
    }
}

/// Kafka's `StandardAuthorizer`; see the module docs.
#[derive(Debug)]
pub struct Authorizer {
    settings: AuthorizerSettings,
    acls: ArcSwap<AclsImage>,
}

impl Authorizer {
    /// An authorizer with no ACLs until the publisher hands it the image's.
    pub fn new(settings: AuthorizerSettings) -> Self {
        Authorizer {
            settings,
            acls: ArcSwap::from_pointee(AclsImage::default()),
        }
    }

    /// Takes the ACLs of a new image.
    pub fn update(&self, acls: Arc<AclsImage>) {
        self.acls.store(acls);
    }

    /// Whether `principal` (`Type:Name`) is a super user.
    pub fn is_super_user(&self, principal: &str) -> bool {
        self.settings.super_users.contains(principal)
    }

    /// Whether `principal` from `host` may do `operation` on `resource_type`/`name`.
    pub fn authorize(
        &self,
        principal: &str,
        host: &str,
        operation: AclOperation,
        resource_type: ResourceType,
        name: &str,
    ) -> bool {
        self.is_super_user(principal)
            || self.acls_allow(principal, host, operation, resource_type, name)
    }

    /// The ACL part of [`Authorizer::authorize`], for callers that checked super users once.
    fn acls_allow(
        &self,
        principal: &str,
        host: &str,
        operation: AclOperation,
        resource_type: ResourceType,
        name: &str,
    ) -> bool {
        match self
            .acls
            .load()
            .find_rule(principal, host, operation, resource_type, name)
        {
            AclRule::Allow => true,
            AclRule::NoAcls => self.settings.allow_everyone_if_no_acl_found,
            AclRule::Deny | AclRule::NoMatch => false,
        }
    }

    /// Kafka's `authorizeByResourceType`: whether `principal` may do `operation` on some
    /// resource of `resource_type` (InitProducerId's "WRITE on any topic", KIP-679).
    pub fn authorize_any(
        &self,
        principal: &str,
        host: &str,
        operation: AclOperation,
        resource_type: ResourceType,
    ) -> bool {
        // Kafka first authorizes a made-up name, which lets super users and, with no ACL
        // covering it, `allow.everyone.if.no.acl.found` through.
        self.authorize(principal, host, operation, resource_type, "hardcode")
            || self
                .acls
                .load()
                .allows_any(principal, host, operation, resource_type)
    }
}

/// Who asks, for the checks of one request: the principal as `Type:Name` and the client's
/// address, formatted once.
pub struct Access<'a> {
    authorizer: Option<&'a Arc<Authorizer>>,
    principal: String,
    host: &'a str,
    super_user: bool,
}

impl<'a> Access<'a> {
    /// The access of the request `info` on a node with `ctx`'s authorizer. A request that came
    /// inside an Envelope is checked as the client's principal the envelope carries.
    pub fn new(ctx: &'a HandlerContext, info: &'a RequestInfo) -> Self {
        let authorizer = ctx.authorizer.as_ref();
        let principal = match authorizer {
            Some(_) => info.principal.to_string(),
            None => String::new(),
        };
        Access {
            super_user: authorizer.is_some_and(|a| a.is_super_user(&principal)),
            authorizer,
            host: info
                .client_host
                .strip_prefix('/')
                .unwrap_or(&info.client_host),
            principal,
        }
    }

    /// Whether an authorizer decides this request (`None`: every check passes).
    pub fn is_enforced(&self) -> bool {
        self.authorizer.is_some()
    }

    /// Whether the request may do `operation` on `resource_type`/`name`.
    pub fn allows(&self, operation: AclOperation, resource_type: ResourceType, name: &str) -> bool {
        let Some(authorizer) = self.authorizer else {
            return true;
        };
        if self.super_user {
            return true;
        }
        let allowed =
            authorizer.acls_allow(&self.principal, self.host, operation, resource_type, name);
        if !allowed {
            tracing::info!(
                target: "gregor::authorizer",
                principal = %self.principal,
                host = self.host,
                operation = operation.name(),
                resource = %format_args!("{}:{}", resource_type.name(), name),
                "denied"
            );
        }
        allowed
    }

    /// [`Access::allows`] without the denial log line, for filtering (topics left out of an
    /// all-topics Metadata, authorized-operations bits).
    pub fn quietly_allows(
        &self,
        operation: AclOperation,
        resource_type: ResourceType,
        name: &str,
    ) -> bool {
        match self.authorizer {
            None => true,
            Some(_) if self.super_user => true,
            Some(authorizer) => {
                authorizer.acls_allow(&self.principal, self.host, operation, resource_type, name)
            }
        }
    }

    /// [`Access::quietly_allows`] DESCRIBE on topics as a check that outlives the request, for
    /// the group coordinator to filter a member's regex subscription with; `None` when every
    /// topic is allowed (no authorizer, or a super user).
    pub fn topic_describe_check(&self) -> Option<impl Fn(&str) -> bool + Send + Sync + 'static> {
        let authorizer = Arc::clone(self.authorizer.filter(|_| !self.super_user)?);
        let principal = self.principal.clone();
        let host = self.host.to_owned();
        Some(move |topic: &str| {
            authorizer.acls_allow(
                &principal,
                &host,
                AclOperation::Describe,
                ResourceType::Topic,
                topic,
            )
        })
    }

    /// Whether the request may do `operation` on the cluster.
    pub fn allows_cluster(&self, operation: AclOperation) -> bool {
        self.allows(operation, ResourceType::Cluster, CLUSTER_NAME)
    }

    /// Whether the request may do `operation` on some resource of `resource_type`.
    pub fn allows_any(&self, operation: AclOperation, resource_type: ResourceType) -> bool {
        match self.authorizer {
            None => true,
            Some(authorizer) => {
                authorizer.authorize_any(&self.principal, self.host, operation, resource_type)
            }
        }
    }

    /// The KIP-430 bitfield of the operations the request may do on `resource_type`/`name`:
    /// one bit (`1 << code`) per supported operation allowed.
    pub fn authorized_operations(&self, resource_type: ResourceType, name: &str) -> i32 {
        resource_type
            .supported_operations()
            .iter()
            .filter(|&&operation| self.quietly_allows(operation, resource_type, name))
            .fold(0, |bits, &operation| bits | operation_bit(operation))
    }
}

#[cfg(test)]
mod tests {
    use gregor_publishers::acl::{AclPermission, PatternType};
    use gregor_publishers::records::AccessControlEntryRecord;
    use gregor_publishers::{MetadataDelta, MetadataImage, MetadataRecord, Provenance};
    use uuid::Uuid;

    use super::*;

    fn acl(
        id: u128,
        name: &str,
        principal: &str,
        op: AclOperation,
        permission: AclPermission,
    ) -> MetadataRecord {
        MetadataRecord::AccessControlEntry(AccessControlEntryRecord {
            id: Uuid::from_u128(id),
            resource_type: ResourceType::Topic.code(),
            resource_name: name.into(),
            pattern_type: PatternType::Literal.code(),
            principal: principal.into(),
            host: "*".into(),
            operation: op.code(),
            permission_type: permission.code(),
        })
    }

    fn authorizer(
        allow_everyone: bool,
        records: &[MetadataRecord],
    ) -> Result<Authorizer, gregor_publishers::ReplayError> {
        let mut delta = MetadataDelta::new(Arc::new(MetadataImage::empty()));
        delta.replay_all(records)?;
        let image = delta.apply(Provenance::default());
        let authorizer = Authorizer::new(AuthorizerSettings {
            super_users: AuthorizerSettings::parse_super_users(" User:admin ;;User:ops"),
            allow_everyone_if_no_acl_found: allow_everyone,
        });
        authorizer.update(image.acls.clone());
        Ok(authorizer)
    }

    #[test]
    fn super_users_then_acls_then_the_no_acl_rule() -> Result<(), gregor_publishers::ReplayError> {
        use AclOperation::*;
        let records = [
            acl(1, "orders", "User:alice", Read, AclPermission::Allow),
            acl(2, "orders", "User:admin", Read, AclPermission::Deny),
        ];
        for allow_everyone in [false, true] {
            let a = authorizer(allow_everyone, &records)?;
            let topic = ResourceType::Topic;
            assert!(
                a.authorize("User:admin", "h", Read, topic, "orders"),
                "super user beats DENY"
            );
            assert!(a.authorize("User:ops", "h", Delete, topic, "anything"));
            assert!(a.authorize("User:alice", "h", Read, topic, "orders"));
            assert!(
                !a.authorize("User:bob", "h", Read, topic, "orders"),
                "ACLs exist"
            );
            assert_eq!(
                a.authorize("User:bob", "h", Read, topic, "other"),
                allow_everyone
            );
            assert_eq!(
                a.authorize(
                    "User:bob",
                    "h",
                    ClusterAction,
                    ResourceType::Cluster,
                    CLUSTER_NAME
                ),
                allow_everyone
            );
        }
        let a = authorizer(false, &records)?;
        assert!(a.authorize_any("User:alice", "h", Read, ResourceType::Topic));
        assert!(!a.authorize_any("User:bob", "h", Read, ResourceType::Topic));
        assert!(a.authorize_any("User:admin", "h", Write, ResourceType::Topic));
        let open = authorizer(true, &[])?;
        assert!(open.authorize_any("User:bob", "h", Write, ResourceType::Topic));
        Ok(())
    }
}
